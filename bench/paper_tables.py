"""One reproduction report: for each figure of the three papers (SAP, constrained cache synthesis, RODS) that sap
can measure offline, sap's figure beside the paper's, with the conditions it was measured under.

- SAP Table 6: Succ (whole records per slot), P_i / P_o / P_c (P_u inside) / P_f for the five pipeline variants,
  run through `bench/ablation.py`'s `measure` (rule agents, `-n` accepted records per variant, 4n slots at most);
- SAP §3.4 chain statistics (mean L, max L, share L >= 1) of the full variant's records (`sap stats`' figures);
- the cache paper's reward collapses: hand-made rollouts of a three-step chain scored by R_atomic alone, R_orch
  alone and both (`sap.rewards`); a collapse is a flawed rollout a reward scores as high as the perfect one;
- RODS' boundary variance: `bench/rods_sim.py`'s simulated learner, within-group reward variance of the sampled
  batch under static, random and boundary seeding.

A paper figure is printed only where it is quoted in this repository (issue 22 quotes Table 6); elsewhere the
column says what the paper claims in words, and `-` where it claims nothing offline-measurable. The full pipeline
of the papers runs LLM agents; here every role is sap's offline rule agent (see docs/reproduction.md).
Last line: one JSON object.
"""
from __future__ import annotations

import argparse
import json
import time
from typing import Any

from ablation import PAPER, VARIANTS, measure
from rods_sim import options as rods_options
from rods_sim import run_modes

from sap.rewards import GoldCall, PredCall, r_atomic, r_orch

# find_user -> get_orders -> cancel_order, each id taken from the previous result: the cache paper's chain shape
GOLD = [[GoldCall("find_user", {"email": "ada@example.com"}, {"email": "self_create"}),
         GoldCall("get_orders", {"user_id": "u1"}, {"user_id": "prev_output"}, {"user_id": (0, 0)}),
         GoldCall("cancel_order", {"order_id": "o7"}, {"order_id": "prev_output"}, {"order_id": (0, 1)})]]
FIND, ORDERS, CANCEL = (PredCall("find_user", {"email": "ada@example.com"}), PredCall("get_orders", {"user_id": "u1"}),
                        PredCall("cancel_order", {"order_id": "o7"}))
ROLLOUTS: dict[str, list[list[PredCall]]] = {
    "perfect": [[FIND, ORDERS, CANCEL]],
    "reversed order (ids used before they are found)": [[CANCEL, ORDERS, FIND]],
    "right functions, every value wrong": [[PredCall("find_user", {"email": "bob@example.com"}),
                                            PredCall("get_orders", {"user_id": "u9"}),
                                            PredCall("cancel_order", {"order_id": "o1"})]],
    "right values, every call failed": [[PredCall(c.name, c.args, ok=False) for c in (FIND, ORDERS, CANCEL)]],
    "wrong dependent id": [[FIND, ORDERS, PredCall("cancel_order", {"order_id": "o8"})]],
    "wrong value no edge checks (another user's email)": [[PredCall("find_user", {"email": "eve@example.com"}),
                                                          ORDERS, CANCEL]],
    "stopped after the first call": [[FIND]],
    "first call repeated for every step": [[FIND, FIND, FIND]],
}


def reward_collapses() -> dict[str, Any]:
    """Each rollout's R_atomic, R_orch and their mean; per reward, the flawed rollouts scored as high as the perfect."""
    rows = {}
    for case, pred in ROLLOUTS.items():
        atomic, orch = r_atomic(GOLD, pred).score, r_orch(GOLD, pred).score
        rows[case] = {"r_atomic": round(atomic, 3), "r_orch": round(orch, 3),
                      "graduated": round((atomic + orch) / 2, 3)}
    flawed = [c for c in ROLLOUTS if c != "perfect"]
    collapsed = {k: [c for c in flawed if rows[c][k] >= rows["perfect"][k]]
                 for k in ("r_atomic", "r_orch", "graduated")}
    return {"rollouts": rows, "collapsed": collapsed}


def rods_variance(steps: int, repeats: int) -> dict[str, Any]:
    """bench/rods_sim.py's summaries (its defaults but `steps` and `repeats`)."""
    args = rods_options().parse_args(["--steps", str(steps), "--repeats", str(repeats)])
    return run_modes(args)[1]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def main() -> None:
    """Measure every section and print the tables, then all figures as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--toolset", default="store")
    parser.add_argument("-n", type=int, default=30, help="accepted records per variant (the issue asks 500)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rods-steps", type=int, default=400)
    parser.add_argument("--rods-repeats", type=int, default=2)
    args = parser.parse_args()
    started = time.perf_counter()
    rows = [measure(args.toolset, args.n, args.seed, v) for v in VARIANTS]
    ablation_s = time.perf_counter() - started
    rewards = reward_collapses()
    rods = rods_variance(args.rods_steps, args.rods_repeats)

    print(f"SAP Table 6 - {args.toolset}, rule agents, n={args.n} accepted per variant (at most {4 * args.n} slots), "
          f"seed {args.seed}; sap / paper")
    print(f"{'variant':<15} {'Succ':>15} {'P_i':>7} {'P_o':>15} {'P_c':>7} {'P_f':>15} {'slots':>6}")
    for r in rows:
        p = PAPER.get(r["variant"], {})
        print(f"{r['variant']:<15} {r['whole']:6.1%} / {_pct(p.get('whole')):>6} {r['P_i']:7.1%} "
              f"{r['P_o']:6.1%} / {_pct(p.get('P_o')):>6} {r['P_c']:7.1%} {r['P_f']:6.1%} / {_pct(p.get('P_f')):>6} "
              f"{r['slots']:6d}")
    full = rows[0]
    print(f"\nSAP §3.4 chain statistics - the full variant's {full['accepted']} records; the paper's values are not "
          f"quoted here")
    print(f"mean L {full['mean_chain_length']:.2f}   max L {full['max_chain_length']}   "
          f"share L>=1 {full['dependent_share']:.1%}")
    print("\nCache paper, rewards alone and together - three-step chain find_user -> get_orders -> cancel_order; "
          "paper: each reward alone collapses in training")
    print(f"{'rollout':<50} {'R_atomic':>8} {'R_orch':>7} {'both':>6}")
    for case, r in rewards["rollouts"].items():
        print(f"{case:<50} {r['r_atomic']:8.3f} {r['r_orch']:7.3f} {r['graduated']:6.3f}")
    for k, cases in rewards["collapsed"].items():
        print(f"scored as high as perfect by {k}: {len(cases)} of {len(ROLLOUTS) - 1} flawed rollouts"
              + (f" ({'; '.join(cases)})" if cases else ""))
    print(f"\nRODS boundary variance - simulated learner, {args.rods_steps} steps x {args.rods_repeats} seeds, "
          "last half; paper: boundary tasks carry the reward variance GRPO learns from")
    print(f"{'seeding':<10} {'boundary share':>15} {'within-group variance':>22}")
    for mode, s in rods.items():
        print(f"{mode:<10} {s['boundary_share']:15.3f} {s['batch_reward_variance']:22.4f}")
    print(f"\n(Table 6 runs took {ablation_s:.0f} s)")
    print(json.dumps({"bench": "paper_tables", "toolset": args.toolset, "n": args.n, "seed": args.seed,
                      "table6": rows, "chain": {k: full[k] for k in ("mean_chain_length", "max_chain_length",
                                                                       "dependent_share")},
                      "rewards": rewards, "rods": {"steps": args.rods_steps, "repeats": args.rods_repeats,
                                                   "modes": rods}, "ablation_seconds": round(ablation_s, 1)}))


if __name__ == "__main__":
    main()
