"""Training-data quality of fresh sets: n records per toolset with the offline rule agents, each set checked by
`sap audit` (ambiguous references, no-op and repeated calls, error results, placeholder values, leaks, dictated
calls) and replayed by `sap validate`; one table per toolset, then one JSON line.

Run: PYTHONPATH=. python bench/quality.py [-n 100] [--toolsets filesystem,bfcl/TradingBot] [--mix ...]
     [--save DIR] [--records DIR] [--generate-only]
`--save DIR` keeps each set as DIR/<toolset>.jsonl; `--records DIR` audits such saved sets instead of generating
(so sets made by another checkout, with `--generate-only`, can be audited by this one).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from sap.api import synthesize
from sap.jsonutil import read_records, write_jsonl
from sap.runs.slots import parse_mix
from sap.toolsets import load_toolset
from sap.validate import validate_record

DEFAULT = ["filesystem", "store", "travel", "bfcl/GorillaFileSystem+TwitterAPI", "bfcl/TravelAPI", "bfcl/TradingBot",
           "bfcl/VehicleControlAPI", "tau2/retail", "tau2/airline"]


def set_file(directory: Path, toolset: str) -> Path:
    """Where a toolset's set is saved: DIR/<toolset with '/' and '+' as '_'>.jsonl."""
    return directory / (toolset.replace("/", "_").replace("+", "_") + ".jsonl")


def fresh_set(toolset: str, n: int, seed: int, mix: dict[str, float]) -> tuple[list[dict[str, Any]], float]:
    """n accepted records of `toolset` with the rule agents, and the seconds it took."""
    start = time.perf_counter()
    summary = synthesize(load_toolset(toolset), n, seed=seed, mix=mix)
    return summary.records, time.perf_counter() - start


def quality_row(toolset: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The audit of one set plus its `sap validate` pass count."""
    from sap.audit import audit_records
    from sap.provenance.stats import dataset_stats

    report = audit_records(records)
    ts = load_toolset(toolset)
    valid = sum(not validate_record(r, ts, i) for i, r in enumerate(records))
    return {"toolset": toolset, "records": len(records), "validate_pass": valid, **report.summary(),
            "chains": dataset_stats(records)["chains"]}


def print_table(row: dict[str, Any]) -> None:
    """One toolset's figures as a small table."""
    print(f"\n== {row['toolset']}: {row['records']} records, {row['validate_pass']} pass sap validate, "
          f"{row['calls']} calls, {row['arguments']} arguments")
    print(f"  {'check':<22} {'count':>6} {'of':>6} {'share':>7}  examples")
    for name, check in row["checks"].items():
        print(f"  {name:<22} {check['count']:>6} {check['of']:>6} {check['share']:>7.1%}  "
              + ", ".join(check["examples"][:2]))
    chains = row["chains"]
    print(f"  output-derived args {row['depth']['prev_output_share']:.1%}, chain L mean "
          f"{chains['output_derived']['mean_chain_length']:.2f} max {chains['output_derived']['max_chain_length']}; "
          f"announced ahead {chains['announced']['share']:.1%}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--toolsets", default=",".join(DEFAULT))
    parser.add_argument("--mix", default="base=0.6,miss_param=0.2,miss_func=0.2", help="as sap synthesize --mix")
    parser.add_argument("--save", type=Path, help="directory to keep each generated set in")
    parser.add_argument("--records", type=Path, help="audit the sets saved in this directory instead of generating")
    parser.add_argument("--generate-only", action="store_true", help="generate (and --save) without auditing")
    args = parser.parse_args()
    mix = parse_mix(args.mix)
    rows = []
    for name in args.toolsets.split(","):
        if args.records:
            records = [rec for _, rec in read_records(set_file(args.records, name))]
        else:
            records, seconds = fresh_set(name, args.n, args.seed, mix)
            print(f"{name}: {len(records)} records in {seconds:.0f} s", file=sys.stderr, flush=True)
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            write_jsonl(set_file(args.save, name), records)
        if args.generate_only:
            continue
        row = quality_row(name, records)
        print_table(row)
        rows.append(row)
    totals = {key: sum(r["checks"][key]["count"] for r in rows) for key in (rows[0]["checks"] if rows else {})}
    print(json.dumps({"n": args.n, "seed": args.seed, "mix": args.mix, "totals": totals, "toolsets": rows}))


if __name__ == "__main__":
    main()
