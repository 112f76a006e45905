"""A walked path's per-turn actions under a toolset policy: required calls inserted first, nothing after a
terminal call."""
from __future__ import annotations

import random

from sap.provenance.policy import Policy


Turns = list[tuple[int, list[str]]]  # (position in the walked path, the turn's tools)


def _cut_terminal(policy: Policy, actions: list[list[str]], min_turns: int) -> Turns:
    """A terminal call ends the dialogue: the turns after it go when enough turns remain, else the terminal call
    itself goes (and its turn, if it held nothing else); the calls after it in its turn go."""
    if policy.terminal is None:
        return list(enumerate(actions))
    out: Turns = []
    for n, action in enumerate(actions):
        hit = next((i for i, tool in enumerate(action) if tool in policy.terminal.tools), None)
        if hit is None:
            out.append((n, action))
            continue
        if len(out) + 1 >= min_turns or n + 1 == len(actions):
            return out + [(n, action[:hit + 1])]
        kept = [tool for tool in action if tool not in policy.terminal.tools]
        if kept:
            out.append((n, kept))
    return out


def _insert_required(policy: Policy, turns: Turns, rng: random.Random) -> Turns:
    """Before each call a must-precede rule guards, one of its required tools when none was called yet; a
    required tool of a `once` rule already called is left out (and a turn left with no tools)."""
    seen: set[str] = set()
    out = []
    for n, action in turns:
        turn: list[str] = []
        for tool in action:
            if any(r.once and tool in r.first and seen.intersection(r.first) for r in policy.must_precede):
                continue
            for rule in policy.must_precede:
                if tool in rule.before and not seen.intersection(rule.first):
                    first = rng.choice(rule.first)
                    turn.append(first)
                    seen.add(first)
            turn.append(tool)
            seen.add(tool)
        if turn:
            out.append((n, turn))
    return out


def policy_actions(policy: Policy, actions: list[list[str]], rng: random.Random, min_turns: int) -> Turns:
    """The walked turns' tools under `policy`, each with its position in the walk: a turn left with no tools is
    dropped, and the turns after a terminal call. A rule FSM's request before a confirmed write (a turn with no
    call into an ACTION_REQUIRED state) is such a turn: `graphs.confirm.confirm_writes` writes it back as the recap
    that ends the turn before the write."""
    return _insert_required(policy, _cut_terminal(policy, actions, min_turns), rng)
