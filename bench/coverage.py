"""Long-tail emphasis on vs off: tool coverage and call-frequency spread on one domain, side by side.

Prints one line per setting, then all figures as one JSON line. With emphasis on, coverage should reach
100% of the tools the FSM can reach and the max/min call-frequency ratio should be lower than with it off.
The ratio is taken over all reachable tools with add-one smoothing (max(c+1) / min(c+1)), so a tool never
called counts as frequency 0 rather than dropping out; the ratio over called tools only is printed too.
"""
from __future__ import annotations

import argparse
import json
from collections import Counter

from sap.api import synthesize
from sap.graphs.synthesis import SynthesisContext
from sap.toolsets import load_toolset


def measure(toolset_name: str, n: int, seed: int, emphasis_size: int) -> dict:
    """Coverage of reachable tools and the max/min ratio of call counts for one setting."""
    toolset = load_toolset(toolset_name)
    _, fsm = SynthesisContext(toolset=toolset).fsm()
    reachable = sorted({t for e in fsm.transitions for t in e.action})
    summary = synthesize(toolset, n, seed=seed, emphasis_size=emphasis_size)
    counts = Counter(p["name"] for r in summary.records for p in r["provenance"])
    called = [counts[t] for t in reachable if counts[t]]
    smoothed = [counts[t] + 1 for t in reachable]  # add-one: an uncalled tool has frequency 0, not "no ratio"
    return {
        "emphasis_size": emphasis_size,
        "records": summary.accepted,
        "reachable_tools": len(reachable),
        "coverage": round(len(called) / len(reachable), 3),
        "max_min_ratio": round(max(smoothed) / min(smoothed), 2),
        "max_min_ratio_called_only": round(max(called) / min(called), 2) if called else None,
        "least_called": sorted(reachable, key=lambda t: counts[t])[:3],
        "counts": dict(sorted(counts.items())),
    }


def main() -> None:
    """Run both settings and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--toolset", default="filesystem")
    parser.add_argument("-n", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    off = measure(args.toolset, args.n, args.seed, 0)
    on = measure(args.toolset, args.n, args.seed, 3)
    for label, row in (("emphasis off", off), ("emphasis on ", on)):
        print(f"{label}: coverage {row['coverage']:.0%} of {row['reachable_tools']} reachable tools, "
              f"max/min call ratio {row['max_min_ratio']} (called tools only: {row['max_min_ratio_called_only']}), "
              f"least called {row['least_called']}")
    ratio = on["max_min_ratio"] / off["max_min_ratio"] if on["max_min_ratio"] and off["max_min_ratio"] else None
    print(json.dumps({"bench": "coverage", "toolset": args.toolset, "n": args.n, "off": off, "on": on,
                      "ratio_on_over_off": round(ratio, 3) if ratio else None}))


if __name__ == "__main__":
    main()
