"""tau2-bench retail and airline with the offline rule agents: synthesize N records per domain, then check that every
record replays to the database hash recorded in its meta, twice: with `sap validate`'s replay on sap's executor,
and independently on a plain tau2 Environment (db.json loaded by tau2, c0 applied by tau2's own initialization
data, calls made by tau2's `get_response`, hash by tau2's `get_db_hash`).

Prints one line per domain, then all figures as one JSON line. Needs tau2-bench installed (see README). Not
named tau2.py: run as a script, that name would shadow the tau2 package.
"""
from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from typing import Any

from sap.api import synthesize
from sap.toolsets import load_toolset
from sap.validate import validate_record


def tau2_replay_hash(domain: str, record: dict[str, Any]) -> tuple[str, bool]:
    """The database hash tau2 itself reaches replaying the record's calls, and whether every result matched."""
    import importlib

    from tau2.data_model.message import ToolCall as Tau2Call
    from tau2.data_model.tasks import InitializationData

    env = importlib.import_module(f"tau2.domains.{domain}.environment").get_environment()
    env.set_state(InitializationData(agent_data=record["initial_config"]), None, [])
    results = {m["tool_call_id"]: json.loads(m["content"]) for m in record["messages"] if m["role"] == "tool"}
    same = True
    for msg in record["messages"]:
        for tc in msg.get("tool_calls") or []:
            answer = env.get_response(Tau2Call(id=tc["id"], name=tc["function"]["name"],
                                               arguments=json.loads(tc["function"]["arguments"])))
            got = answer.content
            try:
                got = json.loads(got)
            except json.JSONDecodeError:
                pass
            same &= not answer.error and _loose(got) == _loose(results[tc["id"]])
    return env.get_db_hash(), same


def _loose(value: Any) -> Any:
    """tau2's `to_json_str` writes numbers inside results as strings; compare with numbers as text."""
    if isinstance(value, dict):
        return {k: _loose(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_loose(v) for v in value]
    return value if isinstance(value, str) or value is None else str(value)


def measure(name: str, n: int, seed: int) -> dict[str, Any]:
    """Synthesis figures and the two replay checks for one domain."""
    toolset = load_toolset(name)
    start = time.perf_counter()
    summary = synthesize(toolset, n, seed=seed)
    seconds = time.perf_counter() - start
    records = summary.records
    sap_ok = sum(validate_record(r, toolset) == [] for r in records)
    tau2_checks = [tau2_replay_hash(name.split("/")[1], r) for r in records]
    tau2_hash_ok = sum(h == r["meta"]["end_state_hash"] for (h, _), r in zip(tau2_checks, records))
    clean = toolset.executor_factory()
    counts = Counter(p["name"] for r in records for p in r["provenance"])
    changed = 0
    for r in records:
        clean.reset(r["initial_config"])
        changed += clean.state_hash() != r["meta"]["end_state_hash"]
    return {"toolset": name, "records": len(records), "slots": summary.attempted, "seconds": round(seconds, 1),
            "truncated": summary.truncated, "dropped": dict(summary.dropped),
            "replay_ok_sap_validate": sap_ok, "replay_ok_tau2_hash": tau2_hash_ok,
            "tau2_results_match": sum(same for _, same in tau2_checks),
            "records_changing_db": changed,
            "turns_mean": round(sum(sum(m["role"] == "user" for m in r["messages"]) for r in records)
                                / max(len(records), 1), 2),
            "calls_mean": round(sum(counts.values()) / max(len(records), 1), 2),
            "tool_coverage": round(len(counts) / len(toolset.tools), 3), "tool_counts": dict(sorted(counts.items())),
            "uncalled": sorted(t.name for t in toolset.tools if not counts[t.name])}


def main() -> None:
    """Run both domains and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--toolsets", default="tau2/retail,tau2/airline")
    args = parser.parse_args()
    rows = [measure(name, args.n, args.seed) for name in args.toolsets.split(",")]
    for r in rows:
        print(f"{r['toolset']}: {r['records']} records from {r['slots']} slots in {r['seconds']} s "
              f"({r['truncated']} truncated); replay to the recorded hash: sap {r['replay_ok_sap_validate']}/"
              f"{r['records']}, tau2 {r['replay_ok_tau2_hash']}/{r['records']} (results equal "
              f"{r['tau2_results_match']}); {r['records_changing_db']} change the database; "
              f"turns {r['turns_mean']}, calls {r['calls_mean']}, coverage {r['tool_coverage']:.0%}, "
              f"uncalled {r['uncalled']}")
    print(json.dumps({"bench": "tau2", "n": args.n, "seed": args.seed, "domains": rows}))


if __name__ == "__main__":
    main()
