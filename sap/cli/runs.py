"""`sap toolsets`, `synthesize`, `resume`, `worker`, `runs` and `variants`: runs of the synthesis pipeline."""
from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext
from typing import Any

from sap.cli.common import (
    agents_args,
    db_url,
    agents_config,
    ray_args,
    check_owner,
    check_ray_args,
    check_run_args,
    check_writable,
    db_args,
    drive,
    open_store,
    run_args,
)
from sap.errors import UsageError


def _cmd_toolsets(args: argparse.Namespace) -> int:
    from sap.toolsets import KINDS, ToolsetUnavailable, load_toolset

    rows, missing = [], {}
    for kind in KINDS:
        for name in kind.names():
            try:
                ts = load_toolset(name)
            except ToolsetUnavailable as exc:  # listed all the same, with how to install it
                rows.append({"name": name, "tools": None, "description": f"(not installed) {exc}"})
                missing.setdefault(kind.form, str(exc))
                continue
            rows.append({"name": name, "tools": len(ts.tools), "description": ts.description})
    if args.json:
        print(json.dumps(rows))
    else:
        shown = [r for r in rows if r["tools"] is not None]
        width = max(len(r["name"]) for r in shown)
        for r in shown:
            print(f"{r['name']:<{width}}  {r['tools']:>3} tools  {r['description']}")
        for form, why in missing.items():
            print(f"{form}: not available: {why}")
    return 0


def cli_flag(name: str) -> str:
    """How the command line spells a run setting (`min_turns` -> `--min-turns`, `n` -> `-n`)."""
    return "-n" if name == "n" else "--" + name.replace("_", "-")


def dry_run_plan(args: argparse.Namespace, toolset: Any, settings: Any) -> str:
    """What `sap synthesize` would do with these arguments, in lines: toolset, target and slots, agents and models,
    database (and whether a run there would be continued), output; with LLM roles, the calls per slot and the cost
    measured on a few slots against a stand-in model. Reads the database if it exists; writes nothing of the user's."""
    from sap.api import find_run
    from sap.store.runs import existing_store, missing_database

    config = settings.run_config()
    roles = settings.agents.roles
    models = sorted(f"{role} {rc.model.model}" for role, rc in roles.items() if rc.agents == "llm" and rc.model)
    rule = sorted(role for role, rc in roles.items() if rc.agents == "rule")
    agents = ("LLM roles: " + ", ".join(models) + (f"; rule roles: {', '.join(rule)}" if rule else "")) if models \
        else "rule agents on every role (offline, no LLM calls)"
    if path := missing_database(args.db):
        check_owner(None, args.output, args.overwrite, None)
        database = f"{args.db} (a new database file {path} would be created; a new run)"
    else:
        store = existing_store(args.db)
        run_id = find_run(store, toolset, settings, args.new_run)
        check_owner(store, args.output, args.overwrite, run_id)
        database = f"{args.db}: " + (f"continues run {run_id} ({store.counts(run_id).get('accepted', 0)} of "
                                     f"{settings.n} accepted)" if run_id else "a new run")
    from sap.cli.estimate import estimate_cost

    cost = estimate_cost(toolset, settings).lines() if settings.agents.uses_llm() else \
        ["  cost      $0: no LLM calls"]
    return "\n".join([
        "dry run: nothing is run or written",
        f"  toolset   {toolset.name} ({len(toolset.tools)} tools)",
        f"  records   {settings.n} accepted, at most {config['max_slots']} slots; seed {settings.seed}; mix "
        + (",".join(f"{k}={v:g}" for k, v in settings.mix.items()) if settings.mix else "base=1"),
        f"  turns     {settings.limits['min_turns']} to {settings.limits['max_turns']} user turns; long-tail emphasis "
        + ("off" if not settings.limits.get("emphasis_size") else "on") + f"; {settings.limits['user_style']} user style",
        f"  agents    {agents}",
        f"  slots     {settings.concurrency} at once; cost cap " + (f"${settings.max_cost:g}" if settings.max_cost
                                                                     is not None else "none"),
        f"  database  {database}",
        f"  output    {args.output} (and {args.output}.rejections.jsonl)"
        + ("; records truncated at a failing turn left out" if args.drop_truncated else ""), *cost])


def _cmd_synthesize(args: argparse.Namespace) -> int:
    from sap.runs.settings import ABLATIONS, RunSettings
    from sap.runs.slots import parse_mix

    mix = parse_mix(args.mix)
    settings = RunSettings(n=args.n, seed=args.seed, mix=mix if args.mix != "base=1" else None,
                           max_slots=args.max_slots, concurrency=args.concurrency, max_cost=args.max_cost,
                           limits={"min_turns": args.min_turns, "max_turns": args.max_turns,
                                   "emphasis_size": 0 if args.no_emphasis else 3, "user_style": args.user_style},
                           agents=agents_config(args),
                           ablations=tuple(name for name in ABLATIONS if getattr(args, name)))
    settings.check(cli_flag)
    check_writable(args.output)
    check_ray_args(args)
    # the pipeline loads only once the arguments are known to be good
    from sap.api import find_run
    from sap.runs.driver import start_run
    from sap.toolsets import load_toolset

    toolset = load_toolset(args.toolset)
    if args.dry_run:
        print(dry_run_plan(args, toolset, settings))
        return 0
    store = open_store(args)
    run_id = find_run(store, toolset, settings, args.new_run)
    check_owner(store, args.output, args.overwrite, run_id)
    if run_id:
        print(f"continuing run {run_id} (same settings) in {args.db}", flush=True)
    else:
        run_id = start_run(store, toolset, settings.run_config())
        print(f"run {run_id} in {args.db}", flush=True)
    store.set_output(run_id, args.output, args.drop_truncated)
    args.toolset_spec = args.toolset  # what a Ray actor on another node loads
    return drive(args, store, run_id, toolset, args.output)


def _cmd_resume(args: argparse.Namespace) -> int:
    from sap.api import run_toolset_name
    from sap.toolsets import load_toolset

    check_run_args(args)
    check_ray_args(args)
    store = open_store(args, create=False)
    run = store.run(args.run)
    if getattr(args, "retry_failed", False):
        print(f"{store.retry_failed(run.id)} failed slots of run {run.id} go back to pending", flush=True)
    remembered = store.output(run.id)
    output = args.output or (remembered.path if remembered else None)
    if args.output:
        check_writable(args.output)
        check_owner(store, args.output, args.overwrite, run.id)
        store.set_output(run.id, args.output, remembered.drop_truncated if remembered else False)
    args.drop_truncated = bool(remembered and remembered.drop_truncated)
    if run.config.get("mode") == "cache":  # a cache run: its cache and templates are in the database
        from sap.runs.cache import CacheRunDriver

        print(f"resuming run {run.id} in {args.db}", flush=True)
        return drive(args, store, run.id, None, output, driver_cls=CacheRunDriver)
    args.toolset_spec = run_toolset_name(store, run.id, args.toolset)
    toolset = load_toolset(args.toolset_spec)
    if toolset.source:  # given with --toolset: the resume commands printed from now on name this file
        store.set_toolset_source(run.id, toolset.source)
    print(f"resuming run {run.id} in {args.db}" + (f" -> {output}" if output else ""), flush=True)
    return drive(args, store, run.id, toolset, output)


def _cmd_runs(args: argparse.Namespace) -> int:
    from sap.store.runs import list_runs, missing_database

    if path := missing_database(args.db):  # nothing has run here: say so, and create no database
        print(f"no run database at {path} (--db {args.db})", file=sys.stderr)
        if args.json:
            print("[]")
        return 0
    rows = list_runs(args.db)
    if args.json:
        print(json.dumps(rows))
        return 0
    for r in rows:
        print(f"{r['id']}  {r['status']:<11} {r['toolset']:<12} {r['accepted']}/{r['target']} accepted, "
              f"{r['rejected']} rejected, {r['failed']} failed, cost ${r['cost_usd']:.2f}  ({r['created']})"
              + (f"\n    continue with: {r['resume']}" if r["resume"] else ""))
    return 0


def _cmd_variants(args: argparse.Namespace) -> int:
    from sap.agents.config import build_agents
    from sap.graphs.variant import AUGMENT_KINDS, VariantContext, make_variants
    from sap.jsonutil import read_records
    from sap.llm import LLMClient
    from sap.store.checkpoint import checkpointer_for
    from sap.toolsets import toolset_for_data

    if args.n < 1:
        raise UsageError(f"-n must be at least 1, got {args.n}")
    augment = tuple(k for k in args.augment.split(",") if k) if args.augment else ()
    if bad := [k for k in augment if k not in AUGMENT_KINDS]:
        raise UsageError(f"--augment: unknown kind {bad[0]!r}; kinds are {', '.join(AUGMENT_KINDS)}")
    check_writable(args.output)
    rows = list(read_records(args.seeds))
    if not rows:
        raise UsageError(f"{args.seeds} holds no records")
    loaded: dict[str, Any] = {}
    for line, record in rows:
        toolset_for_data((record.get("meta") or {}).get("toolset"), args.toolset, f"{args.seeds}:{line}", loaded)
    if len(loaded) != 1:
        raise UsageError(f"{args.seeds}: the seeds must share one toolset named in meta.toolset (found "
                         f"{sorted(loaded)}); pass --toolset")
    seeds = [record for _, record in rows]
    (toolset,) = loaded.values()
    agents = agents_config(args)
    ctx = VariantContext.from_agents(toolset, build_agents(agents, LLMClient()), max_rounds=args.rounds)
    kept = failed = 0
    with open(args.output, "w", encoding="utf-8") as out, \
            (checkpointer_for(args.db) if args.db else nullcontext()) as saver:
        for seed in seeds:
            for outcome in make_variants(ctx, seed, args.n, augment, checkpointer=saver):
                if not outcome.records:
                    failed += 1
                    print(f"{seed['id']} variant {outcome.index}: {outcome.reason}", file=sys.stderr)
                    continue
                kept += 1
                for record in outcome.records:
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"{kept} variants kept, {failed} not, from {len(seeds)} seeds -> {args.output}")
    return 0 if kept else 1


def add_commands(sub: Any) -> None:
    """Register toolsets, synthesize, resume, worker, runs and variants."""
    p = sub.add_parser("toolsets", help="list the built-in toolsets")
    p.add_argument("--json", action="store_true", help="print a JSON list of {name, tools, description}")
    p.set_defaults(fn=_cmd_toolsets)
    p = sub.add_parser("synthesize", help="synthesize trajectories into a JSONL file")
    p.add_argument("--toolset", required=True, help="built-in name or path to a domain module (.py)")
    p.add_argument("-n", type=int, required=True, help="number of accepted trajectories wanted")
    p.add_argument("-o", "--output", required=True, help="JSONL file to write")
    p.add_argument("--seed", type=int, default=0, help="run seed (same seed, same output)")
    p.add_argument("--min-turns", type=int, default=3, help="fewest user turns per trajectory")
    p.add_argument("--max-turns", type=int, default=8, help="most user turns per trajectory")
    p.add_argument("--mix", default="base=1", help="shares of record kinds, e.g. base=0.6,miss_param=0.2,miss_func=0.2")
    p.add_argument("--no-emphasis", action="store_true", help="turn long-tail emphasis off")
    p.add_argument("--user-style", choices=("goal", "explicit"), default="goal",
                   help="goal: the user states goals and the assistant works out the lookups, authentication and "
                        "preconditions they need; explicit: the user asks for every call (recorded in the run's "
                        "fingerprint)")
    ablation = p.add_argument_group("ablations (SAP Table 6; each is recorded in the run's fingerprint)")
    ablation.add_argument("--no-tags", action="store_true", help="FSM without provenance declarations: each "
                          "argument takes a value of the initial configuration or a new one")
    ablation.add_argument("--no-retry", action="store_true", help="a failing call is not re-bound with its error "
                          "(one attempt; c0 repair still runs unless --no-repair)")
    ablation.add_argument("--no-repair", action="store_true", help="no c0 repair for a call that keeps failing")
    ablation.add_argument("--no-fsm", action="store_true", help="no phase structure: any tool may follow any other")
    p.add_argument("--max-slots", type=int, help="give up after this many attempted trajectories (default 5n+20)")
    p.add_argument("--new-run", action="store_true", help="start a new run even if an unfinished one matches")
    p.add_argument("--overwrite", action="store_true", help="replace -o FILE even if another run (or no run) wrote it")
    p.add_argument("--drop-truncated", action="store_true", help="leave records cut at a failing turn out of -o FILE "
                   "(the run still counts them; the summary says how many)")
    p.add_argument("--dry-run", action="store_true", help="print what would run (toolset, records, agents and "
                   "models, database, output) and stop: no run, no database, no file")
    agents_args(p)
    run_args(p)
    ray_args(p)
    db_args(p)
    p.set_defaults(fn=_cmd_synthesize)
    p = sub.add_parser("resume", help="continue a stored run from its checkpoints and fill its target")
    p.add_argument("run", help="run id, as `sap runs` lists it")
    p.add_argument("-o", "--output", help="JSONL file to write the run's records to (default: the run's own -o file)")
    p.add_argument("--overwrite", action="store_true", help="replace -o FILE even if another run (or no run) wrote it")
    p.add_argument("--toolset", help="toolset path, for a run over a domain module (default: the run's toolset)")
    p.add_argument("--retry-failed", action="store_true", help="run the slots that failed (an LLM role gave up, "
                   "a trajectory crashed) again; a retried slot's record does not count into the tool histogram")
    run_args(p)
    ray_args(p)
    db_args(p)
    p.set_defaults(fn=_cmd_resume)
    p = sub.add_parser("worker", help="join a stored run as one more worker (on SQLite: one at a time)")
    p.add_argument("run", help="run id, as `sap runs` lists it")
    p.add_argument("-o", "--output", default=None, help="JSONL file to write the run's records to once it is complete "
                   "(default: the run's own -o file)")
    p.add_argument("--overwrite", action="store_true", help="replace -o FILE even if another run (or no run) wrote it")
    p.add_argument("--toolset", help="toolset path, for a run over a domain module (default: the run's toolset)")
    run_args(p)
    ray_args(p)
    db_args(p)
    p.set_defaults(fn=_cmd_resume)
    p = sub.add_parser("runs", help="list the stored runs with their progress")
    p.add_argument("--json", action="store_true", help="print a JSON list of {id, status, accepted, target, ...}")
    db_args(p)
    p.set_defaults(fn=_cmd_runs)
    p = sub.add_parser("variants", help="RODS: topology-isomorphic variants of seed records on new values")
    p.add_argument("seeds", help="JSONL file of base records (as sap synthesize writes them)")
    p.add_argument("-n", type=int, default=1, help="variants per seed")
    p.add_argument("-o", "--output", required=True, help="JSONL file to write the kept variants (and augmentations)")
    p.add_argument("--augment", default="", help="also make these rewrites of each kept variant: miss_param,miss_func")
    p.add_argument("--rounds", type=int, default=3, help="plan/execute rounds per variant")
    p.add_argument("--toolset", help="toolset of the seeds (default: their meta.toolset)")
    p.add_argument("--db", type=db_url, help="checkpoint each variant's thread in this database (sqlite:///FILE or postgresql://)")
    agents_args(p)
    p.set_defaults(fn=_cmd_variants)
