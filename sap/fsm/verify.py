"""V_spec: structural and provenance checks that a drafted FSM must pass before any walk is sampled from it.

`verify_fsm` returns every violation it finds, each named by a stable rule, in a fixed order: rules in the order
of `RULES`, and within a rule in the order of the FSM's states, finals and transitions. An empty list means the
FSM passes.
"""
from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass
from typing import Iterable

from sap.errors import SapError
from sap.fsm.conditions import ConditionError, condition_of
from sap.model import FSM, StateType, Tag, ToolSpec, Transition

RULES = (
    "duplicate_state",  # no two states share an id
    "transition_endpoints",  # transitions join existing states; the initial and final states exist
    "reachability",  # every state is reachable from the initial one
    "dead_end",  # every non-final state has an out-edge
    "final_reachable",  # some final state is reachable
    "path_length",  # a path of a requested length runs from the initial state to a final state
    "unknown_tool",  # every action names a known tool
    "missing_tag",  # every required argument of every tool on every edge has a provenance tag
    "initial_dependency",  # no edge out of the initial state depends on an earlier turn
    "condition",  # every condition is in the condition language, and `confirmed` only leaves an ACTION_REQUIRED state
    "probability",  # probabilities and weights are finite and >= 0; a state's out-edges do not all weigh 0
)

#: Tags that refer to an earlier turn, so cannot be declared on an edge out of the initial state.
EARLIER_TURN_TAGS = (Tag.prev_output, Tag.prev_user_msg)


@dataclass(frozen=True)
class Violation:
    """One broken V_spec rule: the rule's stable name and what is wrong."""

    rule: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.detail}"


class FSMVerificationError(SapError, RuntimeError):
    """An FSM builder still produced a V_spec-violating FSM after the allowed number of drafting rounds."""

    def __init__(self, toolset: str, rounds: int, violations: Iterable[Violation]) -> None:
        self.toolset = toolset
        self.rounds = rounds
        self.violations = list(violations)
        listed = "\n".join(f"  {v}" for v in self.violations)
        super().__init__(f"FSM for toolset {toolset!r} still violates V_spec after {rounds} "
                         f"round{'s' if rounds != 1 else ''} ({len(self.violations)} violation"
                         f"{'s' if len(self.violations) != 1 else ''} in the last round):\n{listed}")

    def __reduce__(self):
        return (type(self), (self.toolset, self.rounds, self.violations))


def length_range(path_length: int | tuple[int, int]) -> tuple[int, int]:
    """The (min, max) turn counts that `path_length` asks for; ValueError if they make no sense."""
    if isinstance(path_length, bool):
        raise ValueError(f"path_length must be an int or a (min, max) pair, not {path_length!r}")
    if isinstance(path_length, int):
        lo = hi = path_length
    else:
        try:
            lo, hi = path_length
        except (TypeError, ValueError):
            raise ValueError(f"path_length must be an int or a (min, max) pair, not {path_length!r}") from None
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (lo, hi)):
            raise ValueError(f"path_length bounds must be ints, not {path_length!r}")
    if lo < 0 or hi < lo:
        raise ValueError(f"path_length needs 0 <= min <= max, got {path_length!r}")
    return lo, hi


def _edge_name(i: int, t: Transition) -> str:
    """How a violation names transition `i`."""
    return f"transition {i} ({t.source!r} -> {t.target!r}, {' + '.join(t.action) or 'no action'})"


def _reachable(start: str, adjacency: dict[str, list[str]]) -> set[str]:
    """States reachable from `start` (itself included) over `adjacency`."""
    seen, queue = {start}, deque([start])
    while queue:
        for nxt in adjacency.get(queue.popleft(), []):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


def _final_at_length(initial: str, finals: set[str], adjacency: dict[str, list[str]], lo: int, hi: int) -> int | None:
    """The smallest N in [lo, hi] such that some walk of exactly N transitions ends in a final state, else None.

    Dynamic programming over lengths: layer k is the set of states some k-step walk from the initial state ends
    in (cycles allowed). Once a layer repeats an earlier one the sequence is periodic, so the scan can stop early.
    """
    layer: frozenset[str] = frozenset({initial})
    seen_at: dict[frozenset[str], int] = {}
    hits: list[bool] = []  # hits[k]: layer k holds a final state
    for k in range(hi + 1):
        if k >= lo and layer & finals:
            return k
        if layer in seen_at:
            # the layers now cycle: layer n = layer first + (n - first) % period for every n >= first
            first, period, floor = seen_at[layer], k - seen_at[layer], max(lo, k)
            found = [j + period * -(-(floor - j) // period) for j in range(first, k) if hits[j]]
            return min((n for n in found if n <= hi), default=None)
        seen_at[layer] = k
        hits.append(bool(layer & finals))
        layer = frozenset(n for s in layer for n in adjacency.get(s, []))
        if not layer:
            return None
    return None


def verify_fsm(fsm: FSM, specs: dict[str, ToolSpec], path_length: int | tuple[int, int]) -> list[Violation]:
    """Every V_spec violation of `fsm` against the tool `specs`, for walks of `path_length` turns (N or (min, max)).

    Graph rules look only at transitions whose endpoints exist. A rule whose violation would be implied by an
    earlier one is skipped: reachability rules need an existing initial state, and `path_length` is checked only
    when some final state is reachable at all.
    """
    lo, hi = length_range(path_length)
    out: list[Violation] = []
    ids = [s.id for s in fsm.states]
    known = set(ids)
    finals = set(fsm.finals)

    # duplicate_state
    for sid, count in Counter(ids).items():
        if count > 1:
            out.append(Violation("duplicate_state", f"state id {sid!r} is used by {count} states"))

    # transition_endpoints
    initial_ok = fsm.initial in known
    if not initial_ok:
        out.append(Violation("transition_endpoints", f"initial state {fsm.initial!r} is not a state"))
    for f in fsm.finals:
        if f not in known:
            out.append(Violation("transition_endpoints", f"final state {f!r} is not a state"))
    sound: list[Transition] = []
    for i, t in enumerate(fsm.transitions):
        missing = [(end, sid) for end, sid in (("source", t.source), ("target", t.target)) if sid not in known]
        for end, sid in missing:
            out.append(Violation("transition_endpoints", f"{_edge_name(i, t)} has {end} {sid!r}, which is not a state"))
        if not missing:
            sound.append(t)
    adjacency: dict[str, list[str]] = {}
    for t in sound:
        adjacency.setdefault(t.source, []).append(t.target)

    # reachability
    reached = _reachable(fsm.initial, adjacency) if initial_ok else set()
    if initial_ok:
        for sid in dict.fromkeys(ids):
            if sid not in reached:
                out.append(Violation("reachability", f"state {sid!r} is not reachable from {fsm.initial!r}"))

    # dead_end
    for sid in dict.fromkeys(ids):
        if sid not in finals and not adjacency.get(sid):
            out.append(Violation("dead_end", f"non-final state {sid!r} has no out-edge"))

    # final_reachable and path_length
    if initial_ok:
        reachable_finals = [f for f in fsm.finals if f in known and f in reached]
        if not fsm.finals:
            out.append(Violation("final_reachable", "the FSM has no final state"))
        elif not reachable_finals:
            out.append(Violation("final_reachable",
                                 f"no final state {sorted(finals)} is reachable from {fsm.initial!r}"))
        elif _final_at_length(fsm.initial, finals & known, adjacency, lo, hi) is None:
            want = (f"exactly {lo}" if lo == hi else f"{lo} to {hi}") + (" transition" if hi == 1 else " transitions")
            out.append(Violation("path_length", f"no path of {want} runs from {fsm.initial!r} "
                                                f"to a final state {sorted(finals & known)}"))

    # unknown_tool
    for i, t in enumerate(fsm.transitions):
        for tool in t.action:
            if tool not in specs:
                out.append(Violation("unknown_tool", f"{_edge_name(i, t)} calls unknown tool {tool!r}"))

    # missing_tag
    for i, t in enumerate(fsm.transitions):
        for tool in dict.fromkeys(t.action):
            if tool not in specs:
                continue
            tags = t.provenance_tag.get(tool, {})
            for arg in specs[tool].required:
                if arg not in tags:
                    out.append(Violation("missing_tag", f"{_edge_name(i, t)}: required argument {arg!r} of "
                                                        f"{tool!r} has no provenance tag"))

    # initial_dependency
    for i, t in enumerate(fsm.transitions):
        if t.source != fsm.initial:
            continue
        for tool in dict.fromkeys(t.action):
            for arg, tag in t.provenance_tag.get(tool, {}).items():
                if tag in EARLIER_TURN_TAGS:
                    out.append(Violation("initial_dependency", f"{_edge_name(i, t)}: argument {arg!r} of {tool!r} "
                                                               f"is tagged {tag.value} on an edge out of the "
                                                               f"initial state {fsm.initial!r}"))

    # condition
    types = {s.id: s.type for s in fsm.states}
    for i, t in enumerate(fsm.transitions):
        try:
            cond = condition_of(fsm, i)
        except ConditionError as exc:
            out.append(Violation("condition", str(exc)))
            continue
        if cond.confirmed and t.source in types and types[t.source] != StateType.ACTION_REQUIRED:
            out.append(Violation("condition", f"{_edge_name(i, t)} is `confirmed` but leaves {t.source!r} of type "
                                              f"{types[t.source].value}, not ACTION_REQUIRED: it can never be taken"))

    # probability
    for i, t in enumerate(fsm.transitions):
        for name, value in (("probability", t.probability), ("weight", t.weight)):
            if not math.isfinite(value) or value < 0:
                out.append(Violation("probability", f"{_edge_name(i, t)} has {name} {value!r} (needs a finite "
                                                    f"number >= 0)"))
    for sid in dict.fromkeys(ids):
        leaving = [t for t in fsm.transitions if t.source == sid]
        if leaving and all(t.probability * t.weight <= 0 for t in leaving):
            out.append(Violation("probability", f"every out-edge of state {sid!r} has probability x weight 0: "
                                                f"the walk cannot choose one"))
    return out
