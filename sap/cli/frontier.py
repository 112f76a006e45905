"""`sap frontier`: its options, and the run that loads the seeds, steps the pool, and writes the variants, the
per-task zones, the rollout log and the summary."""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

from sap.cli.common import agents_args, agents_config, db_args, open_store, write_jsonl
from sap.cli.eval import add_model_args, model_config, reward_weights

OUTPUTS = ("variants.jsonl", "tasks.jsonl", "rollouts.jsonl", "summary.json")


def add_frontier_args(p: argparse.ArgumentParser) -> None:
    """The options of `sap frontier` (the agents of the variant pipeline and --db are added by the caller)."""
    add_model_args(p)
    p.set_defaults(k=4)
    p.add_argument("--data", required=True, help="seed tasks: sap records (JSONL from sap synthesize), or a BFCL "
                   "multi-turn question file (its ground truth replayed into sap records)")
    p.add_argument("--answers", help="the BFCL possible_answer file of --data (default: possible_answer/<same name> "
                   "beside it)")
    p.add_argument("-o", "--output", required=True, help="directory for variants.jsonl, tasks.jsonl, rollouts.jsonl "
                   "and summary.json (made if missing)")
    p.add_argument("--steps", type=int, default=20, help="pool steps in all; a continued run goes on to this many")
    p.add_argument("--batch", type=int, default=8, help="tasks per step (at most the active tasks)")
    p.add_argument("--epoch-steps", type=int, default=5, help="steps per epoch (injection, retirement, seeding)")
    p.add_argument("--pool-config", help="JSON or TOML file of PoolConfig fields (thresholds, quotas, cool-down)")
    p.add_argument("--per-seed", type=int, default=2, help="variants made per boundary seed each time it seeds")
    p.add_argument("--rounds", type=int, default=3, help="plan/execute rounds per variant")
    p.add_argument("--one-shot", action="store_true", help="RODS's one-shot ablation: one plan/execute round per "
                   "variant and no dual repair of c0 (--rounds is ignored)")
    p.add_argument("--synthesis-workers", type=int, default=1, help="threads making variants in the background "
                   "(0: inline at each epoch end)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def _pool_config(path: str | None) -> Any:
    """The PoolConfig of a JSON or TOML file (None without one); a bad file or field is named."""
    from pydantic import ValidationError

    from sap.curriculum.config import PoolConfig

    if path is None:
        return None
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text) if path.endswith(".toml") else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"--pool-config {path}: not valid {'TOML' if path.endswith('.toml') else 'JSON'}: {exc}") from exc
    try:
        return PoolConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "(file)"
        raise ValueError(f"--pool-config {path}: field {where}: {first['msg']}") from exc


def _seeds(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The seed records; each is checked to be a usable task (`tasks_from_records` also checks the toolset it
    names) of a known category, naming file and line."""
    from sap.curriculum.frontier import task_category
    from sap.eval.tasks import tasks_from_records
    from sap.jsonutil import read_records
    from sap.provenance.external import detect_format

    rows = list(read_records(args.data))
    if not rows:
        raise ValueError(f"{args.data}: no records")
    first = None
    with contextlib.suppress(ValueError):  # an unknown first record is named by the check below
        first = detect_format(rows[0][1])
    if first == "bfcl":
        rows = _bfcl_rows(args)
    for line, record in rows:
        try:
            fmt = detect_format(record)
        except ValueError as exc:
            raise ValueError(f"{args.data}:{line}: {exc}") from exc
        if fmt != "sap":
            raise ValueError(f"{args.data}:{line}: a {fmt} record; the seeds must be sap records (from sap "
                             f"synthesize) or a BFCL question file: variants are made from their provenance and "
                             f"executor state")
    tasks_from_records(rows, args.data, args.toolset)
    seen: dict[str, int] = {}
    for line, record in rows:
        if record["id"] in seen:
            raise ValueError(f"{args.data}:{line}: seed id {record['id']!r} repeats line {seen[record['id']]}")
        seen[record["id"]] = line
        try:
            task_category(record)
        except ValueError as exc:
            raise ValueError(f"{args.data}:{line}: {exc}") from exc
    return [record for _, record in rows]


def _toolset_name(record: dict[str, Any], args: argparse.Namespace) -> str:
    """The toolset a seed record (or a variant, whose meta names its seed's) runs on: --toolset, else its own."""
    from sap.toolsets import data_toolset_name

    return data_toolset_name(record["meta"].get("toolset"), args.toolset)


def _bfcl_rows(args: argparse.Namespace) -> list[tuple[int, dict[str, Any]]]:
    """The seeds of a BFCL question file as numbered sap records; the tasks that cannot seed are named on stderr."""
    from sap.curriculum.bfcl_seeds import bfcl_seed_records

    seeds, skipped = bfcl_seed_records(args.data, args.answers)
    for reason in skipped:
        print(f"sap frontier: left out {reason}", file=sys.stderr)
    if not seeds:
        raise ValueError(f"{args.data}: no BFCL task can seed variants ({len(skipped)} left out)")
    return list(enumerate(seeds, start=1))


def _graduated(path: Path) -> dict[str, list[float]]:
    """task id -> graduated rewards of every rollout in the rollout log (an unfinished last line is skipped)."""
    out: dict[str, list[float]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            out.setdefault(row["task_id"], []).extend(row["graduated"])
    return out


def run_frontier_command(args: argparse.Namespace) -> int:
    """Load the seeds into the pool of (model, seeds) in the run store (or continue it), step it with rollouts of
    the model, make variants of its boundary seeds in the background, then write the outputs and print the
    summary. The store is opened once the input has been checked."""
    from sap.agents.config import build_agents
    from sap.curriculum.frontier import (
        FrontierSettings,
        ModelUnreachable,
        StepLog,
        frontier_summary,
        kept_variants,
        open_pool,
        pool_id_for,
        run_frontier,
        task_category,
        task_rows,
    )
    from sap.curriculum.online import OnlineSynthesis, variant_maker
    from sap.graphs.variant import VariantContext
    from sap.llm import LLMClient
    from sap.toolsets import load_toolset

    w_atomic, w_orch = reward_weights(args)
    settings = FrontierSettings(steps=args.steps, batch=args.batch, k=args.k, epoch_steps=args.epoch_steps,
                                max_steps=args.max_steps, concurrency=args.concurrency, w_atomic=w_atomic,
                                w_orch=w_orch)
    if args.per_seed < 1 or args.rounds < 1 or args.synthesis_workers < 0:
        raise ValueError(f"--per-seed and --rounds must be at least 1 and --synthesis-workers at least 0, got "
                         f"{args.per_seed}, {args.rounds}, {args.synthesis_workers}")
    out_dir = Path(args.output)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"output {out_dir} is not a directory")
    config = _pool_config(args.pool_config)
    seeds = _seeds(args)
    cfg = model_config(args)
    store = open_store(args)
    out_dir.mkdir(parents=True, exist_ok=True)

    toolsets: dict[str, Any] = {}

    def toolset(name: str) -> Any:
        if name not in toolsets:
            toolsets[name] = load_toolset(name)
        return toolsets[name]

    agents_client = LLMClient()
    agents = build_agents(agents_config(args, "agents-"), agents_client)
    limits = {"max_rounds": 1, "max_repairs": 0} if args.one_shot else {"max_rounds": args.rounds}
    makers = {name: variant_maker(VariantContext.from_agents(toolset(name), agents, **limits), per_seed=args.per_seed)
              for name in {_toolset_name(r, args) for r in seeds}}
    pool, continued = open_pool(store, pool_id_for(args.model, seeds), seeds, config)
    print(f"{'continuing' if continued else 'new'} pool {pool.pool_id} in {store.url}: {len(seeds)} seeds, "
          f"{len(pool.active())} active tasks, step {pool.step}/{settings.steps}", flush=True)
    synthesis = OnlineSynthesis(pool, lambda seed, record: makers[_toolset_name(record, args)](seed, record),
                                args.synthesis_workers, type_of=task_category)
    pool.synthesis = synthesis
    client = LLMClient()
    status, done = 0, StepLog()
    with open(out_dir / "rollouts.jsonl", "a", encoding="utf-8") as rollout_log:
        def log_rollouts(row: dict[str, Any]) -> None:
            rollout_log.write(json.dumps(row) + "\n")
            rollout_log.flush()

        try:
            run_frontier(pool, cfg, settings, lambda record: toolset(_toolset_name(record, args)), client=client,
                         on_task=log_rollouts, log=done)
        except KeyboardInterrupt:
            print(f"interrupted at step {pool.step}; the pool is kept in {store.url}: run the same command to "
                  f"continue it", file=sys.stderr)
            return 130
        except ModelUnreachable as exc:
            print(f"sap frontier: {exc}", file=sys.stderr)
            status = 1
        finally:
            synthesis.drain()
            synthesis.close()
    write_jsonl(out_dir / "variants.jsonl", kept_variants(pool))
    write_jsonl(out_dir / "tasks.jsonl", task_rows(pool, _graduated(out_dir / "rollouts.jsonl")))
    summary = {**frontier_summary(pool), "model": args.model,
               "ablations": {"reward": args.reward, "signal": pool.config.signal, "retire": pool.config.retire,
                             "generation": "one_shot" if args.one_shot else "dual_repair"},
               "run": {"rollouts": done.rollouts, "failed_rollouts": done.failed, "first_failure": done.first_failure,
                       "epochs_ended": len(done.epochs), "injected": sum(len(e.injected) for e in done.epochs),
                       "synthesis_errors": len(synthesis.errors),
                       "first_synthesis_error": synthesis.errors[0] if synthesis.errors else None,
                       "usage": client.ledger.snapshot()["total"],
                       "agents_usage": agents_client.ledger.snapshot()["total"]},
               "outputs": {name: str(out_dir / name) for name in OUTPUTS}}
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(summary))
        return status
    _print_summary(summary)
    return status


def _print_summary(s: dict[str, Any]) -> None:
    run, zones, v = s["run"], s["seed_zones"], s["variants"]
    print(f"pool {s['pool']}: {s['steps']} steps, {s['epochs']} epochs of {s['model']}; this run {run['rollouts']} "
          f"rollouts" + (f" ({run['failed_rollouts']} ended by model errors)" if run["failed_rollouts"] else ""))
    if run["first_failure"]:
        print(f"  first model error: {run['first_failure']}")
    print(f"  seeds: {s['seeds']}: {zones['mastered']} mastered, {zones['boundary']} boundary, "
          f"{zones['out_of_reach']} out of reach, {zones['unrated']} unrated")
    print(f"  boundary tasks: {s['boundary_tasks']} ({len(s['boundary_seeds'])} seeds, {s['boundary_variants']} "
          f"variants)")
    retired = ", ".join(f"{k} {n}" for k, n in v["retired_by"].items())
    print(f"  variants: {v['made']} made, {v['injected']} injected, {v['retired']} retired"
          + (f" ({retired})" if retired else "") + f", {v['queued']} queued, {v['active']} active")
    if run["synthesis_errors"]:
        seed, error = run["first_synthesis_error"]
        print(f"  {run['synthesis_errors']} seeds made no variants; first: {seed}: {error}")
    for who, usage in (("model", run["usage"]), ("variant agents", run["agents_usage"])):
        print(f"  LLM, {who}: {usage['calls']} calls, {usage['prompt_tokens']}+{usage['completion_tokens']} "
              f"tokens, ${usage['cost_usd']:.4f}")
    print("  -> " + ", ".join(s["outputs"].values()))


def add_commands(sub: Any) -> None:
    """Register `sap frontier`."""
    p = sub.add_parser("frontier", help="RODS offline: find a model's boundary tasks by rollouts and grow variants "
                       "of them")
    add_frontier_args(p)
    agents_args(p, prefix="agents-")
    db_args(p)
    p.set_defaults(fn=run_frontier_command)
