"""BFCL multi-turn toolsets: n trajectories per class and per combination with the offline agents; share passing
`sap validate` and BFCL's own multi_turn_checker; `sap stats` of the combined set (as sap records, and exported to
BFCL's format, where tags are inferred from the dialogue as for BFCL's own files) beside BFCL's base file.

Run: PYTHONPATH=. python bench/bfcl.py [-n 100] [--mix base=1] [--toolsets bfcl/A,bfcl/B+C]; the last line is one
JSON object.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from sap.api import synthesize
from sap.export.bfcl import to_bfcl, write_bfcl
from sap.provenance.external import file_stats
from sap.runs.slots import parse_mix
from sap.testing.bfcl_checker import check_entry, drop_one_call
from sap.toolsets import load_toolset
from sap.toolsets.bfcl import BFCL_CLASSES, data_dir
from sap.validate import validate_record

DEFAULT = [f"bfcl/{c}" for c in BFCL_CLASSES] + ["bfcl/GorillaFileSystem+TwitterAPI", "bfcl/MessageAPI+TravelAPI"]
KEYS = ("records", "mean_chain_length", "max_chain_length", "dependent_share", "mean_turns", "mean_calls",
        "tag_distribution", "tool_coverage")


def run_one(name: str, n: int, seed: int, mix: dict[str, float]) -> tuple[dict, list[dict]]:
    """Synthesize n records for one toolset and check them every way."""
    toolset = load_toolset(name)
    start = time.perf_counter()
    summary = synthesize(toolset, n, seed=seed, mix=mix)
    elapsed = time.perf_counter() - start
    records = summary.records
    valid = sum(not validate_record(r, toolset, i) for i, r in enumerate(records))
    questions, answers = to_bfcl(records, None, load_toolset)
    checker = sum(check_entry(q, a["ground_truth"])["valid"] for q, a in zip(questions, answers))
    control = sum(not check_entry(q, a["ground_truth"], drop_one_call(a["ground_truth"]))["valid"]
                  for q, a in zip(questions, answers) if any(a["ground_truth"]))
    row = {"toolset": name, "accepted": len(records), "slots": summary.attempted, "truncated": summary.truncated,
           "validate_pass": valid, "bfcl_checker_valid": checker, "negative_control_rejected": control,
           "seconds": round(elapsed, 1)}
    return row, records


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--toolsets", default=",".join(DEFAULT))
    parser.add_argument("--mix", default="base=0.6,miss_param=0.2,miss_func=0.2", help="as sap synthesize --mix")
    args = parser.parse_args()
    mix = parse_mix(args.mix)
    rows, combined = [], []
    for name in args.toolsets.split(","):
        row, records = run_one(name, args.n, args.seed, mix)
        print(json.dumps(row), file=sys.stderr, flush=True)
        rows.append(row)
        combined += records
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "combined.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in combined))
        ours = file_stats(path)
        # the same set through BFCL's format: tags inferred from the dialogue, as for BFCL's own files
        questions, _ = write_bfcl(combined, Path(tmp) / "bfcl", None, load_toolset)
        ours_as_bfcl = file_stats(questions)
    theirs = file_stats(data_dir() / "BFCL_v4_multi_turn_base.json")
    print(json.dumps({"mix": mix, "per_toolset": rows, "all_pass": all(
        r["validate_pass"] == r["bfcl_checker_valid"] == r["accepted"] == args.n for r in rows),
        "sap_stats_combined": {k: ours[k] for k in KEYS},
        "sap_stats_combined_exported_to_bfcl": {k: ours_as_bfcl[k] for k in KEYS},
        "sap_stats_bfcl_base": {k: theirs[k] for k in KEYS}}))


if __name__ == "__main__":
    main()
