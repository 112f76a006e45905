"""The RODS loop offline: an active pool of seed records stepped by the rollout harness instead of a trainer, so a
model's own rollouts place each task in a zone and variants of its boundary tasks grow a dataset at its boundary."""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from sap.curriculum.config import PoolConfig
from sap.curriculum.pool import ActivePool, EpochReport
from sap.errors import SapError
from sap.eval import evaluate
from sap.eval.score import RolloutScore
from sap.eval.tasks import task_from_record
from sap.llm import LLMClient, ModelConfig
from sap.model import Toolset
from sap.store.runs import RunStore
from sap.toolsets.bfcl import LONG_CONTEXT

CATEGORIES = ("base", "miss_param", "miss_func", "long_context")  # the task types RODS counts seeds by


@dataclass(frozen=True)
class FrontierSettings:
    """How the pool is stepped: `steps` in all (a continued run goes on to this many), `batch` tasks per step,
    `k` rollouts per task, an epoch end every `epoch_steps` steps; the harness's limits and reward weights."""

    steps: int = 20
    batch: int = 8
    k: int = 4
    epoch_steps: int = 5
    max_steps: int = 8
    concurrency: int = 4
    w_atomic: float = 0.5
    w_orch: float = 0.5

    def __post_init__(self) -> None:
        low = [f"{f.name} must be at least 1, got {getattr(self, f.name)}" for f in fields(self)
               if f.type == "int" and getattr(self, f.name) < 1]
        if low:
            raise ValueError(", ".join(low))


class ModelUnreachable(SapError, RuntimeError):
    """Every rollout of a step ended by a model error: stepping on would measure the server, not the model."""


@dataclass
class StepLog:
    """What one invocation of `run_frontier` did: rollouts run, those ended by model errors, the first such error,
    and the epoch reports."""

    rollouts: int = 0
    failed: int = 0
    first_failure: str | None = None
    epochs: list[EpochReport] = field(default_factory=list)


def pool_id_for(model: str, seeds: list[dict[str, Any]]) -> str:
    """The pool of one model on one seed set: the same model and seed records give the same id, so a second
    invocation continues the pool."""
    digest = hashlib.sha256(json.dumps([model, seeds], sort_keys=True).encode()).hexdigest()
    return f"frontier-{digest[:12]}"


def task_category(record: dict[str, Any]) -> str:
    """A record's task type in the pool, its category as BFCL and RODS name them: long_context on a long-context
    toolset (BFCL's `bfcl/A+B:long_context`), else the record's kind (base, miss_param or miss_func)."""
    meta = record.get("meta") or {}
    if str(meta.get("toolset") or "").endswith(LONG_CONTEXT):
        return "long_context"
    kind = meta.get("kind") or meta.get("rewrite_kind") or "base"
    if kind not in CATEGORIES:
        raise ValueError(f"record {record.get('id')!r}: meta.kind {kind!r} is not a task category "
                         f"({', '.join(CATEGORIES)})")
    return kind


def open_pool(store: RunStore, pool_id: str, seeds: list[dict[str, Any]],
              config: PoolConfig | None = None) -> tuple[ActivePool, bool]:
    """(pool, continued): the stored pool `pool_id` if `store` holds it, else a new one with `config`; every seed
    record not in it yet is added as a protected seed of its category (`task_category`), so a run stopped while
    seeding completes. A `config` other than the stored pool's is refused."""
    continued = store.has_pool(pool_id)
    if continued:
        pool = ActivePool.load(store, pool_id)
        if config is not None and config != pool.config:
            changed = sorted(k for k, v in config.model_dump().items() if pool.config.model_dump()[k] != v)
            raise ValueError(f"pool {pool_id} in {store.url} was started with another pool config (differs in "
                             f"{', '.join(changed)}); drop --pool-config to continue it, or use another --db")
    else:
        pool = ActivePool(config or PoolConfig(), store=store, pool_id=pool_id)
    for record in seeds:
        if record["id"] not in pool.tasks:
            pool.add_seed(record["id"], task_category(record), record)
    return pool, continued


def _end_epochs(pool: ActivePool, epoch_steps: int, log: StepLog) -> None:
    """End every epoch the step count has passed (also one a stopped run left pending)."""
    while pool.epoch < pool.step // epoch_steps:
        log.epochs.append(pool.end_epoch())


def _by_task(scores: list[RolloutScore]) -> dict[str, list[RolloutScore]]:
    grouped: dict[str, list[RolloutScore]] = {}
    for score in scores:
        grouped.setdefault(score.task_id, []).append(score)
    return grouped


def run_frontier(pool: ActivePool, model: ModelConfig, settings: FrontierSettings,
                 toolset: Callable[[dict[str, Any]], Toolset],
                 client: LLMClient | None = None, on_task: Callable[[dict[str, Any]], None] | None = None,
                 log: StepLog | None = None) -> StepLog:
    """Step `pool` until `settings.steps` steps are done: sample a batch (at most the active tasks, no repeats),
    run `k` rollouts of each task with the harness, report each task's zone rewards (`PoolConfig.zone_reward`), and
    end epochs on schedule (the pool's synthesis, if attached, gets the boundary seeds).

    Rollouts ended by a model error (the server, not the model's skill) are not reported: a task whose every
    rollout failed keeps its rewards as they were. `on_task` gets one row per task and step: step, task_id,
    rewards (progress), graduated, failed (rollouts ended by model errors). `toolset(record)` is the toolset a
    task's record runs on. Raises ModelUnreachable if every rollout of a step failed; `log` (returned, or the caller's)
has the counts up to there."""
    client = client or LLMClient()
    log = log if log is not None else StepLog()
    _end_epochs(pool, settings.epoch_steps, log)
    while pool.step < settings.steps:
        batch = pool.sample_batch(min(settings.batch, len(pool.active())))
        step = pool.step - 1
        tasks = [task_from_record(pool.payload(t.id), toolset(pool.payload(t.id))) for t in batch]
        result = evaluate(tasks, model, k=settings.k, max_steps=settings.max_steps, concurrency=settings.concurrency,
                          client=client, w_atomic=settings.w_atomic, w_orch=settings.w_orch)
        for task_id, scores in _by_task(result.scores).items():
            done = [s for s in scores if s.failed is None]
            if done:
                pool.report(task_id, [s.progress if pool.config.zone_reward == "progress" else s.reward.score
                                      for s in done])
            if on_task is not None:
                on_task({"step": step, "task_id": task_id, "rewards": [s.progress for s in done],
                         "graduated": [s.reward.score for s in done], "failed": len(scores) - len(done)})
        failed = [s.failed for s in result.scores if s.failed is not None]
        log.rollouts += len(result.scores)
        log.failed += len(failed)
        log.first_failure = log.first_failure or next(iter(failed), None)
        if len(failed) == len(result.scores):
            raise ModelUnreachable(f"every rollout of step {step} ended by a model error; first: {failed[0]}")
        _end_epochs(pool, settings.epoch_steps, log)
    return log


def origin_seed(pool: ActivePool, task_id: str) -> str:
    """The original seed a task descends from (itself for a seed)."""
    task = pool.tasks[task_id]
    while task.origin != "seed" and task.parent in pool.tasks:
        task = pool.tasks[task.parent]
    return task.id


def task_rows(pool: ActivePool, graduated: dict[str, list[float]]) -> list[dict[str, Any]]:
    """One row per task the pool holds, in id order: lineage, status, zone, mean progress reward over the recent
    window, mean graduated reward over `graduated[id]`, rollouts."""
    rows = []
    for task_id in sorted(pool.tasks):
        task, grads = pool.tasks[task_id], graduated.get(task_id) or []
        rows.append({"id": task_id, "origin": task.origin, "seed": origin_seed(pool, task_id), "parent": task.parent,
                     "type": task.type, "status": task.status, "zone": pool.zone(task_id), "mean": pool.mean(task_id),
                     "graduated": sum(grads) / len(grads) if grads else None, "rollouts": task.rollouts,
                     "retired": task.retired_reason})
    return rows


def kept_variants(pool: ActivePool) -> list[dict[str, Any]]:
    """The records of the variants not retired (active, or queued and not measured yet), in id order."""
    return [pool.payload(t.id) for t in sorted(pool.tasks.values(), key=lambda t: t.id)
            if t.origin == "variant" and t.status != "retired"]


def frontier_summary(pool: ActivePool) -> dict[str, Any]:
    """The pool's figures: steps and epochs, seeds per zone and the boundary seeds, boundary tasks, and the
    variants made (ever queued), injected, retired (per reason), queued and active."""
    seeds = sorted(t.id for t in pool.tasks.values() if t.origin == "seed")
    seed_zones = {zone: sorted(i for i in seeds if pool.zone(i) == zone)
                  for zone in ("mastered", "boundary", "out_of_reach", "unrated")}
    active_variants = [t.id for t in pool.active() if t.origin == "variant"]
    retired = Counter({key.removeprefix("retired_"): n for key, n in pool.counts.items()
                       if key.startswith("retired_")})
    return {
        "pool": pool.pool_id, "steps": pool.step, "epochs": pool.epoch,
        "seeds": len(seeds), "seed_zones": {zone: len(ids) for zone, ids in seed_zones.items()},
        "boundary_seeds": seed_zones["boundary"],
        "boundary_tasks": sum(pool.zone(t.id) == "boundary" for t in pool.active()),
        "boundary_variants": sum(pool.zone(i) == "boundary" for i in active_variants),
        "variants": {"made": pool.queued, "injected": pool.counts["injected"], "retired": sum(retired.values()),
                     "retired_by": dict(sorted(retired.items())), "queued": len(pool.queue()),
                     "active": len(active_variants), "dropped_from_queue": pool.counts["dropped_from_queue"]},
    }
