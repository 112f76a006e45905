"""Goal-level turns: which calls of a turn are prerequisites the assistant works out itself (lookups that find an
id, authentication, state preparation) and which the user asks for; the one rule the synthesis graph, both
messengers, the code check, the judge and the bench go by."""
from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence

from sap.model import FSM, StateType, Tag, ToolCall, Turn

_BEFORE_AUTH = (StateType.INITIAL, StateType.AUTH_REQUIRED)
USER_STYLES = ("goal", "explicit")  # goal: the user states goals; explicit: the user asks for every call
# writes with consequences of their own (a booking, a payment, a post, a deletion): the user asks for them even
# where another call needs them first; only preparation (press the brake, lock the doors, log in) goes unsaid
CONSEQUENTIAL = re.compile(r"^(?:book|register|create|add|post|send|place|purchase|buy|transfer|pay|fund|withdraw|"
                           r"cancel|delete|remove|rm|return|exchange|comment|retweet|follow|unfollow|mention|submit|"
                           r"close|resolve|modify|update)(?:_|[A-Z]|$)")


def prerequisites(calls: Sequence[ToolCall], turn: int, requires: Mapping[str, Collection[str]],
                  writes: Collection[str]) -> list[int]:
    """Indexes of the calls of turn `turn` the assistant works out itself: each call before the turn's last (its
    goal) that serves a later call of the turn, either a read (a tool not in `writes`) whose result gives a later
    call a value it found (not one of the read's own arguments echoed back), or a call of a tool the later call
    requires first (`requires`: tool -> tools that must run before it) that only prepares for it (a
    `CONSEQUENTIAL` write such as a booking is asked for by the user even where it is needed first). A call given
    another value of a parameter a later call takes (a one-stop search to LAS before a direct search to SEA) is a
    request of its own: nothing in the later request would lead the assistant to it."""
    out = []
    for i, call in enumerate(calls[:-1]):
        later = calls[i + 1:]
        if _asks_otherwise(call, later):
            continue
        feeds = call.name not in writes and any(
            p.effective_tag() == Tag.prev_output and (p.turn, p.call) == (turn, i)
            and c.arg_value(name) not in call.args_exec.values()
            for c in later for name, p in c.args_prov.items())
        needed = any(call.name in requires.get(c.name, ()) for c in later) and not CONSEQUENTIAL.match(call.name)
        if feeds or needed:
            out.append(i)
    return out


def _asks_otherwise(call: ToolCall, later: Sequence[ToolCall]) -> bool:
    """Whether `call` takes, under a parameter name a later call of the turn also takes, a value none of those
    later calls is given there."""
    shared = [name for name in call.args_exec if any(name in c.args_exec for c in later)]
    return any(all(c.args_exec[name] != call.args_exec[name] for c in later if name in c.args_exec) for name in shared)


def requested(turn: Turn) -> list[int]:
    """Indexes of the calls of a turn the user asks for (every call but its prerequisites)."""
    return [i for i in range(len(turn.calls)) if i not in turn.prerequisites]


def mark_problems(turn: Turn, confirmed_next: bool = False) -> list[str]:
    """What is wrong with a turn's prerequisite marks: one outside its calls, or on its last call (the goal,
    which the user always asks for), unless the goal runs in the next turn after the user confirms a recap
    (`confirmed_next`: every call of this turn may then be a prerequisite of it)."""
    last = len(turn.calls) if confirmed_next else len(turn.calls) - 1
    return [f"turn {turn.index}: call {i} is marked a prerequisite but "
            + ("the turn has no such call" if not 0 <= i < len(turn.calls) else "it is the turn's goal (its last call)")
            for i in turn.prerequisites if not 0 <= i < last]


def prerequisite_map(fsm: FSM, first: Mapping[str, Collection[str]] = {}) -> dict[str, list[str]]:
    """tool -> the tools that must run before it: the FSM's learned preconditions (`FSM.requires`), the
    authentication tools (actions of transitions into an AUTH_COMPLETED state) for each tool no transition before
    authentication calls, and `first` (a policy's must-precede rules: tool -> tools one of which runs first)."""
    kinds = {s.id: s.type for s in fsm.states}
    auth = {tool for t in fsm.transitions if kinds.get(t.target) == StateType.AUTH_COMPLETED for tool in t.action}
    before = {tool for t in fsm.transitions if kinds.get(t.source) in _BEFORE_AUTH for tool in t.action}
    out: dict[str, list[str]] = {}
    for tool in sorted({tool for t in fsm.transitions for tool in t.action}):
        needed = [*fsm.requires.get(tool, ()), *first.get(tool, ()), *(auth if tool not in before | auth else ())]
        if needed:
            out[tool] = sorted(set(needed))
    return out
