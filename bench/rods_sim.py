"""RODS on a simulated learner: a static pool, random seeding and boundary seeding, side by side, each driving the
real `ActivePool` (with `OnlineSynthesis` inline) for the same number of steps and the same learner.

The learner has one skill per task type. A rollout of a task succeeds turn by turn with probability
sigmoid(skill - difficulty); its progress reward is the share of its turns that succeeded. Skill grows with
practice in proportion to the reward variance within each sampled task's group of K rollouts (a group with equal
rewards has zero advantage under GRPO and teaches nothing); `--learning practice` makes it a constant per practised
task instead. A variant inherits its seed's difficulty plus Gaussian
noise. Nothing in the learner knows about zones or seeding.

Figures per step: the share of active tasks in the boundary zone by their true expected reward (0.20..0.85), the
mean within-group reward variance of the sampled batch (`batch_reward_variance`, what GRPO learns from), the
variance of all rewards of the batch pooled, the pool size, and the injected and retired counts. The summary
averages the last half of the steps (400 of 800) over --repeats learner seeds, with how many epochs admitted
variants stayed active (median) and the final skill over static's; `--paper-scale` runs the RODS paper's 400 seed
tasks. The last line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import statistics
from dataclasses import dataclass, field
from typing import Any

from sap.curriculum import ActivePool, PoolConfig, PoolTask
from sap.curriculum.online import OnlineSynthesis

TYPES = {"auth": -0.5, "search": 0.5, "booking": 1.5, "refund": 2.5}  # task type -> mean difficulty
BOUNDARY = (0.20, 0.85)


@dataclass
class Learner:
    """Per-type skill; tasks carry a difficulty and a number of turns."""

    rng: random.Random
    lr: float
    skill: dict[str, float] = field(default_factory=lambda: {t: 0.0 for t in TYPES})

    def p(self, kind: str, difficulty: float) -> float:
        """Per-turn success probability."""
        return 1 / (1 + math.exp(-(self.skill[kind] - difficulty)))

    def rollouts(self, kind: str, difficulty: float, turns: int, k: int) -> list[float]:
        """K progress rewards: the share of turns that succeeded in each rollout."""
        p = self.p(kind, difficulty)
        return [sum(self.rng.random() < p for _ in range(turns)) / turns for _ in range(k)]

    def learn(self, kind: str, group_variance: float, rule: str) -> None:
        """Practice moves the type's skill up: by the group's reward variance (`variance`), or by a constant per
        practised task whatever its rewards (`practice`, a check that the result is not an artefact of the first)."""
        self.skill[kind] += self.lr * (group_variance if rule == "variance" else 0.03)


def simulate(mode: str, steps: int, seed: int, args: argparse.Namespace) -> dict[str, list[float]]:
    """One run of `mode` (static, random, boundary); per-step series."""
    rng = random.Random(f"world:{seed}")  # the same seed tasks and variant noise draws for every mode
    learner = Learner(random.Random(f"learner:{seed}"), args.lr)
    cfg = PoolConfig(window=args.k, min_rollouts=args.k, seed_quota=args.quota, cooldown_steps=args.cooldown,
                     variant_capacity=args.variant_capacity, stale_steps=args.stale, seeding="random" if mode == "random" else "boundary",
                     seed=seed)
    pool = ActivePool(cfg, pool_id=mode)
    tasks: dict[str, dict[str, Any]] = {}
    for kind, mean in TYPES.items():
        for i in range(args.seeds_per_type):
            tid = f"{kind}-{i:02d}"
            tasks[tid] = {"kind": kind, "difficulty": rng.gauss(mean, 1.0), "turns": rng.randint(3, 6)}
            pool.add_seed(tid, kind, tasks[tid])
    noise = random.Random(f"variants:{seed}:{mode}")

    def make_variants(seed_task: PoolTask, payload: dict[str, Any]) -> list[tuple[str, Any]]:
        out = []
        for _ in range(args.variants_per_seed):
            vid = f"{seed_task.id}.{len(tasks)}"
            tasks[vid] = {**payload, "difficulty": payload["difficulty"] + noise.gauss(0, args.noise)}
            out.append((vid, tasks[vid]))
        return out

    if mode != "static":
        pool.synthesis = OnlineSynthesis(pool, make_variants, workers=0)
    series: dict[str, list[float]] = {k: [] for k in ("boundary_share", "batch_reward_variance", "batch_total_variance",
                                                      "pool_size", "injected", "retired")}
    for step in range(steps):
        batch = pool.sample_batch(args.batch)
        group_vars, pooled = [], []
        for task in batch:
            t = tasks[task.id]
            rewards = learner.rollouts(t["kind"], t["difficulty"], t["turns"], args.k)
            pool.report(task.id, rewards)
            var = statistics.pvariance(rewards)
            learner.learn(t["kind"], var, args.learning)
            group_vars.append(var)
            pooled += rewards
        if step % args.epoch == args.epoch - 1:
            pool.end_epoch()
        active = pool.active()
        in_boundary = sum(BOUNDARY[0] <= learner.p(tasks[t.id]["kind"], tasks[t.id]["difficulty"]) <= BOUNDARY[1]
                          for t in active)
        series["boundary_share"].append(in_boundary / len(active))
        series["batch_reward_variance"].append(sum(group_vars) / len(group_vars))
        series["batch_total_variance"].append(statistics.pvariance(pooled))
        series["pool_size"].append(len(active))
        series["injected"].append(pool.counts["injected"])
        series["retired"].append(sum(v for k, v in pool.counts.items() if k.startswith("retired_")))
    series["final_skill"] = [round(v, 3) for v in learner.skill.values()]
    series["variant_epochs"] = [((t.retired_step if t.retired_step is not None else steps) - t.entered_step) / args.epoch
                                for t in pool.tasks.values() if t.origin == "variant" and t.entered_step is not None]
    series["retired_by_reason"] = {k[len("retired_"):]: v for k, v in pool.counts.items() if k.startswith("retired_")}
    return series


def summarize(runs: list[dict[str, Any]], tail: int) -> dict[str, Any]:
    """Means over the last `tail` steps, averaged over the runs, plus end counts."""
    def tail_mean(key: str) -> float:
        return round(statistics.mean(statistics.mean(r[key][-tail:]) for r in runs), 4)
    lives = _lives(runs)
    reasons: dict[str, float] = {}
    for r in runs:
        for k, v in r["retired_by_reason"].items():
            reasons[k] = reasons.get(k, 0) + v / len(runs)
    return {"boundary_share": tail_mean("boundary_share"), "batch_reward_variance": tail_mean("batch_reward_variance"),
            "batch_total_variance": tail_mean("batch_total_variance"), "pool_size": tail_mean("pool_size"),
            "injected": round(statistics.mean(r["injected"][-1] for r in runs), 1),
            "retired": round(statistics.mean(r["retired"][-1] for r in runs), 1),
            "retired_by_reason": {k: round(v, 1) for k, v in sorted(reasons.items())},
            "final_skill_mean": round(statistics.mean(statistics.mean(r["final_skill"]) for r in runs), 3),
            "variant_epochs_median": round(statistics.median(lives), 2) if lives else None}


def _lives(runs: list[dict[str, Any]]) -> list[float]:
    """Epochs each admitted variant stayed active (to its retirement, or to the end of the run), over the runs."""
    return [e for r in runs for e in r["variant_epochs"]]


def plot(results: dict[str, list[dict[str, Any]]], path: str) -> None:
    """Four panels over the steps, the first repeat of each mode."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    panels = [("boundary_share", "share of pool in boundary zone"), ("batch_reward_variance", "batch reward variance (within group)"),
              ("pool_size", "pool size"), (None, "injected (solid) / retired (dashed), cumulative")]
    for ax, (key, title) in zip(axes.flat, panels):
        for mode, runs in results.items():
            if key is None:
                line, = ax.plot(runs[0]["injected"], label=f"{mode} injected")
                ax.plot(runs[0]["retired"], linestyle="--", color=line.get_color())
            else:
                ax.plot(runs[0][key], label=mode)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def options() -> argparse.ArgumentParser:
    """The simulation's options and their defaults (the reproduction report parses its own values with it)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--repeats", type=int, default=3, help="learner seeds averaged")
    parser.add_argument("--batch", type=int, default=16, help="tasks per step")
    parser.add_argument("-k", type=int, default=16, help="rollouts per task per step (the pool's window)")
    parser.add_argument("--epoch", type=int, default=20, help="steps per epoch")
    parser.add_argument("--seeds-per-type", type=int, default=15)
    parser.add_argument("--variants-per-seed", type=int, default=2)
    parser.add_argument("--noise", type=float, default=0.5, help="std of a variant's difficulty around its seed's")
    parser.add_argument("--lr", type=float, default=0.05, help="skill gained per unit of group reward variance")
    parser.add_argument("--learning", choices=("variance", "practice"), default="variance",
                        help="skill growth per practised task: by group reward variance, or constant")
    parser.add_argument("--quota", type=int, default=2)
    parser.add_argument("--cooldown", type=int, default=60)
    parser.add_argument("--variant-capacity", type=int, default=90)
    parser.add_argument("--stale", type=int, default=200)
    parser.add_argument("--png", default="rods_sim.png")
    parser.add_argument("--paper-scale", action="store_true",
                        help="the RODS paper's scale: 400 seed tasks (100 per type), and the pool's cool-down, "
                             "staleness, quota and variant capacity at PoolConfig's shipped defaults")
    return parser


def run_modes(args: argparse.Namespace) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, Any]]]:
    """Every mode's runs (one per learner seed) and their summaries over the last half of the steps."""
    if args.paper_scale:
        shipped = PoolConfig()
        args.seeds_per_type = 400 // len(TYPES)
        args.cooldown, args.stale = shipped.cooldown_steps, shipped.stale_steps
        args.quota, args.variant_capacity = shipped.seed_quota, shipped.variant_capacity
    results = {mode: [simulate(mode, args.steps, seed, args) for seed in range(args.repeats)]
               for mode in ("static", "random", "boundary")}
    return results, {mode: summarize(runs, args.steps // 2) for mode, runs in results.items()}


def main() -> None:
    """Run the three modes and print their figures, the JSON summary last."""
    args = options().parse_args()
    results, summary = run_modes(args)
    for mode, s in summary.items():
        print(f"{mode:9s} boundary share {s['boundary_share']:.3f}  batch reward variance {s['batch_reward_variance']:.4f} "
              f"(pooled {s['batch_total_variance']:.4f})  pool size {s['pool_size']:.1f}  injected {s['injected']:.0f}  "
              f"retired {s['retired']:.0f} {s['retired_by_reason']}  mean final skill {s['final_skill_mean']}")
    for mode in ("random", "boundary"):
        summary[mode]["skill_gain_over_static"] = round(
            summary[mode]["final_skill_mean"] - summary["static"]["final_skill_mean"], 3)
        print(f"{mode:9s} admitted variants active for a median {summary[mode]['variant_epochs_median']} epochs; "
              f"final skill {summary[mode]['skill_gain_over_static']:+.3f} over static")
    plot(results, args.png)
    print(f"plot: {args.png}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
