"""The `sap` command: list toolsets, synthesize, validate and summarize datasets."""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from sap.toolsets import UnknownToolset, ToolDocError, builtin_names, load_toolset


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit code 2."""


def _cmd_toolsets(args: argparse.Namespace) -> int:
    rows = []
    for name in builtin_names():
        ts = load_toolset(name)
        rows.append({"name": name, "tools": len(ts.tools), "description": ts.description})
    if args.json:
        print(json.dumps(rows))
    else:
        width = max(len(r["name"]) for r in rows)
        for r in rows:
            print(f"{r['name']:<{width}}  {r['tools']:>3} tools  {r['description']}")
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


def _cmd_synthesize(args: argparse.Namespace) -> int:
    from sap.api import parse_mix, synthesize

    if args.n < 1:
        raise UsageError(f"-n must be at least 1, got {args.n}")
    mix = parse_mix(args.mix)
    _check_writable(args.output)
    toolset = load_toolset(args.toolset)
    progress = _Progress(args.n)
    with open(args.output, "w", encoding="utf-8") as out:
        def write(record: dict[str, Any]) -> None:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            out.flush()

        summary = synthesize(toolset, args.n, seed=args.seed, on_record=write, on_slot=progress.slot, mix=mix,
                             min_turns=args.min_turns, max_turns=args.max_turns,
                             emphasis_size=0 if args.no_emphasis else 3)
    progress.close()
    rejections = Path(f"{args.output}.rejections.jsonl")
    with open(rejections, "w", encoding="utf-8") as out:
        for item in summary.rejections:
            out.write(json.dumps(item, ensure_ascii=False) + "\n")
    args_total = sum(len(p["args"]) for r in summary.records for p in r["provenance"])
    fallbacks = sum(a["tag"] == "fallback" for r in summary.records for p in r["provenance"] for a in p["args"].values())
    print(f"accepted {summary.accepted}/{args.n} ({summary.truncated} truncated at a failing turn) "
          f"from {summary.attempted} slots -> {args.output}")
    print(f"  P_f rate {fallbacks / max(args_total, 1):.1%} of {args_total} arguments; "
          f"{len(summary.rejections)} rejections with reasons -> {rejections}")
    kinds = Counter(r["meta"]["kind"] for r in summary.records)
    print("  kinds: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    unkept = sum(1 for r in summary.records if r["meta"].get("rewrite_rejection"))
    if unkept:
        print(f"  {unkept} requested rewrites were not kept (their base records were exported instead)")
    for reason, count in summary.dropped.most_common():
        print(f"  dropped {count}: {reason}")
    return 0 if summary.accepted == args.n else 1


def _cmd_validate(args: argparse.Namespace) -> int:
    from sap.validate import validate_file

    count, problems = validate_file(args.file, args.toolset)
    for p in problems:
        print(p)
    print(f"{count} records, {len({p.record for p in problems})} failed")
    return 1 if problems else 0


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
    p.set_defaults(fn=_cmd_synthesize)
    p = sub.add_parser("validate", help="replay every record on its executor and check its provenance")
    p.add_argument("file")
    p.add_argument("--toolset", help="toolset to replay on (default: each record's meta.toolset)")
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; bad input prints one line and returns 2."""
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except (UsageError, UnknownToolset, ToolDocError) as exc:
        print(f"sap {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, PermissionError, ValueError) as exc:
        print(f"sap {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
