"""Deterministic code check of a trajectory: every provenance reference is legal and every value is honest."""
from __future__ import annotations

import json
import re
from typing import Any

from sap.model import ArgProvenance, Selector, Tag, ToolSpec, Trajectory
from sap.provenance.goals import mark_problems
from sap.provenance.phrasebook import conveyed
from sap.provenance.jsonpath import PathError, resolve
from sap.provenance.leaks import data_values, find_leaks, names_of
from sap.provenance.selectors import output_selector, selector_words, stated_selector
from sap.text import describe_value

# an explicit yes in a message of its own: "yes", "yes, please go ahead.", "yes, I confirm." (no further request)
CONFIRMATION = re.compile(r"(yes|yeah|yep|correct|confirmed|i confirm)\b[a-z ,'!.]{0,40}", re.I)
CONFIRM_QUESTIONS = ("Shall I go ahead?", "Do you want me to go ahead?", "Should I proceed?",
                     "Is that right, and shall I go ahead?", "Can I go ahead with that?")  # how the assistant's recap of
# a write to confirm ends


def normalize_text(text: str) -> str:
    """Lower-case with whitespace collapsed, for verbatim-mention checks."""
    return re.sub(r"\s+", " ", text).strip().lower()


def mention_texts(value: Any) -> list[str]:
    """The texts a message must hold for `mentions(message, value)`: each scalar of a list or object, as written
    (whitespace collapsed)."""
    if isinstance(value, list):
        return [t for v in value for t in mention_texts(v)]
    if isinstance(value, dict) and value:
        return [t for v in value.values() for t in mention_texts(v)]
    return [re.sub(r"\s+", " ", describe_value(value).strip('"')).strip()]


def mentions(message: str, value: Any) -> bool:
    """Whether `value` appears verbatim (case- and whitespace-insensitive) in `message`, a value that begins or
    ends with a letter as a word of its own there ("AMS" is not in "Amsterdam", "report" not in "reports")."""
    said = normalize_text(message)
    return all(_within(normalize_text(text), said) for text in mention_texts(value))


def _within(text: str, said: str) -> bool:
    """Whether `text` stands in `said`, not glued to letters at an edge where it has a letter itself."""
    if text not in said:
        return False
    if not (text[:1].isalpha() or text[-1:].isalpha()):
        return True
    left = r"(?<![^\W\d_])" if text[:1].isalpha() else ""
    right = r"(?![^\W\d_])" if text[-1:].isalpha() else ""
    return re.search(left + re.escape(text) + right, said) is not None


def states_value(message: str, tool: str, param: str, value: Any) -> bool:
    """Whether `message` states a call's value: verbatim, or (a yes/no or choice) through a phrase-book wording
    that conveys it ("unlock the doors" for unlock = true)."""
    return mentions(message, value) or conveyed(message, tool, param, value)


def states_selector(message: str, sel: Selector, value: Any) -> bool:
    """Whether `message` conveys the selector: the value itself, or (unless the selector names the value) one
    word of each of the selector's groups."""
    if mentions(message, value):
        return True
    groups = selector_words(sel)
    if sel.named or not groups:
        return False
    return all(any(mentions(message, w) for w in g) for g in groups)


def _check_selector(recorded: Selector | None, expected: Selector | None, message: str, value: Any) -> str | None:
    """A reference to one value among several must carry the selector that singles it out, stated in the message."""
    if expected is None:
        return None if recorded is None else f"selector {_said(recorded)} where nothing competes with the value"
    if recorded is None:
        return f"ambiguous reference: {value!r} is one among several and nothing says which ({_said(expected)})"
    if recorded != expected:
        return f"selector {_said(recorded)} does not single out {value!r} ({_said(expected)} does)"
    if not states_selector(message, recorded, value):
        return f"unresolvable reference: the user message states neither {_said(recorded)} nor {value!r}"
    return None


def _said(sel: Selector) -> str:
    """A selector as a problem text shows it."""
    return json.dumps(sel.model_dump(mode="json", exclude_defaults=True), sort_keys=True)


def is_confirmation(text: str) -> bool:
    """Whether a user message is an explicit yes and nothing else."""
    return CONFIRMATION.fullmatch(text.strip()) is not None and not re.search(r"\d|\?", text)


def answers_recap(traj: Trajectory, turn: int) -> bool:
    """Whether turn `turn`'s user message is an explicit yes to a recap the assistant ended the turn before with."""
    return 0 < turn < len(traj.turns) and is_confirmation(traj.turns[turn].user_message) and \
        asks_confirmation(traj.turns[turn - 1].assistant_message)


def asks_confirmation(text: str) -> bool:
    """Whether an assistant message ends with the question of a recap of a write to confirm."""
    return text.rstrip().endswith(CONFIRM_QUESTIONS)


def request_start(traj: Trajectory, turn: int) -> int:
    """The first turn of the request that turn `turn` serves: a call-less exchange right before it (the assistant
    asked for a withheld value, or said it lacked a tool) belongs to the same request, and so does the turn whose
    recap the user confirms."""
    start = turn
    while start > 0 and (not traj.turns[start - 1].calls or answers_recap(traj, start)):
        start -= 1
    return start


def request_text(traj: Trajectory, turn: int) -> str:
    """The user messages of the request turn `turn` serves, joined."""
    return " ".join(t.user_message for t in traj.turns[request_start(traj, turn):turn + 1])


def stating_text(traj: Trajectory, turn: int) -> str:
    """The text that must state turn `turn`'s new and config values: its user message, or for a yes to a recap,
    the request it confirms."""
    return request_text(traj, turn) if answers_recap(traj, turn) else traj.turns[turn].user_message


def statements(traj: Trajectory) -> list[tuple[int, str, Any]]:
    """Every (turn, param, value) the user states verbatim: new and config values in their turn, restated values
    at their anchor turn, and the virtual history."""
    out = []
    for turn, _, call in traj.calls():
        for name, prov in call.args_prov.items():
            tag = prov.effective_tag()
            if tag in (Tag.self_create, Tag.initial_state):
                out.append((turn, name, call.arg_value(name)))
            elif tag == Tag.prev_user_msg and prov.turn is not None:
                out.append((prov.turn, name, call.arg_value(name)))
    return out + [(v["turn"], v["param"], v["value"]) for v in traj.virtual_history
                  if isinstance(v.get("turn"), int) and "param" in v]


def _output_competitors(traj: Trajectory, turn: int, index: int, prov: ArgProvenance, value: Any) -> tuple[list[Any], bool]:
    """Results of the same tool as the source, before the using call: the earlier ones, and whether a newer one
    holds another value at the path or none (then no selector can name the source)."""
    src = traj.turns[prov.turn].calls[prov.call]
    earlier, newer = [], False
    for t, i, c in traj.calls():
        if (t, i) >= (turn, index) or c.name != src.name or (t, i) == (prov.turn, prov.call) or not c.ok:
            continue
        if (t, i) < (prov.turn, prov.call):
            earlier.append(c.result)
            continue
        try:
            newer |= resolve(c.result, prov.path or "") != value
        except PathError:  # a newer result without that place competes too
            newer = True
    return earlier, newer


def _check_output_ref(traj: Trajectory, turn: int, index: int, prov: ArgProvenance, value: Any) -> str | None:
    """A prev_output reference must point at an earlier successful call whose result holds the value."""
    if prov.turn is None or prov.call is None or prov.path is None:
        return "prev_output without turn, call and path"
    if prov.turn < 0 or prov.call < 0:
        return f"prev_output points at negative turn {prov.turn} call {prov.call}"
    if (prov.turn, prov.call) >= (turn, index):
        return f"prev_output points at turn {prov.turn} call {prov.call}, not earlier"
    if prov.turn >= len(traj.turns) or prov.call >= len(traj.turns[prov.turn].calls):
        return f"prev_output points at missing turn {prov.turn} call {prov.call}"
    src = traj.turns[prov.turn].calls[prov.call]
    try:
        found = resolve(src.result, prov.path)
    except PathError as exc:
        return str(exc)
    if found != value and [found] != value:
        return f"prev_output value {value!r} differs from {found!r} at {prov.path}"
    earlier, newer = _output_competitors(traj, turn, index, prov, value)
    if newer:
        return f"unresolvable reference: a newer {src.name} result holds another value at {prov.path}"
    later = [c.result for t, i, c in traj.calls() if (prov.turn, prov.call) < (t, i) < (turn, index) and c.ok]
    expected = output_selector(src.result, prov.path, found, prov.turn >= request_start(traj, turn), earlier, later)
    return _check_selector(prov.selector, expected, request_text(traj, turn), value)


def code_check(traj: Trajectory, specs: dict[str, ToolSpec] | None = None, leaks: bool = True) -> list[str]:
    """Violations found in `traj` (an empty list means it passes); `policy.policy_check` adds a toolset's rules.
    `specs` (the toolset's tools) widens the leak check to every tool and parameter of the toolset; the synthesis
    graphs pass `leaks=False` and leave leaks to the judge, whose text rejection rewrites the messages."""
    problems: list[str] = []
    said = statements(traj)
    for turn_no, index, call in traj.calls():
        where = f"turn {turn_no} call {index} ({call.name})"
        problems += [f"{where}: {p}" for p in call.coverage_problems()]
        if not call.ok:
            problems.append(f"{where}: committed call failed: {call.error}")
        message = stating_text(traj, turn_no)
        for name, prov in call.args_prov.items():
            value = call.arg_value(name)
            problem = None
            tag = prov.effective_tag()
            if prov.tag == Tag.fallback and prov.fallback_from is None:
                problem = "fallback without fallback_from"
            elif prov.tag == Tag.fallback and tag not in (Tag.initial_state, Tag.self_create):
                problem = f"fallback from a {tag.value} source: P_f recovers only from c0 or a new value"
            if problem is None and tag == Tag.prev_output:
                problem = _check_output_ref(traj, turn_no, index, prov, value)
            elif problem is None and tag == Tag.initial_state:
                try:
                    if (found := resolve(traj.c0, prov.path or "")) != value and [found] != value:
                        problem = f"initial_state value {value!r} differs from c0 at {prov.path}"
                except PathError as exc:
                    problem = str(exc)
                if problem is None and not states_value(message, call.name, name, value):
                    problem = f"config value {value!r} not stated in the user message"
            elif problem is None and tag == Tag.prev_user_msg:
                if prov.turn is None or not 0 <= prov.turn < turn_no:
                    problem = f"prev_user_msg anchor {prov.turn} is not an earlier turn"
                elif not any(states_value(traj.turns[prov.turn].user_message, tool, name, value)
                             for tool in {call.name} | {c.name for c in traj.turns[prov.turn].calls}):
                    problem = f"value {value!r} does not appear in the user message of anchor turn {prov.turn}"
                else:
                    start = request_start(traj, turn_no)
                    problem = _check_selector(prov.selector, stated_selector(name, value, [s for s in said if s[0] < start]),
                                              request_text(traj, turn_no), value)
            elif problem is None and tag == Tag.self_create and not states_value(message, call.name, name, value):
                problem = f"new value {value!r} not stated in the user message"
            if problem:
                problems.append(f"{where} arg {name}: {problem}")
    problems += [p for turn in traj.turns for p in mark_problems(turn, answers_recap(traj, turn.index + 1))]
    return problems + closure_check(traj) + (leak_check(traj, specs) if leaks else [])


def leak_check(traj: Trajectory, specs: dict[str, ToolSpec] | None = None) -> list[str]:
    """Internals in the user and assistant messages (sap.provenance.leaks): tool and raw parameter names of the
    toolset (of the record's own calls without `specs`), JSON paths, provenance tags, call positions."""
    if specs is not None:
        tools, params = names_of(specs)
    else:
        tools = {c.name for _, _, c in traj.calls()}
        params = {p for _, _, c in traj.calls() for p in c.args_exec}
    problems = []
    values = data_values(*[(c.args_exec, c.result) for _, _, c in traj.calls()])
    for turn in traj.turns:
        for role, text in (("user", turn.user_message), ("assistant", turn.assistant_message)):
            problems += [f"turn {turn.index} {role} message leaks {leak} in {_excerpt(text)!r}"
                         for leak in find_leaks(text, tools, params, values)]
    return problems


def _excerpt(text: str, limit: int = 80) -> str:
    """The start of a message, as a problem text quotes it."""
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " ..."


def closure_check(traj: Trajectory) -> list[str]:
    """Every virtual-history value must appear verbatim in the user message of its anchor turn."""
    problems = []
    for v in traj.virtual_history:
        turn = v.get("turn")
        if not isinstance(turn, int) or not 0 <= turn < len(traj.turns):
            problems.append(f"virtual history: {v.get('param')} anchored at missing turn {turn}")
        elif not mentions(traj.turns[turn].user_message, v.get("value")):
            problems.append(f"virtual history: {v.get('param')}={v.get('value')!r} not stated in user message {turn}")
    return problems
