"""The MissParam variant check: only required parameters are withheld, each withheld value is one the dialogue has
not shown before its turn (user and assistant text, tool results, the initial configuration) and is absent from the
withheld turn, the withheld turn does not announce the gap, and the follow-up gives every value."""
from __future__ import annotations

import re
from typing import Any

from sap.model import Tag, ToolSpec, Trajectory
from sap.provenance.checks import asks_confirmation, mentions
from sap.provenance.generate import is_search_param
from sap.text import describe_value

# a user message that promises the missing value instead of leaving it out ("the username I'll tell you in a moment")
ANNOUNCEMENT = re.compile(
    r"\b(?:I'?ll|I will|I'm going to|let me)\s+(?:\w+\s+)?(?:tell|give|send|let you know|get back|provide|share)\b"
    r"|\bin a (?:moment|minute|second|bit|sec)\b|\b(?:still|yet) (?:need|have) to (?:give|tell|send)\b"
    r"|\bI'?ll let you know\b|\b(?:later|shortly|afterwards)\b.{0,20}\b(?:tell|give|say)\b", re.I)


def announces(text: str) -> bool:
    """Whether a user message announces a value it leaves out."""
    return ANNOUNCEMENT.search(text) is not None


def holds(data: Any, value: Any) -> bool:
    """Whether JSON data shows `value`: a leaf (or an object key) equal to it, a string leaf stating a string value,
    or for a list value any of its elements."""
    if isinstance(value, list):
        return any(holds(data, v) for v in value)
    if isinstance(data, dict):
        return any(holds(k, value) or holds(v, value) for k, v in data.items())
    if isinstance(data, list):
        return any(holds(v, value) for v in data)
    if data == value and type(data) is type(value):
        return True
    return isinstance(data, str) and isinstance(value, str) and bool(value.strip()) and mentions(data, value)


def shown_before(traj: Trajectory, k: int, value: Any, param: str = "") -> str | None:
    """Where the dialogue shows `value` before turn k (None if nowhere): a user or assistant message, a tool result,
    or the initial configuration the assistant can read, except for a search's words (`param` a search parameter):
    a word c0's names hold is still the user's own choice of what to look for."""
    for turn in traj.turns[:k]:
        if mentions(turn.user_message, value):
            return f"user message {turn.index}"
        if mentions(turn.assistant_message, value):
            return f"assistant message {turn.index}"
        for i, call in enumerate(turn.calls):
            if holds(call.result, value):
                return f"the result of turn {turn.index} call {i}"
    return "the initial configuration" if not is_search_param(param) and holds(traj.c0, value) else None


def withheld_turn(traj: Trajectory) -> int | None:
    """The turn a MissParam variant asks at: the recorded rewrite turn, else its first turn without calls that is
    not the recap of a write to confirm (an exported record keeps no rewrite turn)."""
    recorded = (traj.checks.get("rewrite") or {}).get("turn")
    if isinstance(recorded, int):
        return recorded
    return next((t.index for t in traj.turns if not t.calls and not asks_confirmation(t.assistant_message)), None)


def withheld_arguments(traj: Trajectory, k: int) -> list[tuple[str, str, Any]]:
    """(tool, parameter, value) of every value the user gives in the follow-up turn k + 1: its new (self_create)
    arguments, the values turn k left out."""
    if k + 1 >= len(traj.turns):
        return []
    return [(c.name, n, c.arg_value(n)) for c in traj.turns[k + 1].calls for n, p in c.args_prov.items()
            if p.effective_tag() == Tag.self_create]


def miss_param_problems(traj: Trajectory, specs: dict[str, ToolSpec]) -> list[str]:
    """What makes a MissParam variant dishonest, each naming the turn, parameter and value; [] for other kinds."""
    if traj.rewrite_kind != "miss_param":
        return []
    k = withheld_turn(traj)
    if k is None or k + 1 >= len(traj.turns):
        return ["miss_param: no turn without calls followed by the turn that runs them"]
    ask, reveal = traj.turns[k], traj.turns[k + 1]
    problems = [f"miss_param: user message {k} announces the value it leaves out: {ask.user_message!r}"] \
        if announces(ask.user_message) else []
    arguments = withheld_arguments(traj, k)
    if not arguments:
        problems.append(f"miss_param: user message {k + 1} gives no value that turn {k} left out")
    for tool, param, value in arguments:
        said = describe_value(value)
        spec = specs.get(tool)
        if spec is None or param not in spec.required:
            problems.append(f"miss_param: withheld parameter {param} of {tool} ({said}) is optional")
        if mentions(ask.user_message, value):
            problems.append(f"miss_param: withheld {param} {said} is stated in user message {k}")
        if where := shown_before(traj, k, value, param):
            problems.append(f"miss_param: withheld {param} {said} is shown before turn {k}, in {where}")
        if not mentions(reveal.user_message, value):
            problems.append(f"miss_param: withheld {param} {said} is not given in user message {k + 1}")
    return problems
