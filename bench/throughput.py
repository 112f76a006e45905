"""Offline synthesis throughput per built-in toolset on one core, with the per-node time split.

Prints one line per toolset, then all figures as one JSON line. Target: >= 20 trajectories/s.
The FSM is built (probed) once before timing; its cost is reported separately.
"""
from __future__ import annotations

import argparse
import json
import os
import time

from sap.api import synthesize
from sap.graphs.synthesis import SynthesisContext
from sap.toolsets import builtin_names, load_toolset


def measure(name: str, n: int, seed: int) -> dict:
    """Accepted trajectories per second for one toolset, and where the time went."""
    toolset = load_toolset(name)
    start = time.perf_counter()
    SynthesisContext(toolset=toolset).fsm()
    fsm_seconds = time.perf_counter() - start
    nodes: dict[str, float] = {}
    start = time.perf_counter()
    summary = synthesize(toolset, n, seed=seed, node_seconds=nodes)
    wall = time.perf_counter() - start
    in_nodes = sum(nodes.values())
    return {
        "toolset": name,
        "accepted": summary.accepted,
        "slots": summary.attempted,
        "seconds": round(wall, 3),
        "trajectories_per_s": round(summary.accepted / wall, 2),
        "fsm_build_s": round(fsm_seconds, 3),
        "node_share": {k: round(v / wall, 3) for k, v in sorted(nodes.items(), key=lambda kv: -kv[1])},
        "graph_overhead_share": round((wall - in_nodes) / wall, 3),
    }


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    rows = [measure(name, args.n, args.seed) for name in builtin_names()]
    for r in rows:
        split = ", ".join(f"{k} {v:.0%}" for k, v in r["node_share"].items())
        print(f"{r['toolset']:<11} {r['trajectories_per_s']:>7.1f} traj/s  ({r['accepted']} in {r['seconds']} s; "
              f"FSM build {r['fsm_build_s']} s)  nodes: {split}; graph {r['graph_overhead_share']:.0%}")
    total = sum(r["accepted"] for r in rows) / sum(r["seconds"] for r in rows)
    print(json.dumps({"bench": "throughput", "n": args.n, "overall_trajectories_per_s": round(total, 2),
                      "target_trajectories_per_s": 20, "toolsets": rows}))


if __name__ == "__main__":
    main()
