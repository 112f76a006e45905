"""Weighted random walk over an FSM: a path of transitions from the initial state to a final state."""
from __future__ import annotations

import random

from sap.model import FSM


class NoPathError(RuntimeError):
    """The FSM has no path of the requested length to a final state."""


def sample_path(fsm: FSM, rng: random.Random, min_turns: int, max_turns: int, tries: int = 50) -> list[int]:
    """Transition indices of a walk of min..max turns ending in a final state, edges drawn by probability x weight."""
    finals = set(fsm.finals)
    for _ in range(tries):
        target = rng.randint(min_turns, max_turns)
        state, path = fsm.initial, []
        while len(path) < target + 3:
            out = fsm.out_edges(state)
            if not out:
                break
            weights = [fsm.transitions[i].probability * fsm.transitions[i].weight for i in out]
            edge = rng.choices(out, weights=weights)[0]
            path.append(edge)
            state = fsm.transitions[edge].target
            if len(path) >= target and state in finals:
                return path
    raise NoPathError(f"no walk of {min_turns}-{max_turns} turns reached a final state {sorted(finals)} in {tries} tries")
