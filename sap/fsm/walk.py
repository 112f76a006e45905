"""Weighted random walk over an FSM: a path of transitions from the initial state to a final state."""
from __future__ import annotations

import random

from sap.model import FSM, Tag


class NoPathError(RuntimeError):
    """The FSM has no path of the requested length to a final state."""


def feasible(fsm: FSM, edge: int, seen_tools: set[str]) -> bool:
    """Whether every prev_output argument on `edge` has a producing tool earlier on the path or in the same turn.

    prev_user_msg arguments need no check: any earlier turn can anchor them (virtual history)."""
    seen = set(seen_tools)
    t = fsm.transitions[edge]
    for tool in t.action:
        for arg, tag in t.provenance_tag.get(tool, {}).items():
            makers = fsm.producers.get(tool, {}).get(arg)
            if tag == Tag.prev_output and makers is not None and not seen.intersection(makers):
                return False
        seen.add(tool)
    return True


def sample_path(fsm: FSM, rng: random.Random, min_turns: int, max_turns: int, tries: int = 50, *,
                start: str | None = None, seen: set[str] = frozenset(), blacklist: set[str] = frozenset()) -> list[int]:
    """Transition indices of a walk of min..max turns ending in a final state, edges drawn by probability x weight.

    Edges whose prev_output arguments have no producer earlier on the path are skipped while others exist.
    `start`, `seen` and `blacklist` let a path be re-planned mid-dialogue around tools that kept failing.
    """
    finals = set(fsm.finals)
    for _ in range(tries):
        target = rng.randint(min_turns, max_turns)
        state, path, tools = start or fsm.initial, [], set(seen)
        while len(path) < target + 3:
            out = [e for e in fsm.out_edges(state) if not blacklist.intersection(fsm.transitions[e].action)]
            if not out:
                break
            out = [e for e in out if feasible(fsm, e, tools)] or out
            weights = [fsm.transitions[i].probability * fsm.transitions[i].weight for i in out]
            edge = rng.choices(out, weights=weights)[0]
            path.append(edge)
            tools.update(fsm.transitions[edge].action)
            state = fsm.transitions[edge].target
            if len(path) >= target and state in finals:
                return path
    raise NoPathError(f"no walk of {min_turns}-{max_turns} turns from {start or fsm.initial!r} reached a final state "
                      f"{sorted(finals)} in {tries} tries (blacklist: {sorted(blacklist)})")
