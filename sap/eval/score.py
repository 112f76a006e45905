"""Scores of rollouts: rewards, turn and call accuracy, and the error taxonomy; the summary over a run."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sap.eval.rollout import Rollout, TurnRollout
from sap.eval.tasks import EvalTask
from sap.rewards.calls import GROUPS, GoldCall, PredCall, exact
from sap.rewards.graded import GraduatedReward, graduated_reward
from sap.rewards.progress import TurnProgress, progress_reward

ERROR_KINDS = ("wrong_function", "wrong_parameters", "query_param_errors", "dependent_param_errors",
               "other_param_errors", "missing_calls", "stopped_after_error", "step_cap")


@dataclass
class RolloutScore:
    """A rollout's rewards, accuracy counts and error counts."""

    task_id: str
    sample: int
    reward: GraduatedReward
    progress: float
    turns: int
    turns_correct: int
    gold_calls: int
    gold_calls_matched: int
    errors: Counter = field(default_factory=Counter)
    failed: str | None = None


def matched_gold(gold: Sequence[GoldCall], calls: Sequence[PredCall]) -> int:
    """How many ground-truth calls have their own exact, successful counterpart among `calls`."""
    free = [c for c in calls if c.ok]
    matched = 0
    for g in gold:
        hit = next((i for i, c in enumerate(free) if exact(g, c)), None)
        if hit is not None:
            free.pop(hit)
            matched += 1
    return matched


def _stopped_after_error(turn: TurnRollout, gold: Sequence[GoldCall], matched: int) -> bool:
    """The turn's last call failed, the model then answered with text, and ground-truth calls were left undone."""
    return turn.answered and bool(turn.calls) and not turn.calls[-1].ok and matched < len(gold)


def score_rollout(task: EvalTask, rollout: Rollout, w_atomic: float = 0.5, w_orch: float = 0.5) -> RolloutScore:
    """Score one rollout of `task`.

    - turn correct: the executor state after the turn equals the ground truth's, and every ground-truth call
      of the turn has its own exact (same function, all arguments equal after normalization), successful
      call in the turn; failed attempts before it are allowed.
    - call accuracy counts: ground-truth calls with such an exact successful call in their turn.
    - errors: `wrong_function` and `wrong_parameters` per predicted call (see sap.rewards.graded.CallScore);
      `query_param_errors`, `dependent_param_errors`, `other_param_errors` per mismatched argument of a call
      whose function was right, by the ground truth's provenance group; `missing_calls` ground-truth calls
      without an exact successful call; `stopped_after_error` turns whose last call failed and that the model
      ended with text with ground-truth calls undone; `step_cap` turns cut at the step cap.
    """
    gold = [turn.gold for turn in task.turns]
    pred = [turn.calls for turn in rollout.turns]
    reward = graduated_reward(gold, pred, w_atomic, w_orch)
    progress = progress_reward([TurnProgress(t.state_correct, len(t.calls), sum(c.ok for c in t.calls), len(g))
                                for t, g in zip(rollout.turns, gold)])
    errors: Counter = Counter({kind: 0 for kind in ERROR_KINDS})
    for call in reward.atomic.calls:
        errors["wrong_function"] += call.wrong_function
        errors["wrong_parameters"] += call.wrong_parameters
        for group, ok in call.hits.values():
            errors[f"{group}_param_errors"] += not ok
    correct = matched_total = 0
    for t, g in zip(rollout.turns, gold):
        matched = matched_gold(g, t.calls)
        matched_total += matched
        correct += t.state_correct and matched == len(g)
        errors["stopped_after_error"] += _stopped_after_error(t, g, matched)
        errors["step_cap"] += not t.answered and t.steps > 0 and rollout.error is None
    gold_calls = sum(len(g) for g in gold)
    errors["missing_calls"] = gold_calls - matched_total
    return RolloutScore(task.id, rollout.sample, reward, progress, len(gold), correct, gold_calls, matched_total,
                        errors, rollout.error)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(scores: Sequence[RolloutScore]) -> dict[str, Any]:
    """The run's figures: accuracy, mean rewards, argument accuracy per provenance group, error counts."""
    turns = sum(s.turns for s in scores)
    gold_calls = sum(s.gold_calls for s in scores)
    hits = {g: [0, 0] for g in GROUPS}
    for s in scores:
        for g, (m, n) in s.reward.atomic.group_hits.items():
            hits[g][0] += m
            hits[g][1] += n
    errors: Counter = Counter({kind: 0 for kind in ERROR_KINDS})
    for s in scores:
        errors.update(s.errors)
    return {
        "rollouts": len(scores),
        "failed_rollouts": sum(s.failed is not None for s in scores),
        "first_failure": next((s.failed for s in scores if s.failed is not None), None),
        "turn_accuracy": sum(s.turns_correct for s in scores) / turns if turns else None,
        "call_accuracy": sum(s.gold_calls_matched for s in scores) / gold_calls if gold_calls else None,
        "reward": _mean([s.reward.score for s in scores]),
        "r_atomic": _mean([s.reward.atomic.score for s in scores]),
        "r_orch": _mean([s.reward.orch.score for s in scores]),
        "progress": _mean([s.progress for s in scores]),
        "arg_accuracy": {g: (m / n if n else None) for g, (m, n) in hits.items()},
        "errors": {kind: errors[kind] for kind in ERROR_KINDS},
    }


def task_rewards(scores: Sequence[RolloutScore]) -> list[dict[str, Any]]:
    """One row per task, in first-seen order: its K progress rewards (sample order), their mean, and the K
    graduated rewards; the curriculum reads `task_id -> rewards`."""
    by_task: dict[str, list[RolloutScore]] = {}
    for s in scores:
        by_task.setdefault(s.task_id, []).append(s)
    rows = []
    for task_id, group in by_task.items():
        group = sorted(group, key=lambda s: s.sample)
        rewards = [s.progress for s in group]
        rows.append({"task_id": task_id, "rewards": rewards, "mean": sum(rewards) / len(rewards),
                     "graduated": [s.reward.score for s in group]})
    return rows
