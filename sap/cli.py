"""The `sap` command: list toolsets, synthesize, make RODS variants, validate and summarize datasets."""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Sequence

from sap.agents.config import ROLES, build_agents_config
from sap.curriculum.frontier_cli import add_frontier_args
from sap.eval.cli import add_eval_args, run_eval
from sap.llm import LLMRoleError
from sap.store.runs import StoreError, is_disk_full, sqlite_path
from sap.toolsets import Tau2Unavailable, ToolDocError, UnknownToolset, bfcl_names, load_toolset, toolset_names


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit code 2."""


def _cmd_toolsets(args: argparse.Namespace) -> int:
    rows = []
    for name in toolset_names():
        try:
            ts = load_toolset(name)
        except Tau2Unavailable as exc:  # listed all the same, with how to install it
            rows.append({"name": name, "tools": None, "description": f"(not installed) {exc}"})
            continue
        rows.append({"name": name, "tools": len(ts.tools), "description": ts.description})
    bfcl_missing = None
    for name in bfcl_names():
        try:
            ts = load_toolset(name)
        except UnknownToolset as exc:  # bfcl-eval is not installed: list the names, say how to get them
            bfcl_missing = str(exc)
            break
        rows.append({"name": name, "tools": len(ts.tools), "description": ts.description})
    if args.json:
        print(json.dumps(rows))
    else:
        width = max(len(r["name"]) for r in rows)
        for r in rows:
            print(f"{r['name']:<{width}}  {r['tools'] if r['tools'] is not None else '-':>3} tools  {r['description']}")
        if bfcl_missing:
            print(f"bfcl/<classes>: not available: {bfcl_missing}")
    return 0


def _check_writable(path: str) -> None:
    """Refuse an output path that cannot be written, before any work is done."""
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"output path {path} is a directory")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"output directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise UsageError(f"output path {path} is not writable")


class _Progress:
    """A one-line progress display on stderr when it is a terminal."""

    def __init__(self, target: int) -> None:
        self.target, self.accepted, self.dropped = target, 0, 0
        self.live = sys.stderr.isatty()

    def slot(self, index: int, status: str) -> None:
        self.accepted += status in ("accepted", "truncated")
        self.dropped += status not in ("accepted", "truncated")
        if self.live:
            done = self.accepted * 30 // self.target
            sys.stderr.write(f"\r[{'#' * done}{'.' * (30 - done)}] {self.accepted}/{self.target} accepted, "
                             f"{self.dropped} dropped")
            sys.stderr.flush()

    def close(self) -> None:
        if self.live:
            sys.stderr.write("\n")


def _write_jsonl(path: str | Path, rows: list[dict[str, Any]]) -> None:
    """Write rows as JSONL atomically: a temporary file beside `path`, then a rename (never a half-written line)."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


class _LineWriter:
    """A JSONL file written a whole line at a time, unbuffered; a failed write is cut back to the last whole line."""

    def __init__(self, path: str) -> None:
        self.file = open(path, "wb", buffering=0)
        self.size = 0

    def write(self, row: dict[str, Any]) -> None:
        """Append `row` as one line, or leave the file as it was and raise."""
        line = (json.dumps(row, ensure_ascii=False) + "\n").encode()
        rest = memoryview(line)
        try:
            while rest:
                rest = rest[self.file.write(rest):]
        except OSError:
            self.file.truncate(self.size)
            self.file.seek(self.size)
            raise
        self.size += len(line)

    def close(self) -> None:
        self.file.close()


def _full_disk(args: argparse.Namespace, exc: BaseException) -> str:
    """Which disk is full, in words: the output file's (ENOSPC) or the run database's."""
    if isinstance(exc, OSError):
        return f"output {args.output}: disk is full"
    return f"database {sqlite_path(args.db) or args.db}: disk is full"


def _open_store(args: argparse.Namespace):
    """The run store of --db."""
    from sap.store import RunStore

    return RunStore(args.db, full_sync=getattr(args, "full_sync", False))


def _drive(args: argparse.Namespace, store: Any, run_id: str, toolset: Any, output: str | None,
           driver_cls: Any = None) -> int:
    """Work on a stored run until its target is met, writing `output` as it goes and in slot order at the end
    (with `driver_cls`, e.g. the cache mode's driver, instead of RunDriver)."""
    from sap.api import reason_kind
    from sap.provenance.stats import dataset_stats
    from sap.store.checkpoint import checkpointer_for
    from sap.store.driver import RunDriver

    run = store.run(run_id)
    progress = _Progress(run.target)
    out = _LineWriter(output) if output else None
    try:
        for record in store.records(run_id):
            if out:
                out.write(record)
        with checkpointer_for(args.db, full_sync=getattr(args, "full_sync", False)) as saver:
            driver = (driver_cls or RunDriver)(store, run_id, toolset, saver, max_cost=getattr(args, "max_cost", None))
            done = driver.run(on_record=out.write if out else None, on_slot=progress.slot,
                              concurrency=getattr(args, "concurrency", 1))
        records, rejections = store.records(run_id), store.rejections(run_id)
        if output:  # in slot order: several workers accept slots out of order
            _write_jsonl(output, records)
            _write_jsonl(f"{output}.rejections.jsonl", rejections)
    except KeyboardInterrupt:
        progress.close()
        print(f"interrupted; nothing accepted is lost. Continue with: sap resume {run_id} --db {args.db}",
              file=sys.stderr)
        return 130
    except Exception as exc:
        if not is_disk_full(exc):
            raise
        progress.close()
        kept = store.counts(run_id).get("accepted", 0)
        raise StoreError(f"{_full_disk(args, exc)} (run {run_id} stopped; {kept} accepted records are kept; "
                         f"free space and run: sap resume {run_id} --db {args.db}"
                         + (f" -o {output})" if output else ")")) from exc
    finally:
        if out:
            out.close()
    progress.close()
    stats = dataset_stats(records)
    truncated = sum(bool(r["meta"].get("truncated")) for r in records)
    print(f"run {run_id}: accepted {done.accepted}/{done.target} ({truncated} truncated at a failing turn) "
          f"from {done.slots} slots" + (f" -> {output}" if output else ""))
    print(f"  P_f rate {stats['fallback_rate']:.1%} of {stats['arguments']} arguments; "
          f"{len(rejections)} rejections with reasons" + (f" -> {output}.rejections.jsonl" if output else ""))
    kinds = Counter(r["meta"]["kind"] for r in records)
    print("  kinds: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    unkept = sum(1 for r in records if r["meta"].get("rewrite_rejection"))
    if unkept:
        print(f"  {unkept} requested rewrites were not kept (their base records were exported instead)")
    for reason, count in Counter(reason_kind(r["reason"]) for r in rejections).most_common():
        print(f"  dropped {count}: {reason}")
    usage = store.usage(run_id).snapshot()
    if usage["roles"]:
        total = usage["total"]
        print(f"  LLM: {total['calls']} calls, {total['prompt_tokens']}+{total['completion_tokens']} tokens, "
              f"${total['cost_usd']:.4f}" + ("" if total["priced"] else " (some models have no price: counted as 0)"))
    if done.status == "budget":
        print(f"stopped at the cost cap (--max-cost {args.max_cost}); raise it and run: sap resume {run_id} "
              f"--db {args.db} --max-cost N", file=sys.stderr)
    return 0 if done.accepted >= done.target else 1


def _cmd_synthesize(args: argparse.Namespace) -> int:
    from sap.api import parse_mix
    from sap.store.driver import find_resumable, run_config, start_run

    if args.n < 1:
        raise UsageError(f"-n must be at least 1, got {args.n}")
    mix = parse_mix(args.mix)
    _check_writable(args.output)
    toolset = load_toolset(args.toolset)
    store = _open_store(args)
    context = {"min_turns": args.min_turns, "max_turns": args.max_turns, "emphasis_size": 0 if args.no_emphasis else 3}
    agents = _agents_config(args)
    if args.max_slots is not None and args.max_slots < args.n:
        raise UsageError(f"--max-slots must be at least -n ({args.n}), got {args.max_slots}")
    config = run_config(args.n, args.seed, mix if args.mix != "base=1" else None, context, max_slots=args.max_slots,
                        agents=agents)
    run_id = None
    if not args.new_run:
        run_id, why = find_resumable(store, toolset, config)
        if why:
            raise UsageError(f"{why}; resume it with its own settings (sap resume RUN) or pass --new-run")
    if run_id:
        print(f"continuing run {run_id} (same settings) in {args.db}", flush=True)
    else:
        run_id = start_run(store, toolset, config)
        print(f"run {run_id} in {args.db}", flush=True)
    return _drive(args, store, run_id, toolset, args.output)


def _cmd_resume(args: argparse.Namespace) -> int:
    store = _open_store(args)
    run = store.run(args.run)
    if run.config.get("mode") == "cache":  # a cache run: its cache and templates are in the database
        from sap.cache.run import CacheRunDriver

        print(f"resuming run {run.id} in {args.db}", flush=True)
        return _drive(args, store, run.id, None, args.output, driver_cls=CacheRunDriver)
    toolset = load_toolset(args.toolset or run.toolset)
    print(f"resuming run {run.id} in {args.db}", flush=True)
    return _drive(args, store, run.id, toolset, args.output)


def _cmd_runs(args: argparse.Namespace) -> int:
    store = _open_store(args)
    rows = []
    for run in store.runs():
        counts = store.counts(run.id)
        rows.append({"id": run.id, "status": run.status, "toolset": run.toolset, "accepted": counts.get("accepted", 0),
                     "target": run.target, "rejected": counts.get("rejected", 0), "failed": counts.get("failed", 0),
                     "cost_usd": round(store.usage(run.id).spent_usd(), 6),
                     "created": run.created.isoformat(timespec="seconds")})
    if args.json:
        print(json.dumps(rows))
        return 0
    for r in rows:
        print(f"{r['id']}  {r['status']:<9} {r['toolset']:<12} {r['accepted']}/{r['target']} accepted, "
              f"{r['rejected']} rejected, {r['failed']} failed, cost ${r['cost_usd']:.2f}  ({r['created']})")
    return 0


def _export_records(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The records to export: a JSONL file of sap records, or a stored run's accepted records in slot order."""
    from sap.validate import read_records

    if Path(args.source).is_file():
        records = [rec for _, rec in read_records(args.source)]
        bad = next((no for no, rec in enumerate(records, 1) if "provenance" not in rec or "meta" not in rec), None)
        if bad is not None:
            raise UsageError(f"{args.source}:{bad}: not a sap record (needs messages, provenance and meta)")
        return records
    store = _open_store(args)
    store.run(args.source)
    return store.records(args.source)


def _export_meta(args: argparse.Namespace, records: list[dict[str, Any]]) -> dict[str, Any]:
    """What a dataset card says about where the records came from: the run's settings, or the source file."""
    if Path(args.source).is_file():
        return {"source": str(args.source), "toolsets": sorted({r["meta"].get("toolset", "") for r in records})}
    run = _open_store(args).run(args.source)
    return {"run": run.id, "toolset": run.toolset, "seed": run.seed, "target": run.target, **run.config}


def _cmd_export(args: argparse.Namespace) -> int:
    if args.format in ("bfcl", "hf") and Path(args.output).is_file():
        raise UsageError(f"output {args.output} is a file; --format {args.format} writes a directory")
    if args.format == "bfcl":
        from sap.export.bfcl import BfclExportError, write_bfcl

        records = _export_records(args)
        try:
            questions, answers = write_bfcl(records, Path(args.output), args.name, load_toolset)
        except BfclExportError as exc:
            raise UsageError(str(exc)) from exc
        print(f"{len(records)} records of {args.source} -> {questions} and {answers}")
        return 0
    if args.format == "hf":
        from sap.export.hf import HFUnavailable, save_hf_dataset

        records = _export_records(args)
        try:
            save_hf_dataset(records, args.output, _export_meta(args, records))
        except HFUnavailable as exc:
            raise UsageError(str(exc)) from exc
    else:
        _check_writable(args.output)
        records = _export_records(args)
        if args.format == "sharegpt":
            from sap.export.sharegpt import to_sharegpt

            records = [to_sharegpt(r) for r in records]
        _write_jsonl(args.output, records)
    print(f"{len(records)} records of {args.source} -> {args.output} ({args.format})")
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from sap.validate import validate_file

    count, problems = validate_file(args.file, args.toolset, cache_db=args.db)
    for p in problems:
        print(p)
    print(f"{count} records, {len({p.record for p in problems})} failed")
    return 1 if problems else 0


def _cmd_variants(args: argparse.Namespace) -> int:
    from sap.agents.config import build_agents
    from sap.graphs.variant import AUGMENT_KINDS, VariantContext, make_variants
    from sap.llm import LLMClient
    from sap.store.checkpoint import checkpointer_for
    from sap.validate import read_records

    if args.n < 1:
        raise UsageError(f"-n must be at least 1, got {args.n}")
    augment = tuple(k for k in args.augment.split(",") if k) if args.augment else ()
    if bad := [k for k in augment if k not in AUGMENT_KINDS]:
        raise UsageError(f"--augment: unknown kind {bad[0]!r}; kinds are {', '.join(AUGMENT_KINDS)}")
    _check_writable(args.output)
    seeds = [record for _, record in read_records(args.seeds)]
    if not seeds:
        raise UsageError(f"{args.seeds} holds no records")
    names = {args.toolset or r.get("meta", {}).get("toolset") for r in seeds}
    if None in names or len(names) != 1:
        raise UsageError(f"{args.seeds}: the seeds must share one toolset named in meta.toolset (found "
                         f"{sorted(map(str, names))}); pass --toolset")
    toolset = load_toolset(names.pop())
    agents = _agents_config(args)
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


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _cmd_stats(args: argparse.Namespace) -> int:
    from sap.provenance.external import file_stats

    stats = file_stats(args.file, args.answers)
    if args.json:
        print(json.dumps(stats))
        return 0
    print(f"format {stats['format']}: records {stats['records']}, arguments {stats['arguments']}"
          + (" (tags inferred from the dialogue)" if stats["format"] != "sap" else ""))
    print(f"turns per trajectory {stats['mean_turns']:.2f}, calls per trajectory {stats['mean_calls']:.2f}, "
          f"with parallel calls {_pct(stats['parallel_share'])}")
    print("tags: " + ", ".join(f"{k} {v:.1%}" for k, v in stats["tag_distribution"].items()))
    print(f"chain length L: mean {stats['mean_chain_length']:.2f}, max {stats['max_chain_length']}, "
          f"share L>=1 {stats['dependent_share']:.1%}")
    print("kinds: " + ", ".join(f"{k} {v}" for k, v in stats["kind_counts"].items()))
    spread = stats["frequency_spread"]
    uncalled = stats["uncalled_tools"]
    print(f"tool coverage {_pct(stats['tool_coverage'])}"
          + ("" if uncalled is None else f", {uncalled} uncalled")
          + ("" if spread is None else f", call count spread {spread:.1f}x")
          + ": " + ", ".join(f"{k} {v}" for k, v in stats["tool_counts"].items()))
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from sap.report import ReportUnavailable, write_report

    try:
        index = write_report(args.file, args.output, answers=args.answers)
    except ReportUnavailable as exc:
        raise UsageError(str(exc)) from exc
    print(f"wrote {index}")
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    return run_eval(args, check_writable=_check_writable, line_writer=_LineWriter)


def _cmd_frontier(args: argparse.Namespace) -> int:
    from sap.curriculum.frontier_cli import run_frontier_command

    return run_frontier_command(args, lambda: _open_store(args), _agents_config(args, "agents-"),
                                write_jsonl=_write_jsonl)


def _db_args(p: argparse.ArgumentParser) -> None:
    """--db and --full-sync, shared by every command that touches runs."""
    p.add_argument("--db", default="sqlite:///sap.db", help="run database URL (default: sqlite:///sap.db here)")
    p.add_argument("--full-sync", action="store_true", help="SQLite synchronous=FULL (slower, survives power loss)")


def _agents_args(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """Which implementation and LiteLLM model each agent role uses; `prefix` goes before --model, --api-base,
    --temperature and --max-tokens (`sap frontier`'s own --model is the model under test)."""
    g = p.add_argument_group("agents", "rule agents by default; a model makes the roles LLM roles")
    g.add_argument("--agents", choices=["rule", "llm"], help="implementation of every role (default: llm if a model "
                   "is given, else rule)")
    g.add_argument("--agents-config", help="TOML file of per-role agents and models (see docs/architecture.md)")
    g.add_argument(f"--{prefix}model", help="LiteLLM model string for every LLM role, e.g. openai/gpt-4o-mini")
    for role in ROLES:
        g.add_argument(f"--{role.replace('_', '-')}-model", dest=f"{role}_model", help=f"model of the {role} alone")
    g.add_argument(f"--{prefix}api-base", help="base URL of an OpenAI-compatible server (vLLM, llama.cpp, Ollama, ...)")
    g.add_argument(f"--{prefix}temperature", type=float)
    g.add_argument(f"--{prefix}max-tokens", type=int)
    g.add_argument("--message-mode", choices=["per_turn", "global"], help="messenger: one call per turn, or all "
                   "turns at once from the planner's narrative")


def _agents_config(args: argparse.Namespace, prefix: str = "") -> Any:
    """The AgentsConfig of the options `_agents_args(p, prefix)` added."""
    key = prefix.replace("-", "_")
    return build_agents_config(
        args.agents_config, agents=args.agents, message_mode=args.message_mode,
        model_overrides={name: getattr(args, key + name) for name in ("model", "api_base", "temperature", "max_tokens")},
        role_models={role: getattr(args, f"{role}_model") for role in ROLES})


def _run_args(p: argparse.ArgumentParser) -> None:
    """--max-cost (a run's LLM spending cap) and --concurrency (slots in flight in this process)."""
    p.add_argument("--max-cost", type=float, help="stop cleanly once the run's LLM cost reaches this many USD")
    p.add_argument("--concurrency", type=int, default=1, help="slots run at once in this process (LLM agents "
                   "wait on the network; above 1 the output depends on completion order, as with several workers)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `sap` command."""
    parser = argparse.ArgumentParser(prog="sap", description="Synthesize multi-turn tool-use data with provenance.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("toolsets", help="list the built-in toolsets")
    p.add_argument("--json", action="store_true", help="print a JSON list of {name, tools, description}")
    p.set_defaults(fn=_cmd_toolsets)
    p = sub.add_parser("synthesize", help="synthesize trajectories into a JSONL file")
    p.add_argument("--toolset", required=True, help="built-in name or path to a domain module (.py)")
    p.add_argument("-n", type=int, required=True, help="number of accepted trajectories wanted")
    p.add_argument("-o", "--output", required=True, help="JSONL file to write")
    p.add_argument("--seed", type=int, default=0, help="run seed (same seed, same output)")
    p.add_argument("--min-turns", type=int, default=3)
    p.add_argument("--max-turns", type=int, default=8)
    p.add_argument("--mix", default="base=1", help="shares of record kinds, e.g. base=0.6,miss_param=0.2,miss_func=0.2")
    p.add_argument("--no-emphasis", action="store_true", help="turn long-tail emphasis off")
    p.add_argument("--max-slots", type=int, help="give up after this many attempted trajectories (default 5n+20)")
    p.add_argument("--new-run", action="store_true", help="start a new run even if an unfinished one matches")
    _agents_args(p)
    _run_args(p)
    _db_args(p)
    p.set_defaults(fn=_cmd_synthesize)
    p = sub.add_parser("resume", help="continue a stored run from its checkpoints and fill its target")
    p.add_argument("run")
    p.add_argument("-o", "--output", help="JSONL file to write the run's records to")
    p.add_argument("--toolset", help="toolset path, for a run over a domain module (default: the run's toolset)")
    _run_args(p)
    _db_args(p)
    p.set_defaults(fn=_cmd_resume)
    p = sub.add_parser("worker", help="join a stored run as one more worker (on SQLite: one at a time)")
    p.add_argument("run")
    p.add_argument("-o", "--output", default=None)
    p.add_argument("--toolset")
    _run_args(p)
    _db_args(p)
    p.set_defaults(fn=_cmd_resume)
    p = sub.add_parser("runs", help="list the stored runs with their progress")
    p.add_argument("--json", action="store_true", help="print a JSON list of {id, status, accepted, target, ...}")
    _db_args(p)
    p.set_defaults(fn=_cmd_runs)
    p = sub.add_parser("export", help="write a stored run's (or a JSONL file's) records in another format")
    p.add_argument("source", metavar="RUN_OR_JSONL", help="a run id in --db, or a JSONL file of sap records")
    p.add_argument("-o", "--output", required=True, help="JSONL file (openai, sharegpt) or directory (bfcl, hf)")
    p.add_argument("--format", choices=["openai", "sharegpt", "hf", "bfcl"], default="openai",
                   help="openai: sap's JSONL records (OpenAI messages + provenance); sharegpt: LLaMA-Factory ShareGPT "
                        "JSONL; hf: a Hugging Face datasets directory (save_to_disk) with a dataset card (extra hf); "
                        "bfcl: BFCL v4 multi-turn question file DIR/<name>.json and DIR/possible_answer/<name>.json")
    p.add_argument("--name", help="bfcl: file name and id prefix (default sap_multi_turn[_long_context])")
    _db_args(p)
    p.set_defaults(fn=_cmd_export)
    p = sub.add_parser("variants", help="RODS: topology-isomorphic variants of seed records on new values")
    p.add_argument("seeds", help="JSONL file of base records (as sap synthesize writes them)")
    p.add_argument("-n", type=int, default=1, help="variants per seed")
    p.add_argument("-o", "--output", required=True, help="JSONL file to write the kept variants (and augmentations)")
    p.add_argument("--augment", default="", help="also make these rewrites of each kept variant: miss_param,miss_func")
    p.add_argument("--rounds", type=int, default=3, help="plan/execute rounds per variant")
    p.add_argument("--toolset", help="toolset of the seeds (default: their meta.toolset)")
    p.add_argument("--db", help="checkpoint each variant's thread in this database (sqlite:///FILE or postgresql://)")
    _agents_args(p)
    p.set_defaults(fn=_cmd_variants)
    p = sub.add_parser("validate", help="replay every record on its executor and check its provenance")
    p.add_argument("file")
    p.add_argument("--toolset", help="toolset to replay on (default: each record's meta.toolset)")
    p.add_argument("--db", default="sqlite:///sap.db", help="database holding the caches that cache-mode records "
                   "(meta.toolset cache:NAME) replay on")
    p.set_defaults(fn=_cmd_validate)
    p = sub.add_parser("stats", help="provenance and chain statistics of a sap, OpenAI-messages or BFCL file")
    p.add_argument("file")
    p.add_argument("--answers", help="BFCL possible_answer file (default: possible_answer/<same name> beside FILE)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(fn=_cmd_stats)
    p = sub.add_parser("report", help="write an HTML report with charts of a JSONL file's statistics")
    p.add_argument("file")
    p.add_argument("-o", "--output", required=True, help="directory to write index.html and the PNG charts into")
    p.add_argument("--answers", help="BFCL possible_answer file (default: possible_answer/<same name> beside FILE)")
    p.set_defaults(fn=_cmd_report)
    p = sub.add_parser("eval", help="run a model as the assistant on sap records or BFCL multi-turn files and score it")
    add_eval_args(p)
    p.set_defaults(fn=_cmd_eval)
    p = sub.add_parser("frontier", help="RODS offline: find a model's boundary tasks by rollouts and grow variants "
                       "of them")
    add_frontier_args(p)
    _agents_args(p, prefix="agents-")
    _db_args(p)
    p.set_defaults(fn=_cmd_frontier)
    from sap.cache.cli import add_cache_commands

    add_cache_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; bad input prints one line and returns 2."""
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except (UsageError, UnknownToolset, Tau2Unavailable, ToolDocError, StoreError, LLMRoleError) as exc:
        print(f"sap {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, PermissionError, ValueError) as exc:
        print(f"sap {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a full disk outside a run's slots: creating the run, exporting
        if not is_disk_full(exc):
            raise
        print(f"sap {args.command}: error: {_full_disk(args, exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
