"""`sap export`, `validate`, `show`, `stats`, `report` and `audit`: commands that read records."""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sap.cli.common import (
    check_writable,
    db_args,
    db_url,
    open_store,
    pct,
)
from sap.errors import StoreError, UsageError
from sap.export.formats import FORMATS, STDOUT, ExportOptions
from sap.export.splits import parse_split

LICENSE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+-]*")  # the Hub's license identifiers: apache-2.0, cc-by-4.0, ...
HUB_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")  # NAMESPACE/NAME

if TYPE_CHECKING:
    from sap.store.runs import StoredRecords


def _export_records(args: argparse.Namespace) -> list[dict[str, Any]] | StoredRecords:
    """The records to export: a JSONL file of sap records, or a stored run's accepted records in slot order
    (streamed from the run database)."""
    from sap.jsonutil import read_records
    from sap.store.runs import StoredRecords

    if Path(args.source).is_file():
        records = [rec for _, rec in read_records(args.source)]
        bad = next((no for no, rec in enumerate(records, 1) if "provenance" not in rec or "meta" not in rec), None)
        if bad is not None:
            raise UsageError(f"{args.source}:{bad}: not a sap record (needs messages, provenance and meta)")
        return records
    try:
        store = open_store(args, create=False)
    except StoreError as exc:
        raise UsageError(f"{args.source}: no such file, and {exc}") from exc
    store.run(args.source)
    return StoredRecords(store, args.source)


def _export_meta(args: argparse.Namespace, records: list[dict[str, Any]]) -> dict[str, Any]:
    """What a dataset card says about where the records came from: the run's settings, or the source file's name."""
    if Path(args.source).is_file():
        return {"source": Path(args.source).name, "toolsets": sorted({r["meta"].get("toolset", "") for r in records})}
    run = open_store(args, create=False).run(args.source)
    return {"run": run.id, "toolset": run.toolset, "seed": run.seed, "target": run.target, **run.config}


def _check_export_args(args: argparse.Namespace) -> ExportOptions:
    """Refuse export options that do not fit the format or the output, before any record is read; the options."""
    fmt = FORMATS[args.format]
    if args.name is not None and (args.name in ("", ".", "..") or Path(args.name).name != args.name
                                  or "\\" in args.name):
        raise UsageError(f"--name must be a plain file name inside {args.output}, got {args.name!r}")
    carded = [f.name for f in FORMATS.values() if f.carded]
    for flag, value in (("--split", args.split), ("--license", args.license)):
        if value is not None and not fmt.carded:
            raise UsageError(f"{flag} needs a format that writes a dataset directory ({', '.join(carded)}), "
                             f"not --format {args.format}")
    if args.output == STDOUT and fmt.directory:
        raise UsageError(f"-o -: --format {args.format} writes a directory, not standard output")
    out = Path(args.output)
    if fmt.directory and out.is_file():
        raise UsageError(f"output {args.output} is a file; --format {args.format} writes a directory")
    if fmt.carded and out.is_dir() and any(out.iterdir()) and not args.overwrite:
        raise UsageError(f"-o {args.output} is a directory that is not empty; pass --overwrite to write the export "
                         "into it (files of the same names are replaced), or choose another directory")
    if not fmt.directory and args.output != STDOUT:
        check_writable(args.output)
    if args.push_to_hub is None and (args.private or args.hub_token_env):
        raise UsageError(f"{'--private' if args.private else '--hub-token-env'} goes with --push-to-hub NAME")
    if args.push_to_hub is not None:
        from sap.export.hub import PUSHED_FORMATS, hub_token

        if args.format not in PUSHED_FORMATS:
            raise UsageError(f"--push-to-hub needs --format {', '.join(PUSHED_FORMATS)}, not --format {args.format}")
        if not HUB_REPO_ID.fullmatch(args.push_to_hub):
            raise UsageError(f"--push-to-hub {args.push_to_hub!r}: give a dataset repo id, NAMESPACE/NAME")
        hub_token(args.hub_token_env)  # the token is there before any record is read
    if args.license is not None and not LICENSE_ID.fullmatch(args.license):
        raise UsageError(f"--license {args.license!r}: give a license identifier such as apache-2.0, cc-by-4.0, "
                         "mit or other")
    return ExportOptions(args.name, split=parse_split(args.split), license=args.license or "unknown")


def _cmd_export(args: argparse.Namespace) -> int:
    options = _check_export_args(args)
    records = _export_records(args)
    written = FORMATS[args.format].write(records, args.output,
                                         replace(options, card=lambda: _export_meta(args, records)))
    print(f"{len(records)} records of {args.source} -> {written}",
          file=sys.stderr if args.output == STDOUT else sys.stdout)
    if args.push_to_hub is not None:
        from sap.export.hub import hub_token, push_export

        url = push_export(Path(args.output), args.format, args.push_to_hub, hub_token(args.hub_token_env),
                          args.private)
        print(f"pushed to the Hub as {args.push_to_hub}" + (" (private)" if args.private else "") + f": {url}")
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from sap.validate import validate_file

    count, problems = validate_file(args.file, args.toolset, cache_db=args.db)
    for p in problems:
        print(p)
    print(f"{count} records, {len({p.record for p in problems})} failed")
    return 1 if problems else 0


def _cmd_stats(args: argparse.Namespace) -> int:
    from sap.provenance.external import file_stats

    stats = file_stats(args.file, args.answers)
    if args.json:
        print(json.dumps(stats))
        return 0
    print(f"format {stats['format']}: records {stats['records']}, arguments {stats['arguments']}"
          + (" (tags inferred from the dialogue)" if stats["format"] != "sap" else "")
          + (" (ground truth replayed on sap's BFCL executors)" if stats.get("replayed") else ""))
    print(f"turns per trajectory {stats['mean_turns']:.2f}, calls per trajectory {stats['mean_calls']:.2f}, "
          f"with parallel calls {pct(stats['parallel_share'])}")
    print("tags: " + ", ".join(f"{k} {v:.1%}" for k, v in stats["tag_distribution"].items()))
    print("sources (SAP Tables 5/6, P_u inside P_c): "
          + ", ".join(f"{k} {pct(v)}" for k, v in stats["source_columns"].items()))
    print(f"chain length L (SAP 3.4): mean {stats['mean_chain_length']:.2f}, max {stats['max_chain_length']}, "
          f"share L>=1 {stats['dependent_share']:.1%}")
    reuse = stats["value_reuse"]
    print(f"value reuse (turns since an equal value was first bound, any tag): mean {reuse['mean_chain_length']:.2f}, "
          f"max {reuse['max_chain_length']}, share >=1 {reuse['dependent_share']:.1%}")
    for group, label in (("output_derived", "from tool outputs"), ("user_derived", "from earlier user messages"),
                         ("announced", "of which announced ahead")):
        chain = stats["chains"][group]
        print(f"  {label}: {chain['arguments']} arguments ({chain['share']:.1%}), L mean "
              f"{chain['mean_chain_length']:.2f}, max {chain['max_chain_length']}")
    print("kinds: " + ", ".join(f"{k} {v}" for k, v in stats["kind_counts"].items()))
    spread = stats["frequency_spread"]
    uncalled = stats["uncalled_tools"]
    print(f"tool coverage {pct(stats['tool_coverage'])}"
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


def _cmd_audit(args: argparse.Namespace) -> int:
    from sap.audit import AuditInputError, audit_file, parse_thresholds

    try:
        limits = parse_thresholds(args.fail_on or "")
        report = audit_file(args.file, args.answers)
    except (AuditInputError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    summary = report.summary()
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"format {report.format}: {report.records} records, {report.calls} calls, {report.arguments} arguments")
        for name, check in summary["checks"].items():
            print(f"{name:<20} {check['count']:>6} of {check['of']:<6} {check['share']:>7.1%}"
                  + (f"  e.g. {'; '.join(check['examples'][:3])}" if check["examples"] else ""))
    over = [f"{name} {report.share(name):.1%} > {limit:.1%}" for name, limit in limits.items()
            if report.share(name) > limit]
    if over:
        print("audit failed: " + ", ".join(over))
        return 1
    return 0


def dialogue(record: dict[str, Any], index: int, max_chars: int) -> str:
    """A record as a readable dialogue: each message on its own lines, tool calls with their arguments and the
    provenance tag of each, tool results cut to `max_chars`."""
    meta = record.get("meta") or {}
    tags = {p["call_id"]: p["args"] for p in record.get("provenance") or []}
    head = f"# record {index}" + (f"  {record['id']}" if record.get("id") else "")
    if meta:
        head += (f"  ({meta.get('toolset')}, {meta.get('kind', 'base')}"
                 + (", truncated at a failing turn" if meta.get("truncated") else "") + ")")
    lines = [head]
    for message in record.get("messages") or []:
        role, content = message.get("role"), message.get("content")
        if role == "tool":
            text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
            lines.append(f"  tool {message.get('name', '')}: {text[:max_chars]}{'...' if len(text) > max_chars else ''}")
            continue
        if content:
            lines.append(f"{role}: {content}")
        for call in message.get("tool_calls") or []:
            fn = call["function"]
            args = fn["arguments"] if isinstance(fn["arguments"], dict) else json.loads(fn["arguments"] or "{}")
            lines.append(f"{role} calls {fn['name']}(" + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}"
                                                               for k, v in args.items()) + ")")
            for name, tag in (tags.get(call.get("id")) or {}).items():
                source = json.dumps(tag.get("source"), ensure_ascii=False) if tag.get("source") else ""
                lines.append(f"    {name}: {tag['tag']} {source}".rstrip())
    return "\n".join(lines)


def _cmd_show(args: argparse.Namespace) -> int:
    from sap.jsonutil import read_records

    rows = [record for _, record in read_records(args.file)]
    if args.index is not None and not 0 <= args.index < len(rows):
        raise UsageError(f"-i {args.index}: {args.file} holds records 0..{len(rows) - 1}")
    chosen = [args.index] if args.index is not None else range(len(rows))
    print("\n\n".join(dialogue(rows[i], i, args.max_chars) for i in chosen))
    return 0


def add_commands(sub: Any) -> None:
    """Register export, validate, stats, report and audit."""
    p = sub.add_parser("export", help="write a stored run's (or a JSONL file's) records in another format")
    p.add_argument("source", metavar="RUN_OR_JSONL", help="a run id in --db, or a JSONL file of sap records")
    files, dirs = ([f.name for f in FORMATS.values() if f.directory == d] for d in (False, True))
    p.add_argument("-o", "--output", required=True,
                   help=f"JSONL file ({', '.join(files)}; - for standard output) or directory ({', '.join(dirs)})")
    p.add_argument("--format", choices=list(FORMATS), default="openai",
                   help="; ".join(f"{f.name}: {f.help}" for f in FORMATS.values()))
    p.add_argument("--name", help="bfcl: file name and id prefix (default sap_multi_turn[_long_context])")
    carded = ", ".join(f.name for f in FORMATS.values() if f.carded)
    p.add_argument("--split", metavar="NAME=SHARE,...", help=f"{carded}: split the records, e.g. train=0.9,val=0.1; "
                   "a record's split is fixed by the SHA-256 of its id (default: all in train)")
    p.add_argument("--license", help=f"{carded}: the data's license identifier for the dataset card, e.g. "
                   "apache-2.0 or cc-by-4.0 (default: unknown)")
    p.add_argument("--overwrite", action="store_true", help=f"{carded}: write into a directory that is not empty "
                   "(what an earlier export there wrote is removed first; other files stay)")
    p.add_argument("--push-to-hub", metavar="NAMESPACE/NAME", help="hf, parquet, messages: then push the export to "
                   "this Hugging Face Hub dataset repo with datasets' push_to_hub, the dataset card included "
                   "(HF_ENDPOINT picks another Hub)")
    p.add_argument("--hub-token-env", metavar="VAR", help="environment variable holding the Hub token (default: "
                   "HF_TOKEN); the token is never printed or stored")
    p.add_argument("--private", action="store_true", help="with --push-to-hub: create the repo private")
    db_args(p)
    p.set_defaults(fn=_cmd_export)
    p = sub.add_parser("validate", help="replay every record on its executor and check its provenance")
    p.add_argument("file", help="JSONL of sap records")
    p.add_argument("--toolset", help="toolset to replay on (default: each record's meta.toolset)")
    p.add_argument("--db", type=db_url, default="sqlite:///sap.db", help="database holding the caches that cache-mode records "
                   "(meta.toolset cache:NAME) replay on")
    p.set_defaults(fn=_cmd_validate)
    p = sub.add_parser("show", help="print records as readable dialogues, with each argument's provenance")
    p.add_argument("file", help="JSONL of sap records (or OpenAI-messages records)")
    p.add_argument("-i", "--index", type=int, help="show only record N (0-based; default: every record)")
    p.add_argument("--max-chars", type=int, default=300, help="cut tool results longer than this")
    p.set_defaults(fn=_cmd_show)
    p = sub.add_parser("stats", help="provenance and chain statistics of a sap, OpenAI-messages or BFCL file")
    p.add_argument("file", help="sap records, OpenAI-messages JSONL or a BFCL multi-turn question file")
    p.add_argument("--answers", help="BFCL possible_answer file (default: possible_answer/<same name> beside FILE)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(fn=_cmd_stats)
    p = sub.add_parser("report", help="write an HTML report with charts of a JSONL file's statistics")
    p.add_argument("file", help="sap records, OpenAI-messages JSONL or a BFCL multi-turn question file")
    p.add_argument("-o", "--output", required=True, help="directory to write index.html and the PNG charts into")
    p.add_argument("--answers", help="BFCL possible_answer file (default: possible_answer/<same name> beside FILE)")
    p.set_defaults(fn=_cmd_report)
    p = sub.add_parser("audit", help="check a dataset (sap, OpenAI-messages or BFCL file) for what a trainer "
                       "should not learn: ambiguous references, no-op and repeated calls, error results, "
                       "placeholder values, leaked internals, dictated calls")
    p.add_argument("file", help="sap records, OpenAI-messages JSONL or a BFCL multi-turn question file")
    p.add_argument("--answers", help="BFCL possible_answer file (default: possible_answer/<same name> beside FILE)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--fail-on", metavar="CHECK=SHARE,...",
                   help="exit 1 when a check's share exceeds its threshold, e.g. error_result=0,repeated_call=2%%")
    p.set_defaults(fn=_cmd_audit)
