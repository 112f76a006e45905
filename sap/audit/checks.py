"""The audit's checks: each finds the flawed items of one dialogue and says how many items it looked at.

| check                | item                          | flawed when                                                          |
|----------------------|-------------------------------|----------------------------------------------------------------------|
| ambiguous_reference  | prev_output argument          | its value sits in one element of an array of 2+ elements that hold a |
|                      |                               | value at its place, or in one of 2+ differing earlier results of the |
|                      |                               | same tool, and the user text up to the call names neither the value, |
|                      |                               | nor a field of that element no sibling (or other result) shares, nor |
|                      |                               | an ordinal / recency word                                            |
| noop_write           | write call                    | replayed: it changed no state; not replayed: every non-id argument   |
|                      |                               | equals the same-named field of an earlier result                     |
| repeated_call        | call                          | same name and arguments as an earlier call, no state change between  |
| error_result         | call                          | its result is error-shaped or a declared soft failure                |
| placeholder_value    | user-stated string argument   | snake_case words ("archive_report") for a parameter that is not a    |
|                      |                               | file, directory, path or key name, and not a value its doc offers    |
|                      |                               | (its enum, or named in its description: "read_write")                |
| internals_leak       | user message                  | it names a tool or raw parameter, a JSON path, a provenance tag or a |
|                      |                               | call position (the rules of sap.provenance.leaks, which the code     |
|                      |                               | check applies to sap's own records)                                  |
| dictated_call        | call                          | the user message of its turn holds the first 5+ words of the tool's  |
|                      |                               | own description                                                      |
| policy_violation     | sap record of a toolset with  | it breaks a rule of the toolset's policy (sap.provenance.policy)     |
|                      | a declared policy             |                                                                      |

A prev_output argument of a record without declared provenance is one whose value appears in an earlier result
but in no user message up to its turn; a user-stated one appears in a user message up to its turn.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sap.audit.dialogues import AuditCall, AuditDialogue
from sap.executors.bfcl import BFCL_FAILURE_SHAPES
from sap.executors.failures import failure_text
from sap.executors.tau2_env import TAU2_FAILURE_SHAPES
from sap.jsonutil import leaves
from sap.provenance.leaks import data_values, find_leaks

KNOWN_SHAPES = BFCL_FAILURE_SHAPES + TAU2_FAILURE_SHAPES
ORDINALS = re.compile(r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th)|"
                      r"last|latest|earliest|newest|oldest|most recent|"
                      r"previous|top|bottom|only)\b", re.I)
PLACEHOLDER = re.compile(r"[a-z]+(?:_[a-z]+)+")
NAME_PARAMS = re.compile(r"file|dir|folder|path|key|source|destination", re.I)
WRITE_VERB = re.compile(r"^(?i:set|update|modify|add|remove|delete|create|cancel|book|register|send|post|exchange|"
                        r"return|transfer|place|fund|withdraw|mv|cp|rm|rmdir|mkdir|touch|echo|lock|unlock|start|"
                        r"fill|press|release|activate|follow|unfollow|comment|retweet|mention|close|resolve|edit|"
                        r"purchase|pay|change|move|rename|write|upload|login|logout|authenticate|commit|checkout|"
                        r"reset|push|merge|revert|restore|save|append|insert|clear|stage|unstage|apply)(?:_|$|[A-Z])")


@dataclass(frozen=True)
class Finding:
    """One flawed item: what it is and why."""

    where: str
    detail: str


# short English words: a value spelled like one is said only when quoted
_SHORT_WORDS = frozenset("a i an as at be by do go he if in is it me my no of on or so to up us we".split())
CheckResult = tuple[int, list[Finding]]  # (items looked at, flawed ones)


def said(value: Any, text: str) -> bool:
    """Whether a scalar value appears in case-folded text; a value of one or two characters ("a", "7") only as a
    token of its own that is not a common English word unless quoted ("a" in `the file "a"`, not in "a file")."""
    shown = str(value).strip().casefold()
    if len(shown) > 2:
        return shown in text
    if not shown or re.search(f"[\"'`]{re.escape(shown)}[\"'`]", text):
        return bool(shown)
    token = re.search(r"(?<![\w.])" + re.escape(shown) + r"(?![\w])", text)
    return token is not None and shown not in _SHORT_WORDS


def user_text(d: AuditDialogue, turn: int) -> str:
    """The case-folded user text of turns up to `turn`."""
    return "\n".join(t for k, t in sorted(d.users.items()) if k <= turn).casefold()


def _at(value: Any, path: tuple) -> Any:
    """The part of a JSON value at a leaf path."""
    for key in path:
        value = value[key]
    return value


def _leaf(value: Any, path: tuple) -> Any:
    """The part of a JSON value at a leaf path, or None where the value has no such path."""
    try:
        return _at(value, path)
    except (KeyError, IndexError, TypeError):
        return None


def _element_resolved(result: Any, path: tuple, text: str) -> bool | None:
    """For a value at `path` in `result`: None when no array of 2+ elements that hold a value at the same place
    lies on the path (a hotel booking has no departure airport to confuse with a flight's), else whether the text
    names the value's element (a field no sibling shares) or an ordinal."""
    for depth in range(len(path) - 1, -1, -1):
        if isinstance(path[depth], int):
            array = _at(result, path[:depth])
            rest = path[depth + 1:]
            if not any(_leaf(e, rest) is not None for i, e in enumerate(array) if i != path[depth]):
                continue
            element = array[path[depth]]
            siblings = [json.dumps(e, sort_keys=True, default=str) for i, e in enumerate(array) if i != path[depth]]
            own = [v for _, v in leaves(element) if isinstance(v, (str, int, float)) and not isinstance(v, bool)
                   and not any(json.dumps(v) in s for s in siblings)]
            return bool(ORDINALS.search(text)) or any(said(v, text) for v in own)
    return None


def _named_among(result: Any, path: tuple, others: list[Any], text: str) -> bool:
    """Whether the text says a value of the value's object (the variant "at $489.50") that no other result of the
    tool holds: it names which result is meant."""
    element = _leaf(result, path[:-1]) if path else None
    if not isinstance(element, dict):
        return False
    rest = json.dumps(others, sort_keys=True, default=str)
    return any(said(v, text) for _, v in leaves(element) if isinstance(v, (str, int, float))
               and not isinstance(v, bool) and json.dumps(v) not in rest)


def _source_result(d: AuditDialogue, call: AuditCall, param: str) -> tuple[int | None, tuple | None]:
    """(index of the earlier call whose result gave the value, leaf path) of a prev_output argument."""
    value = call.args[param]
    index = d.calls.index(call)
    src = (call.prov or {}).get(param, {}).get("source") or {}
    candidates = range(index - 1, -1, -1)
    if src.get("turn") is not None:
        same_turn = [i for i in range(index) if d.calls[i].turn == src["turn"]]
        candidates = [same_turn[src["call"]]] if src.get("call") is not None and src["call"] < len(same_turn) else same_turn
    for i in candidates:
        for path, leaf in leaves(d.calls[i].result):
            if leaf == value or (isinstance(value, list) and leaf in value):
                return i, path
    return None, None


def _is_prev_output(d: AuditDialogue, call: AuditCall, param: str) -> bool:
    """Declared prev_output, or (without provenance) seen in an earlier result and in no user text so far."""
    if call.prov is not None:
        return (call.prov.get(param) or {}).get("tag") == "prev_output"
    value = call.args[param]
    if isinstance(value, (bool, dict)) or value is None or said(value, user_text(d, call.turn)):
        return False
    return _source_result(d, call, param)[0] is not None and len(str(value)) >= 2


def ambiguous_reference(d: AuditDialogue) -> CheckResult:
    """prev_output arguments taken from one of several elements or results with nothing in the text naming it."""
    looked, found = 0, []
    for n, call in enumerate(d.calls):
        for param, value in call.args.items():
            if not _is_prev_output(d, call, param):
                continue
            looked += 1
            text = user_text(d, call.turn)
            if said(value, text):
                continue
            source, path = _source_result(d, call, param)
            if source is None or path is None:
                continue
            if isinstance(value, list) and path and _leaf(d.calls[source].result, path[:-1]) == value:
                path = path[:-1]  # the whole list is the value ("the items of my order"), not one of its elements
            resolved = _element_resolved(d.calls[source].result, path, text)
            if resolved is None:  # several results of the source's tool: ambiguous only if they disagree here
                kin = [c.result for c in d.calls[:n] if c.name == d.calls[source].name]
                same = {json.dumps(_leaf(r, path), sort_keys=True) for r in kin}
                resolved = len(same) < 2 or bool(ORDINALS.search(text)) or \
                    _named_among(d.calls[source].result, path, [r for r in kin if r is not d.calls[source].result],
                                 text)
            if not resolved:
                found.append(Finding(f"{d.id} turn {call.turn} {call.name}.{param}",
                                     f"{value!r} is one of several in {d.calls[source].name}'s result"))
    return looked, found


def is_write(d: AuditDialogue, name: str) -> bool:
    """Declared not read-only, else a name that opens with a writing verb, or has one right after a namespace
    (`git_add`, an MCP server's tools)."""
    declared = d.read_only.get(name)
    return not declared if declared is not None else bool(WRITE_VERB.match(name) or
                                                          WRITE_VERB.match(name.partition("_")[2]))


def noop_write(d: AuditDialogue) -> CheckResult:
    """Write calls that changed nothing."""
    looked, found = 0, []
    for n, call in enumerate(d.calls):
        if not is_write(d, call.name) or failure_text(call.name, call.result, KNOWN_SHAPES) is not None:
            continue
        looked += 1
        if call.changed is None:
            fields = [(p, v) for p, v in call.args.items() if not p.lower().endswith("id")]
            earlier = [dict((path[-1], v) for path, v in leaves(c.result) if path and isinstance(path[-1], str))
                       for c in d.calls[:n]]
            noop = bool(fields) and all(any(e.get(p) == v for e in earlier) for p, v in fields)
        else:
            noop = not call.changed
        if noop:
            found.append(Finding(f"{d.id} turn {call.turn} {call.name}", "the write changed nothing"))
    return looked, found


def repeated_call(d: AuditDialogue) -> CheckResult:
    """Calls identical to an earlier one with no state change in between."""
    found = []
    for n, call in enumerate(d.calls):
        for m in range(n - 1, -1, -1):
            prev = d.calls[m]
            between = d.calls[m + 1:n]
            changed = any(c.changed if c.changed is not None else is_write(d, c.name) for c in between)
            if prev.name == call.name and prev.args == call.args and not changed:
                found.append(Finding(f"{d.id} turn {call.turn} {call.name}", f"repeats turn {prev.turn}'s call"))
                break
    return len(d.calls), found


def error_result(d: AuditDialogue) -> CheckResult:
    """Calls kept as ground truth whose result is a failure."""
    found = [Finding(f"{d.id} turn {c.turn} {c.name}", str(problem)[:120]) for c in d.calls
             if (problem := failure_text(c.name, c.result, KNOWN_SHAPES)) is not None]
    return len(d.calls), found


def _user_stated(d: AuditDialogue, call: AuditCall, param: str) -> bool:
    """Declared self_create / prev_user_msg, or (without provenance) a value the user text shows."""
    if call.prov is not None:
        return (call.prov.get(param) or {}).get("tag") in ("self_create", "prev_user_msg")
    return said(call.args[param], user_text(d, call.turn))


def _declared(d: AuditDialogue, call: AuditCall, param: str, value: str) -> bool:
    """Whether the tool's doc offers `value` for `param`: in its enum, or named in its description."""
    schema = ((d.tools.get(call.name) or {}).get("parameters") or {}).get("properties", {}).get(param) or {}
    return value in (schema.get("enum") or []) or re.search(rf"\b{re.escape(value)}\b", str(schema.get("description", ""))) is not None


def placeholder_value(d: AuditDialogue) -> CheckResult:
    """User-stated strings that are snake_case word strings for a parameter that is not a file or key name."""
    looked, found = 0, []
    for call in d.calls:
        for param, value in call.args.items():
            if not isinstance(value, str) or not _user_stated(d, call, param):
                continue
            looked += 1
            if PLACEHOLDER.fullmatch(value) and not NAME_PARAMS.search(param) and not _declared(d, call, param, value):
                found.append(Finding(f"{d.id} turn {call.turn} {call.name}.{param}", repr(value)))
    return looked, found


def internals_leak(d: AuditDialogue) -> CheckResult:
    """User messages naming tools or raw parameters, or carrying JSON paths, provenance tags or call positions."""
    tools = set(d.tools) | {c.name for c in d.calls}
    params = {p for doc in d.tools.values() for p in (doc.get("parameters") or {}).get("properties", {})}
    params |= {p for c in d.calls for p in c.args}
    values = data_values(*[(c.args, c.result) for c in d.calls])
    found = [Finding(f"{d.id} turn {turn}", "; ".join(leaks)) for turn, text in sorted(d.users.items())
             if (leaks := find_leaks(text, tools, params, values))]
    return len(d.users), found


def _words(text: str) -> list[str]:
    """Lower-case words of a text."""
    return re.findall(r"[a-z0-9]+", text.casefold())


def dictated_call(d: AuditDialogue) -> CheckResult:
    """Calls whose turn's user message holds the opening of the tool's own description."""
    found = []
    for call in d.calls:
        opening = _words(str((d.tools.get(call.name) or {}).get("description", "")).split(".")[0])[:6]
        if len(opening) >= 5 and " ".join(opening) in " ".join(_words(d.users.get(call.turn, ""))):
            found.append(Finding(f"{d.id} turn {call.turn} {call.name}", " ".join(opening)))
    return len(d.calls), found


def policy_violation(d: AuditDialogue) -> CheckResult:
    """Violations of the declared policy of the record's toolset."""
    if d.policy_problems is None:
        return 0, []
    found = [Finding(d.id, f"{len(d.policy_problems)} violations: " + "; ".join(d.policy_problems[:3]))]
    return 1, found if d.policy_problems else []


CHECKS: dict[str, Callable[[AuditDialogue], CheckResult]] = {
    "ambiguous_reference": ambiguous_reference,
    "noop_write": noop_write,
    "repeated_call": repeated_call,
    "error_result": error_result,
    "placeholder_value": placeholder_value,
    "internals_leak": internals_leak,
    "dictated_call": dictated_call,
    "policy_violation": policy_violation,
}
