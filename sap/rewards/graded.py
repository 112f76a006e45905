"""Graduated rewards of a rollout against the ground truth: R_atomic (per-call quality), R_orch (workflow
progress along the provenance edges) and their weighted sum.

Both take the dialogue turn by turn: `gold[t]` are the ground-truth calls of turn t, `pred[t]` the calls the
model made in that turn in order (a rollout with fewer turns has empty ones). A trainer that sees no turn
boundaries passes `flatten(gold)` (one turn, the edges renumbered) and one predicted turn.

Assignment. In each turn the predicted calls are matched one-to-one to the ground-truth calls, maximizing the
summed `level` (sap.rewards.levels: name 0.1, schema 0.1·S, values A·(0.6 + 0.2·E) with E execution success);
among equal sums, pairs closer in position win. Only pairs with level > 0 (the same function) are kept, so a
call repeated, or one call standing in for two ground-truth steps, is matched once and the copy is extra.

R_atomic = sum over matched pairs of level(c, g) / sum_t max(M_t, N_t),   1 when the denominator is 0,

with N_t ground-truth and M_t predicted calls in turn t: a missing step and an extra call both cost a slot.
Matching arguments (of every call of a function the turn has, against its matched call or else the closest
call of that function) are also counted per provenance group (query-derived: self_create, initial_state;
dependency-propagated: prev_output, prev_user_msg; other), reported apart as `group_hits`.

R_orch. A ground-truth step j is done when it is matched to a call that ran (E = 1) and every provenance edge
into it is honoured: for each argument of j taken from the result of step i (`GoldCall.sources`), step i is
matched to an earlier predicted call (an earlier turn, or earlier in the same turn) and j's call passes that
argument's value. Steps with no edge between them may come in any order. With k_t done steps and e_t = M_t -
(matched calls) extra calls in turn t,

    R_orch = sum_t k_t / sum_t (N_t + e_t),   1 when the denominator is 0.

Combined (the default reward): R = (w_a * R_atomic + w_o * R_orch) / (w_a + w_o), w_a = w_o = 0.5 by
default. Perfect calls against the edges keep R_atomic at 1 while R_orch falls; the right functions in order
with wrong values keep the steps without edges in R_orch and lose the rest, while R_atomic falls to 0.2.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sap.rewards.assign import max_weight_assignment
from sap.rewards.calls import GROUPS, ArgGroup, GoldCall, PredCall, arg_hits, values_match
from sap.rewards.levels import CallLevels, call_levels

Turns = Sequence[Sequence[GoldCall]]
PredTurns = Sequence[Sequence[PredCall]]
_POSITION_TIE = 1e-6  # per place of distance: breaks ties between equal-level assignments toward keeping order


@dataclass(frozen=True)
class CallScore:
    """One predicted call: its level against the ground-truth call it was matched to (`gold_index` None: not
    matched, score 0), and its argument hits against that call (an unmatched call of a function the turn has:
    against the closest call of that function, for the error counts)."""

    turn: int
    index: int
    score: float
    gold_index: int | None
    hits: dict[str, tuple[ArgGroup, bool]] = field(default_factory=dict)
    levels: CallLevels | None = None
    known_function: bool = False  # some ground-truth call of the turn has this function

    @property
    def wrong_function(self) -> bool:
        return not self.known_function

    @property
    def wrong_parameters(self) -> bool:
        return self.known_function and not all(ok for _, ok in self.hits.values())


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
    """R_orch with the done steps k, ground-truth steps N and extra calls e, summed over turns."""

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


def assign_turn(gold: Sequence[GoldCall], pred: Sequence[PredCall]) -> dict[int, int]:
    """Predicted call index -> ground-truth call index of one turn (see the module docstring)."""
    if not gold or not pred:
        return {}
    levels = [[call_levels(g, c).score for g in gold] for c in pred]
    weights = [[lv - _POSITION_TIE * abs(i - j) if lv > 0 else 0.0 for j, lv in enumerate(row)]
               for i, row in enumerate(levels)]
    return max_weight_assignment(weights)


def assign(gold: Turns, pred: PredTurns) -> list[dict[int, int]]:
    """The one-to-one assignment of every turn, indexed by turn."""
    return [assign_turn(_turn(gold, t), _turn(pred, t)) for t in range(max(len(gold), len(pred)))]


def r_atomic(gold: Turns, pred: PredTurns, pairs: Sequence[dict[int, int]] | None = None) -> AtomicReward:
    """R_atomic (see the module docstring); `pairs` is `assign(gold, pred)` when the caller has it."""
    pairs = assign(gold, pred) if pairs is None else pairs
    calls, slots = [], 0
    for t, matched in enumerate(pairs):
        g_turn, p_turn = _turn(gold, t), _turn(pred, t)
        slots += max(len(g_turn), len(p_turn))
        for i, c in enumerate(p_turn):
            j = matched.get(i)
            if j is None:  # extra: scores 0; its hits, against the closest call of its function, name its errors
                near = max((g for g in g_turn if g.name == c.name), key=lambda g: call_levels(g, c).score, default=None)
                calls.append(CallScore(t, i, 0.0, None, arg_hits(near, c) if near else {}, None, near is not None))
                continue
            levels = call_levels(g_turn[j], c)
            calls.append(CallScore(t, i, levels.score, j, arg_hits(g_turn[j], c), levels, True))
    hits = {g: [0, 0] for g in GROUPS}
    for c in calls:
        for group, ok in c.hits.values():
            hits[group][0] += ok
            hits[group][1] += 1
    score = sum(c.score for c in calls) / slots if slots else 1.0
    return AtomicReward(score, calls, {g: (m, n) for g, (m, n) in hits.items()})


def step_done(gold: Turns, pred: PredTurns, placed: dict[tuple[int, int], tuple[int, int]], t: int, j: int) -> bool:
    """Whether ground-truth step (t, j) is done: matched to a call that ran, with every edge into it honoured."""
    if (t, j) not in placed:
        return False
    call = pred[t][placed[(t, j)][1]]
    if not call.ok:
        return False
    g = gold[t][j]
    for arg, source in g.sources.items():
        if source not in placed or placed[source] >= placed[(t, j)]:
            return False
        if arg not in call.args or not values_match(g.args[arg], call.args[arg]):
            return False
    return True


def r_orch(gold: Turns, pred: PredTurns, pairs: Sequence[dict[int, int]] | None = None) -> OrchReward:
    """R_orch (see the module docstring); `pairs` is `assign(gold, pred)` when the caller has it."""
    pairs = assign(gold, pred) if pairs is None else pairs
    placed = {(t, j): (t, i) for t, matched in enumerate(pairs) for i, j in matched.items()}
    per_turn = []
    for t, matched in enumerate(pairs):
        steps = len(_turn(gold, t))
        done = sum(step_done(gold, pred, placed, t, j) for j in range(steps))
        per_turn.append((done, steps, len(_turn(pred, t)) - len(matched)))
    k = sum(d for d, _, _ in per_turn)
    steps = sum(n for _, n, _ in per_turn)
    extra = sum(e for _, _, e in per_turn)
    denominator = steps + extra
    return OrchReward(k / denominator if denominator else 1.0, k, steps, extra, per_turn)


def graduated_reward(gold: Turns, pred: PredTurns, w_atomic: float = 0.5, w_orch: float = 0.5) -> GraduatedReward:
    """(w_atomic * R_atomic + w_orch * R_orch) / (w_atomic + w_orch), in [0, 1]."""
    if w_atomic < 0 or w_orch < 0 or w_atomic + w_orch <= 0:
        raise ValueError(f"reward weights must be >= 0 with a positive sum, got w_atomic={w_atomic}, w_orch={w_orch}")
    pairs = assign(gold, pred)
    atomic, orch = r_atomic(gold, pred, pairs), r_orch(gold, pred, pairs)
    return GraduatedReward((w_atomic * atomic.score + w_orch * orch.score) / (w_atomic + w_orch), atomic, orch)


def flatten(gold: Turns) -> list[list[GoldCall]]:
    """All ground-truth turns as one, with the provenance edges renumbered: for a response without turn
    boundaries."""
    offsets, total = [], 0
    for turn in gold:
        offsets.append(total)
        total += len(turn)
    return [[GoldCall(g.name, g.args, g.tags, {a: (0, offsets[t] + c) for a, (t, c) in g.sources.items()
                                               if t < len(gold)})
             for turn in gold for g in turn]]
