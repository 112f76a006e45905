"""Slots accepted when every LLM role is answered by the minimal-instance stand-in (sap.testing.minimal_model): a
model that obeys each request's response schema and nothing else, as a grammar-constrained tiny model would at
worst. Runs `sap synthesize --agents llm` per toolset against the stand-in over real HTTP and prints slots,
accepted, records failing `sap validate`, rejections by reason, and the schema-shaped ones (an LLM role that got
no valid answer). Last line: one JSON object.
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from sap.testing.minimal_model import minimal_model
from sap.testing.scripted_llm import ScriptedLLMServer
from sap.toolsets import load_toolset
from sap.validate import validate_record

_SCHEMA_SHAPED = re.compile(r"no valid answer|required property|Additional properties|is not one of|invalid JSON")


def run_toolset(toolset: str, slots: int, seed: int) -> dict[str, Any]:
    """One `sap synthesize` run of `slots` slots (asking for as many records) against the stand-in."""
    with ScriptedLLMServer(responder=minimal_model) as server, tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.jsonl"
        done = subprocess.run([sys.executable, "-m", "sap.cli", "synthesize", "--toolset", toolset, "-n", str(slots),
                               "--max-slots", str(slots), "--seed", str(seed), "-o", str(out), "--agents", "llm",
                               "--model", "openai/x", "--api-base", server.api_base, "--db", f"sqlite:///{tmp}/sap.db"],
                              capture_output=True, text=True)
        if not out.exists():  # exit status 1 only says fewer than -n records were accepted
            raise RuntimeError(f"sap synthesize --toolset {toolset} wrote no output:\n{done.stderr[-2000:]}")
        records = [json.loads(line) for line in out.read_text().splitlines()]
        reasons = [json.loads(line)["reason"] for line in Path(f"{out}.rejections.jsonl").read_text().splitlines()]
        calls = len(server.requests)
    loaded = load_toolset(toolset)
    by_reason = collections.Counter(re.sub(r" failed \d+ times at turn \d+", " kept failing", r) for r in reasons)
    return {"toolset": toolset, "slots": slots, "accepted": len(records), "llm_calls": calls,
            "invalid_records": sum(bool(validate_record(r, loaded)) for r in records),
            "schema_shaped": sum(bool(_SCHEMA_SHAPED.search(r)) for r in reasons),
            "rejected_by_reason": dict(by_reason.most_common())}


def main() -> None:
    """Run the stand-in on each toolset and print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toolsets", default="filesystem,store,travel")
    parser.add_argument("--slots", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = [run_toolset(name, args.slots, args.seed) for name in args.toolsets.split(",")]
    for row in rows:
        print(f"{row['toolset']:<11} accepted {row['accepted']:>3}/{row['slots']} slots, "
              f"{row['invalid_records']} invalid, {row['schema_shaped']} schema-shaped rejections, "
              f"{row['llm_calls']} LLM calls")
        for reason, count in row["rejected_by_reason"].items():
            print(f"    {count:>3}  {reason}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
