"""The `sap cache` and `sap templates` commands: collect, import, list, synthesize; derive templates."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from sap.cli.common import check_owner, check_writable, db_args, drive, request_args, run_args
from sap.errors import UsageError


def _rules(path: str | None) -> dict[str, Any]:
    """Per-tool rules from a JSON file {tool: ToolRules}; ValueError naming the file and field."""
    from pydantic import TypeAdapter, ValidationError

    from sap.cache.rules import ToolRules

    if not path:
        return {}
    try:
        return TypeAdapter(dict[str, ToolRules]).validate_json(Path(path).read_bytes())
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ValueError(f"{path}: {'.'.join(str(p) for p in err['loc'])}: {err['msg']} "
                         f"(value {err.get('input')!r})") from None


def _cache_store(args: argparse.Namespace):
    from sap.cache.store import CacheStore
    from sap.store import RunStore

    return CacheStore(RunStore(args.db))


def _load_cache(store: Any, name: str):
    try:
        return store.load(name)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None


def _cmd_collect(args: argparse.Namespace) -> int:
    from sap.cache.collect import Collector
    from sap.cache.index import CacheIndex
    from sap.cache.recorder import Recorder
    from sap.cache.templates import dump_templates, load_templates
    from sap.toolsets import load_toolset

    if args.keep_complete:
        check_writable(args.keep_complete)
    toolset = load_toolset(args.toolset)
    templates = load_templates(args.templates, {t.name: t for t in toolset.tools})
    rules = _rules(args.rules)
    name = args.cache or toolset.name
    store = _cache_store(args)
    recorder = Recorder(toolset.executor_factory(), CacheIndex())
    try:
        stats = Collector(toolset, recorder, starts=args.starts, fanout=args.fanout).collect(
            templates, list(range(args.seed, args.seed + args.seeds)))
    finally:
        recorder.close()
    store.save_tools(name, toolset.tools, rules)
    new = store.save_index(name, recorder.index.entries.values())
    print(f"cache {name}: {stats.calls} calls ({stats.ok} ok) over {len(templates)} templates x {args.seeds} "
          f"configurations; {new} new entries, {store.caches()[name]} in all ({args.db})")
    never = [t.name for t in templates if not stats.complete[t.name]]
    if never:
        print(f"  {len(never)} templates never ran to their last step in their own chains (sampling can only join "
              "entries recorded in one state, so on a stateful toolset they will be abandoned): " + ", ".join(never))
    if args.keep_complete:
        done = [t for t in templates if stats.complete[t.name]]
        if not done:
            raise UsageError(f"--keep-complete {args.keep_complete}: no template ran to its last step; nothing written")
        Path(args.keep_complete).write_text(dump_templates(done, toolset.name, args.keep_complete.endswith(
            (".yaml", ".yml"))), encoding="utf-8")
        print(f"  {len(done)} templates that ran to their last step -> {args.keep_complete}")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from sap.cache.importer import import_file

    found = import_file(args.file)
    name = args.cache or Path(args.file).stem
    store = _cache_store(args)
    store.save_tools(name, found.specs.values(), _rules(args.rules))
    new = store.add(name, found.calls)
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(found.formats.items()))
    print(f"cache {name}: {len(found.calls)} calls read ({kinds} lines), {new} new entries, "
          f"{store.caches()[name]} in all, {len(found.specs)} functions ({args.db})")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    caches = _cache_store(args).caches()
    if args.json:
        print(json.dumps(caches))
    for name, count in sorted(caches.items()) if not args.json else ():
        print(f"{name}  {count} entries")
    return 0


def _cmd_synthesize(args: argparse.Namespace) -> int:
    from sap.cache.templates import load_templates
    from sap.llm import ModelConfig
    from sap.runs.cache import CacheRunDriver, cache_run_config, start_cache_run
    from sap.runs.driver import find_resumable

    if args.n < 1:
        raise UsageError(f"-n must be at least 1, got {args.n}")
    check_writable(args.output)
    store = _cache_store(args)
    cache = _load_cache(store, args.cache)
    templates = load_templates(args.templates, {t.name: t for t in cache.specs})
    if args.max_rewrites < 0:
        raise UsageError(f"--max-rewrites must be at least 0, got {args.max_rewrites}")
    shared = {k: v for k, v in (("temperature", args.temperature), ("max_tokens", args.max_tokens),
                                ("api_key_env", args.api_key_env), ("structured", args.structured),
                                ("timeout", args.timeout)) if v is not None}
    model = ModelConfig(model=args.model, api_base=args.api_base, **shared) if args.model else None
    judge = ModelConfig(model=args.judge_model, api_base=args.api_base, **shared) if args.judge_model else None
    config = cache_run_config(args.n, args.seed, cache, templates, args.max_restarts, model, judge,
                              args.max_rewrites)
    run_id = None
    if not args.new_run:
        run_id, why = find_resumable(store.store, cache.toolset(), config)
        if why:
            raise UsageError(f"{why}; pass --new-run to start another")
    check_owner(store.store, args.output, args.overwrite, run_id)
    if run_id:
        print(f"continuing run {run_id} (same settings) in {args.db}", flush=True)
    else:
        run_id = start_cache_run(store.store, cache, config)
        print(f"run {run_id} in {args.db}", flush=True)
    store.store.set_output(run_id, args.output)
    return drive(args, store.store, run_id, cache.toolset(), args.output, driver_cls=CacheRunDriver)


def _cmd_derive(args: argparse.Namespace) -> int:
    from sap.cache.templates import coverage_units, derive_from_cache, derive_templates, dump_templates
    from sap.toolsets import load_toolset

    check_writable(args.output)
    if args.cache:  # no runnable toolset: chains read from the cache's recorded requests and responses
        cache = _load_cache(_cache_store(args), args.cache)
        name, tools = f"cache:{cache.name}", [s.name for s in cache.specs]
        templates = derive_from_cache(cache.index, {s.name: s for s in cache.specs}, max_steps=args.max_steps,
                                      max_templates=args.max_templates)
    else:
        toolset = load_toolset(args.toolset)
        name, tools = toolset.name, [t.name for t in toolset.tools]
        templates = derive_templates(toolset, max_steps=args.max_steps, max_templates=args.max_templates)
    if not templates:
        raise UsageError(f"no templates for {name}: no function's recorded or probed output feeds another's argument")
    yaml_format = args.output.endswith((".yaml", ".yml"))
    Path(args.output).write_text(dump_templates(templates, name, yaml_format), encoding="utf-8")
    longest = max(len(t.steps) for t in templates)
    units = set().union(*map(coverage_units, templates))
    covered = sum(("tool", t) in units for t in tools)
    edges = sum(u[0] == "edge" for u in units)
    print(f"{len(templates)} templates (up to {longest} steps) for {name}, covering {covered} of {len(tools)} tools "
          f"and {edges} feeding edges -> {args.output}")
    return 0


def add_commands(sub: Any) -> None:
    """Register `sap cache ...` and `sap templates ...` on the top-level subparsers."""
    cache = sub.add_parser("cache", help="cache environment: collect, import, list, synthesize")
    csub = cache.add_subparsers(dest="cache_command", required=True)
    p = csub.add_parser("collect", help="run template chains on a toolset's executor and cache every response")
    p.add_argument("--toolset", required=True, help="built-in name or path to a domain module (.py) to run live")
    p.add_argument("--templates", required=True, help="templates file (JSON or YAML)")
    p.add_argument("--cache", help="cache name (default: the toolset's name)")
    p.add_argument("--rules", help="JSON file of per-tool validator rules {tool: {params, exclusive, ordered}}")
    p.add_argument("--seeds", type=int, default=3, help="initial configurations to collect on")
    p.add_argument("--seed", type=int, default=0, help="first configuration seed")
    p.add_argument("--starts", type=int, default=3, help="first-step calls per template and configuration")
    p.add_argument("--fanout", type=int, default=5, help="calls per upstream response for each dependent step")
    p.add_argument("--keep-complete", metavar="FILE",
                   help="write the templates that ran to their last step here (to synthesize with)")
    db_args(p)
    p.set_defaults(fn=_cmd_collect)
    p = csub.add_parser("import", help="cache the calls of ComplexFuncBench JSONL or sap records")
    p.add_argument("file", help="JSONL of ComplexFuncBench conversations or of sap records")
    p.add_argument("--cache", help="cache name (default: the file's stem)")
    p.add_argument("--rules", help="JSON file of per-tool validator rules")
    db_args(p)
    p.set_defaults(fn=_cmd_import)
    p = csub.add_parser("list", help="list the caches in the database")
    p.add_argument("--json", action="store_true", help="print a JSON list of {name, entries}")
    db_args(p)
    p.set_defaults(fn=_cmd_list)
    p = csub.add_parser("synthesize", help="synthesize records from a cache alone (templates + sampling + queries)")
    p.add_argument("--cache", required=True, help="cache name, as `sap cache list` shows it")
    p.add_argument("--templates", required=True, help="templates file (JSON or YAML)")
    p.add_argument("-n", type=int, required=True, help="number of accepted records wanted")
    p.add_argument("-o", "--output", required=True, help="JSONL file to write")
    p.add_argument("--seed", type=int, default=0, help="run seed (same seed, same output)")
    p.add_argument("--max-restarts", type=int, default=20, help="chain restarts before a template is abandoned")
    p.add_argument("--new-run", action="store_true", help="start a new run even if an unfinished one matches")
    p.add_argument("--model", help="LiteLLM model of the LLM query writer (default: the rule writer)")
    p.add_argument("--judge-model", help="LiteLLM model of the LLM judge (default: the rule judge)")
    p.add_argument("--max-rewrites", type=int, default=2,
                   help="query rewrites, with the judge's findings, after a text rejection")
    p.add_argument("--api-base", help="endpoint of the LLM query writer and judge")
    p.add_argument("--api-key-env", help="environment variable holding the API key of the LLM writer and judge")
    p.add_argument("--temperature", type=float, help="sampling temperature of the LLM writer and judge")
    p.add_argument("--max-tokens", type=int, help="longest answer of the LLM writer and judge, in tokens")
    request_args(p, who="the LLM writer and judge")
    run_args(p)
    db_args(p)
    p.add_argument("--overwrite", action="store_true", help="replace -o FILE even if another run (or no run) wrote it")
    p.set_defaults(fn=_cmd_synthesize)
    tpl = sub.add_parser("templates", help="workflow templates for the cache environment")
    tsub = tpl.add_subparsers(dest="templates_command", required=True)
    p = tsub.add_parser("derive", help="derive templates from a toolset's specs by matching outputs to parameters, "
                                       "or from a cache's recorded calls")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--toolset", help="built-in name or path to a domain module (.py), probed")
    source.add_argument("--cache", help="cache name (`sap cache list`): chains read from its recorded calls, for a "
                                        "cache without a runnable toolset (imported)")
    p.add_argument("-o", "--output", required=True, help="file to write (.json, or .yaml/.yml for YAML)")
    p.add_argument("--max-steps", type=int, default=3, help="most functions in one chain")
    p.add_argument("--max-templates", type=int, default=100, help="most templates written")
    db_args(p)
    p.set_defaults(fn=_cmd_derive)
