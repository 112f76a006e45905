"""The rollout harness: run a model as the assistant on sap records or BFCL multi-turn files and score it."""
from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sap.eval.rollout import ROLE, Rollout, TurnRollout, run_rollout
from sap.eval.score import (
    ERROR_KINDS,
    RolloutScore,
    score_rollout,
    summarize,
    task_rewards,
)
from sap.eval.tasks import EvalTask, EvalTurn, task_from_record, tasks_from_records
from sap.jsonutil import read_records
from sap.llm import LLMClient, ModelConfig
from sap.provenance.external import detect_format, load_bfcl

__all__ = ["ERROR_KINDS", "EvalResult", "EvalTask", "EvalTurn", "ROLE", "Rollout", "RolloutScore", "TurnRollout",
           "evaluate", "load_tasks", "run_rollout", "score_rollout", "summarize", "task_from_record", "task_rewards"]


def load_tasks(path: str | Path, answers: str | Path | None = None, toolset: str | None = None,
               cache_db: str | None = None) -> list[EvalTask]:
    """The tasks of a JSONL file of sap records, or of a BFCL multi-turn question file (with its possible_answer
    file: `answers`, or possible_answer/<same name> beside it). The format is the first record's; cache-mode
    records play on their cache in the run database `cache_db`."""
    rows = list(read_records(path))
    if not rows:
        raise ValueError(f"{path}: no records")
    try:
        fmt = detect_format(rows[0][1])
    except ValueError as exc:
        raise ValueError(f"{path}:{rows[0][0]}: {exc}") from exc
    if fmt == "bfcl":
        from sap.eval.bfcl import task_from_bfcl

        records = load_bfcl(path, answers)
        try:
            return [task_from_bfcl(record) for record in records]
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    if fmt != "sap":
        raise ValueError(f"{path}: OpenAI-messages records carry no executable initial state; give sap records "
                         f"(from sap synthesize) or a BFCL multi-turn question file")
    from sap.cache.store import cache_opener  # here: sqlalchemy only for the files that ask for it

    return tasks_from_records(rows, path, toolset, cache_opener(cache_db))


@dataclass
class EvalResult:
    """Every rollout and its score (task order, then sample order), and the run's summary."""

    rollouts: list[Rollout]
    scores: list[RolloutScore]
    summary: dict[str, Any]


def evaluate(tasks: list[EvalTask], cfg: ModelConfig, k: int = 1, max_steps: int = 8, concurrency: int = 1,
             client: LLMClient | None = None, w_atomic: float = 0.5, w_orch: float = 0.5,
             on_task: Callable[[dict[str, Any]], None] | None = None) -> EvalResult:
    """Run `k` rollouts of every task (at most `concurrency` at once) and score them.

    `on_task(row)` gets each task's `task_rewards` row as soon as its k rollouts are done, so a run that
    stops early (an exception, Ctrl-C) has already handed over every finished task."""
    if k < 1 or max_steps < 1 or concurrency < 1:
        raise ValueError(f"-k, --max-steps and --concurrency must be at least 1, got {k}, {max_steps}, {concurrency}")
    client = client or LLMClient()
    jobs = [(task, sample) for task in tasks for sample in range(k)]
    rollouts: list[Rollout | None] = [None] * len(jobs)
    scores: list[RolloutScore | None] = [None] * len(jobs)
    left = [k] * len(tasks)
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="sap-eval")
    try:
        futures = {pool.submit(run_rollout, task, client, cfg, sample, max_steps): i
                   for i, (task, sample) in enumerate(jobs)}
        for future in as_completed(futures):
            i = futures[future]
            rollouts[i] = future.result()
            scores[i] = score_rollout(jobs[i][0], rollouts[i], w_atomic, w_orch)
            left[i // k] -= 1
            if left[i // k] == 0 and on_task is not None:
                first = i // k * k
                on_task(task_rewards(scores[first:first + k])[0])
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    summary = {"tasks": len(tasks), "samples": k, **summarize(scores), "usage": client.ledger.snapshot()["total"]}
    return EvalResult(rollouts, scores, summary)
