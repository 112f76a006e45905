"""The real local model as every LLM role: SmolLM2-135M on llama.cpp's server (the `local-llm` extra) through
`sap synthesize --agents-config`, per toolset: slots, accepted, rejected by reason (schema-shaped reasons counted
apart: missing or extra keys, out-of-range indexes, unparseable JSON), LLM calls and tokens per accepted record, and
whether every accepted record passes `sap validate`. Target (issue 16): at least half of the slots accepted on each
toolset, every accepted record valid, no schema-shaped rejection. A tiny model on two shared cores takes minutes
per slot: `--slots` sets the run size. The last line is one JSON object."""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from sap.store.runs import RunStore
from sap.testing.local_llama import agents_toml, llama_server
from sap.toolsets import load_toolset
from sap.validate import validate_record

SCHEMA_SHAPED = re.compile(r"missing|extra key|unexpected key|not an option|out of range|unterminated|json|expecting",
                           re.I)


def run_toolset(name: str, slots: int, seed: int, api_base: str, tmp: Path) -> dict:
    """One `sap synthesize` of `slots` slots on `name` with every role on the local model, and its figures."""
    toml = tmp / "agents.toml"
    toml.write_text(agents_toml(api_base))
    out, db = tmp / f"{name}.jsonl", f"sqlite:///{tmp / name}.db"
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "sap.cli", "synthesize", "--toolset", name, "-n", str(slots),
                           "--max-slots", str(slots), "--seed", str(seed), "--agents-config", str(toml),
                           "-o", str(out), "--db", db, "-q"], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    store = RunStore(db)
    runs = store.runs()
    if not runs:  # sap stopped before it made a run (the FSM build's model calls failed): say why
        return {"toolset": name, "slots": 0, "accepted": 0, "exit": done.returncode, "seconds": round(seconds, 1),
                "invalid_accepted": 0, "schema_shaped_rejections": 0, "rejected_by_reason": {done.stderr[-300:]: 1},
                "llm_calls_per_accepted": None, "tokens_per_accepted": None, "llm_calls": 0}
    (run,) = runs
    counts = store.counts(run.id)
    usage = store.usage(run.id).snapshot()["total"]
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    toolset = load_toolset(name)
    invalid = sum(bool(validate_record(r, toolset)) for r in records)
    rejections = out.with_name(out.name + ".rejections.jsonl")
    full = [json.loads(line).get("reason", "?") for line in rejections.read_text().splitlines()] \
        if rejections.exists() else []
    reasons = Counter(reason[:160] for reason in full)
    accepted = counts.get("accepted", 0)
    return {"toolset": name, "slots": sum(counts.values()), "accepted": accepted, "exit": done.returncode,
            "seconds": round(seconds, 1), "invalid_accepted": invalid,
            "schema_shaped_rejections": sum(bool(SCHEMA_SHAPED.search(reason)) for reason in full),
            "rejected_by_reason": dict(reasons.most_common()),
            "llm_calls_per_accepted": round(usage["calls"] / accepted, 1) if accepted else None,
            "tokens_per_accepted": round((usage["prompt_tokens"] + usage["completion_tokens"]) / accepted)
            if accepted else None, "llm_calls": usage["calls"]}


def main() -> None:
    """Start the local model once and run each toolset on it; print a line per toolset, then the JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--toolsets", default="filesystem,store,travel")
    parser.add_argument("--slots", type=int, default=20, help="slots per toolset (the issue asks at least 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, llama_server(Path(tmp) / "server.log", args.threads) as api_base:
        for name in args.toolsets.split(","):
            row = run_toolset(name, args.slots, args.seed, api_base, Path(tmp))
            rows.append(row)
            print(f"{name:<11} accepted {row['accepted']}/{row['slots']} in {row['seconds']} s, invalid "
                  f"{row['invalid_accepted']}, schema-shaped rejections {row['schema_shaped_rejections']}, "
                  f"LLM calls per accepted {row['llm_calls_per_accepted']}, tokens per accepted "
                  f"{row['tokens_per_accepted']}; rejected {row['rejected_by_reason']}", flush=True)
    print(json.dumps({"bench": "local_model", "model": "SmolLM2-135M (llama.cpp)", "slots": args.slots,
                      "toolsets": rows}))


if __name__ == "__main__":
    main()
