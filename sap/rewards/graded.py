"""Graduated rewards of a rollout against the ground truth: R_atomic (per-call quality), R_orch (workflow
progress) and their weighted sum.

Both take the dialogue turn by turn: `gold[t]` are the ground-truth calls of turn t in order, `pred[t]` the
calls the model made in that turn in order (a rollout with fewer turns has empty ones). A trainer that sees
no turn boundaries passes one turn each.

R_atomic. A predicted call c in turn t scores

    a(c) = 0                                     if no ground-truth call of turn t has c's function,
    a(c) = max over those calls g of  m(g, c) / |args(g) ∪ args(c)|   otherwise (1 when both have none),

where m counts the arguments of g that c passed with an equal value after `normalize_value` (extra arguments
of c count in the denominator only). R_atomic = mean of a(c) over all predicted calls; with no predicted
calls it is 1 if the ground truth has none either, else 0. Matching arguments are also counted per
provenance group (query-derived: self_create, initial_state; dependency-propagated: prev_output,
prev_user_msg; other), reported apart as `group_hits`.

R_orch. In turn t with ground-truth functions f_1..f_N (in order) and predicted calls p_1..p_M, walk the
ground truth in order, each step matching the first later predicted call of the same function; k_t is the
number of steps matched before the first step that cannot be (ordered progress: a skipped or unreached
step ends it), e_t = M - k_t the predicted calls not used (extra, repeated, out of order). Then

    R_orch = sum_t k_t / sum_t (N_t + e_t),   1 when both sums are 0.

Stopping early leaves k_t < N_t; every extra call adds to the denominator. Arguments play no part.

Combined (the default reward): R = (w_a * R_atomic + w_o * R_orch) / (w_a + w_o), w_a = w_o = 0.5 by
default. Each alone can be gamed: perfect calls in the wrong order keep R_atomic at 1 while R_orch falls;
the right functions in the right order with wrong arguments keep R_orch at 1 while R_atomic falls. The
sum pays fully only for both.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sap.rewards.calls import GROUPS, ArgGroup, GoldCall, PredCall, arg_hits, arg_share

Turns = Sequence[Sequence[GoldCall]]
PredTurns = Sequence[Sequence[PredCall]]


@dataclass(frozen=True)
class CallScore:
    """a(c) of one predicted call, the ground-truth call it was scored against, and its argument hits."""

    turn: int
    index: int
    score: float
    gold_index: int | None  # None: wrong function (no ground-truth call of this function in the turn)
    hits: dict[str, tuple[ArgGroup, bool]] = field(default_factory=dict)

    @property
    def wrong_function(self) -> bool:
        return self.gold_index is None

    @property
    def wrong_parameters(self) -> bool:
        return self.gold_index is not None and not all(ok for _, ok in self.hits.values())


@dataclass(frozen=True)
class AtomicReward:
    """R_atomic with its per-call scores and the matching arguments per provenance group: (matched, total)."""

    score: float
    calls: list[CallScore]
    group_hits: dict[ArgGroup, tuple[int, int]]

    def group_share(self, group: ArgGroup) -> float | None:
        """Matched / total arguments of one group, None if the group has none."""
        matched, total = self.group_hits[group]
        return matched / total if total else None


@dataclass(frozen=True)
class OrchReward:
    """R_orch with the matched steps k, ground-truth steps N and extra calls e, summed over turns."""

    score: float
    matched: int
    steps: int
    extra: int
    per_turn: list[tuple[int, int, int]]  # (k_t, N_t, e_t)


@dataclass(frozen=True)
class GraduatedReward:
    """The weighted sum of R_atomic and R_orch, with both parts."""

    score: float
    atomic: AtomicReward
    orch: OrchReward


def _turn(turns: Sequence[Sequence], t: int) -> Sequence:
    return turns[t] if t < len(turns) else ()


def score_call(gold: Sequence[GoldCall], call: PredCall, turn: int, index: int) -> CallScore:
    """a(c) of one predicted call against the ground-truth calls of its turn."""
    best: CallScore | None = None
    for g_index, g in enumerate(gold):
        if g.name != call.name:
            continue
        share = arg_share(g, call)
        if best is None or share > best.score:
            best = CallScore(turn, index, share, g_index, arg_hits(g, call))
    return best or CallScore(turn, index, 0.0, None)


def r_atomic(gold: Turns, pred: PredTurns) -> AtomicReward:
    """R_atomic (see the module docstring)."""
    calls = [score_call(_turn(gold, t), c, t, i)
             for t in range(len(pred)) for i, c in enumerate(pred[t])]
    hits = {g: [0, 0] for g in GROUPS}
    for c in calls:
        for group, ok in c.hits.values():
            hits[group][0] += ok
            hits[group][1] += 1
    if calls:
        score = sum(c.score for c in calls) / len(calls)
    else:
        score = 0.0 if any(gold) else 1.0
    return AtomicReward(score, calls, {g: (m, n) for g, (m, n) in hits.items()})


def ordered_progress(gold: Sequence[GoldCall], pred: Sequence[PredCall]) -> int:
    """k: how many ground-truth steps, in order, the predicted calls complete before the first missing one."""
    position = 0
    for k, g in enumerate(gold):
        j = next((j for j in range(position, len(pred)) if pred[j].name == g.name), None)
        if j is None:
            return k
        position = j + 1
    return len(gold)


def r_orch(gold: Turns, pred: PredTurns) -> OrchReward:
    """R_orch (see the module docstring)."""
    per_turn = []
    for t in range(max(len(gold), len(pred))):
        g, p = _turn(gold, t), _turn(pred, t)
        k = ordered_progress(g, p)
        per_turn.append((k, len(g), len(p) - k))
    matched = sum(k for k, _, _ in per_turn)
    steps = sum(n for _, n, _ in per_turn)
    extra = sum(e for _, _, e in per_turn)
    denominator = steps + extra
    return OrchReward(matched / denominator if denominator else 1.0, matched, steps, extra, per_turn)


def graduated_reward(gold: Turns, pred: PredTurns, w_atomic: float = 0.5, w_orch: float = 0.5) -> GraduatedReward:
    """(w_atomic * R_atomic + w_orch * R_orch) / (w_atomic + w_orch), in [0, 1]."""
    if w_atomic < 0 or w_orch < 0 or w_atomic + w_orch <= 0:
        raise ValueError(f"reward weights must be >= 0 with a positive sum, got w_atomic={w_atomic}, w_orch={w_orch}")
    atomic, orch = r_atomic(gold, pred), r_orch(gold, pred)
    return GraduatedReward((w_atomic * atomic.score + w_orch * orch.score) / (w_atomic + w_orch), atomic, orch)
