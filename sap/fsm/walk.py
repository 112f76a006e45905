"""Weighted random walk over an FSM: a path of transitions from the initial state to a final state."""
from __future__ import annotations

import random

from sap.errors import SapError
from sap.fsm.conditions import allowed
from sap.model import FSM, Tag


class NoPathError(SapError, RuntimeError):
    """The FSM has no path of the requested length to a final state."""


def feasible(fsm: FSM, edge: int, seen_tools: set[str]) -> bool:
    """Whether every prev_output argument on `edge` has a producing tool earlier on the path or in the same turn;
    an edge that calls nothing (the request before a confirmed write) is feasible when an edge out of its target is.

    prev_user_msg arguments need no check: any earlier turn can anchor them (virtual history)."""
    seen = set(seen_tools)
    t = fsm.transitions[edge]
    if not t.action:
        return any(feasible(fsm, e, seen) for e in fsm.out_edges(t.target) if fsm.transitions[e].action)
    for tool in t.action:
        for arg, tag in t.provenance_tag.get(tool, {}).items():
            makers = fsm.producers.get(tool, {}).get(arg)
            if tag == Tag.prev_output and makers is not None and not seen.intersection(makers):
                return False
        seen.add(tool)
    return True


def committed_tools(fsm: FSM) -> dict[str, frozenset[str]]:
    """Per state, the tools every one of its out-edges calls (a confirmation state's write): a turn into the state
    commits the dialogue to them."""
    out: dict[str, frozenset[str]] = {}
    for t in fsm.transitions:
        out[t.source] = out[t.source] & set(t.action) if t.source in out else frozenset(t.action)
    return out


def sample_path(fsm: FSM, rng: random.Random, min_turns: int, max_turns: int, tries: int = 50, *,
                start: str | None = None, seen: set[str] = frozenset(), blacklist: set[str] = frozenset(),
                emphasis: set[str] = frozenset(), previous: list[str] | None = None) -> list[int]:
    """Transition indices of a walk of min..max turns ending in a final state, edges drawn by probability x weight.

    An edge whose condition (`sap.fsm.conditions`) does not hold after the tools called so far is never taken.
    Edges whose prev_output arguments have no producer earlier on the path are skipped while others exist.
    With `emphasis` (long-tail set E), edges calling a tool in E (or leading to a state committed to one, such as
    the request before a confirmed write) weigh 5x before one is taken and 2x after, and a walk is only accepted
    once it calls one; if no walk within `tries` does, the first complete walk is returned.
    `start`, `seen`, `previous` (the action of the turn before `start`) and `blacklist` let a path be
    re-planned mid-dialogue around tools that kept failing.
    """
    finals = set(fsm.finals)
    committed = committed_tools(fsm)
    fallback: list[int] | None = None
    for _ in range(tries):
        target = rng.randint(min_turns, max_turns)
        state, path, tools, hit = start or fsm.initial, [], set(seen), not emphasis
        while len(path) < target + 3:
            out = [e for e in fsm.out_edges(state) if not blacklist.intersection(fsm.transitions[e].action)
                   and allowed(fsm, e, tools)]
            if not out:
                break
            out = [e for e in out if feasible(fsm, e, tools)] or out
            last = fsm.transitions[path[-1]].action if path else previous
            if last:  # the same request twice in a row is a stuck dialogue, not a new turn
                out = [e for e in out if fsm.transitions[e].action != last] or out
            weights = [fsm.transitions[i].probability * fsm.transitions[i].weight
                       * ((2.0 if hit else 5.0) if emphasis.intersection(fsm.transitions[i].action)
                          or emphasis & committed.get(fsm.transitions[i].target, frozenset()) else 1.0)
                       for i in out]
            edge = rng.choices(out, weights=weights)[0]
            path.append(edge)
            tools.update(fsm.transitions[edge].action)
            hit = hit or bool(emphasis.intersection(fsm.transitions[edge].action))
            state = fsm.transitions[edge].target
            dead_end = not fsm.out_edges(state)
            if state in finals and (len(path) >= target or (dead_end and len(path) >= min_turns)):
                if hit:
                    return path
                fallback = fallback or path
                break
    if fallback is not None:
        return fallback
    raise NoPathError(f"no walk of {min_turns}-{max_turns} turns from {start or fsm.initial!r} reached a final state "
                      f"{sorted(finals)} in {tries} tries (blacklist: {sorted(blacklist)})")


def emphasis_set(fsm: FSM, histogram: dict[str, int], rng: random.Random, size: int = 2) -> set[str]:
    """Long-tail emphasis E: `size` reachable tools drawn by inverse call frequency, tools on critical edges 2x."""
    critical = {t for e in fsm.transitions if e.is_critical for t in e.action}
    tools = sorted({t for e in fsm.transitions for t in e.action})
    chosen: set[str] = set()
    while tools and len(chosen) < size:
        weights = [(2.0 if t in critical else 1.0) / (1 + histogram.get(t, 0)) for t in tools]
        pick = rng.choices(tools, weights=weights)[0]
        chosen.add(pick)
        tools.remove(pick)
    return chosen
