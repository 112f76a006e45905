"""Ablations of SAP's appendix B.3 on one domain, side by side: full, no FSM, no tags, no retry.

For each variant: pass rate (accepted records per slot tried), P_f rate and the tag distribution over
200 accepted trajectories (or as many as the slot budget allows). Prints one line per variant, then
all figures as one JSON line.
"""
from __future__ import annotations

import argparse
import json

from sap.agents.fsm_builder import FlatFSMBuilder
from sap.api import synthesize
from sap.provenance.stats import dataset_stats
from sap.toolsets import load_toolset

VARIANTS = {
    "full": {},
    "no_fsm": {"fsm_builder": FlatFSMBuilder()},
    "no_tags": {"use_tags": False},
    "no_retry": {"max_attempts": 1, "max_replans": 0, "max_repairs": 0},
}


def measure(toolset_name: str, n: int, seed: int, variant: str) -> dict:
    """Synthesize `n` records under one variant and summarize them."""
    summary = synthesize(load_toolset(toolset_name), n, seed=seed, max_slots=4 * n, **VARIANTS[variant])
    stats = dataset_stats(summary.records) if summary.records else {}
    return {
        "variant": variant,
        "accepted": summary.accepted,
        "slots": summary.attempted,
        "pass_rate": round(summary.accepted / summary.attempted, 3),
        "truncated_share": round(summary.truncated / max(summary.accepted, 1), 3),
        "fallback_rate": round(stats.get("fallback_rate", 0.0), 3),
        "mean_turns": round(stats.get("mean_turns", 0.0), 2),
        "mean_chain_length": round(stats.get("mean_chain_length", 0.0), 3),
        "tag_distribution": {k: round(v, 3) for k, v in stats.get("tag_distribution", {}).items()},
        "top_drop_reasons": dict(summary.dropped.most_common(3)),
    }


def main() -> None:
    """Run every variant and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--toolset", default="store")
    parser.add_argument("-n", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = [measure(args.toolset, args.n, args.seed, v) for v in VARIANTS]
    for r in rows:
        tags = ", ".join(f"{k} {v:.0%}" for k, v in r["tag_distribution"].items())
        print(f"{r['variant']:<9} pass {r['pass_rate']:.0%} ({r['accepted']}/{r['slots']}), truncated "
              f"{r['truncated_share']:.0%}, P_f {r['fallback_rate']:.1%}, turns {r['mean_turns']}, "
              f"mean L {r['mean_chain_length']}; tags: {tags}")
    print(json.dumps({"bench": "ablation", "toolset": args.toolset, "n": args.n, "variants": rows}))


if __name__ == "__main__":
    main()
