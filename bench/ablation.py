"""SAP's pipeline ablations (Table 6) on one domain, side by side, through the named switches of `sap synthesize`.

For each variant, over `-n` accepted trajectories (the slot budget is 4n):
- pass: accepted records per slot tried (a truncated record counts: it keeps at least min_keep_turns turns);
- whole: records that ran every turn of their path (accepted, not truncated) per slot tried, the paper's Succ;
- the source columns of Tables 5/6 (P_i, P_o, P_c with P_u inside, P_f) and the SAP 3.4 mean chain length.
The paper's figures are printed where the paper gives them for that variant. Last line: one JSON object.
"""
from __future__ import annotations

import argparse
import json

from sap.api import synthesize
from sap.provenance.stats import dataset_stats

VARIANTS: dict[str, tuple[str, ...]] = {
    "full": (),
    "no_tags": ("no_tags",),
    "no_retry": ("no_retry",),
    "no_fsm": ("no_fsm",),
    "no_fsm_no_tags": ("no_fsm", "no_tags"),
}
# figures of SAP's Table 6 as issue 22 quotes them: Succ 89 / 92 / 54 / 50 % for full, FSM+noTag, noFSM+Tag and
# noFSM+noTag (in that order; no Succ is quoted for no retry), P_o 0 without tags, P_f 15.75% for noFSM+Tag
PAPER = {"full": {"whole": 0.89}, "no_tags": {"whole": 0.92, "P_o": 0.0},
         "no_fsm": {"whole": 0.54, "P_f": 0.1575}, "no_fsm_no_tags": {"whole": 0.50, "P_o": 0.0}}


def measure(toolset: str, n: int, seed: int, variant: str) -> dict:
    """Synthesize `n` records under one variant and summarize them."""
    run = synthesize(toolset, n, seed=seed, max_slots=4 * n, ablations=VARIANTS[variant])
    stats = dataset_stats(run.records)
    return {"variant": variant, "accepted": run.accepted, "slots": run.attempted,
            "pass_rate": round(run.accepted / run.attempted, 3),
            "whole": round((run.accepted - run.truncated) / run.attempted, 3),
            **{k: round(v, 4) for k, v in stats["source_columns"].items()},
            "mean_chain_length": round(stats["mean_chain_length"], 3), "max_chain_length": stats["max_chain_length"],
            "dependent_share": round(stats["dependent_share"], 4), "mean_turns": round(stats["mean_turns"], 2),
            "top_drop_reasons": dict(run.dropped.most_common(3)), "paper": PAPER.get(variant, {})}


def _cell(value: float, paper: float | None) -> str:
    """A share beside the paper's, when it gives one."""
    return f"{value:6.1%}" + (f" ({paper:.1%})" if paper is not None else " " * 9)


def main() -> None:
    """Run every variant and print the table, then all figures as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--toolset", default="store")
    parser.add_argument("-n", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="comma-separated variants to run (default all), to split a long run across processes")
    args = parser.parse_args()
    chosen = args.variants.split(",")
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown:
        parser.error(f"--variants: unknown variant {unknown[0]!r}; variants are {', '.join(VARIANTS)}")
    rows = [measure(args.toolset, args.n, args.seed, v) for v in chosen]
    print(f"{args.toolset}, n={args.n} per variant; sap's figure, the paper's in parentheses where it gives one")
    print(f"{'variant':<15} {'pass':>7} {'whole (Succ)':>17} {'P_i':>7} {'P_o':>16} {'P_c':>7} {'P_f':>16} {'mean L':>7}")
    for r in rows:
        p = r["paper"]
        print(f"{r['variant']:<15} {r['pass_rate']:7.1%} {_cell(r['whole'], p.get('whole'))} {r['P_i']:7.1%} "
              f"{_cell(r['P_o'], p.get('P_o'))} {r['P_c']:7.1%} {_cell(r['P_f'], p.get('P_f'))} {r['mean_chain_length']:7.2f}")
    print(json.dumps({"bench": "ablation", "toolset": args.toolset, "n": args.n, "seed": args.seed, "variants": rows}))


if __name__ == "__main__":
    main()
