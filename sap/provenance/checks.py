"""Deterministic code check of a trajectory: every provenance reference is legal and every value is honest."""
from __future__ import annotations

import re
from typing import Any

from sap.agents.messenger import describe_value
from sap.model import ArgProvenance, Tag, Trajectory
from sap.provenance.jsonpath import PathError, resolve


def normalize_text(text: str) -> str:
    """Lower-case with whitespace collapsed, for verbatim-mention checks."""
    return re.sub(r"\s+", " ", text).strip().lower()


def mentions(message: str, value: Any) -> bool:
    """Whether `value` appears verbatim (case- and whitespace-insensitive) in `message`."""
    if isinstance(value, list):
        return all(mentions(message, v) for v in value)
    if isinstance(value, dict) and value:
        return all(mentions(message, v) for v in value.values())
    return normalize_text(describe_value(value).strip('"')) in normalize_text(message)


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
    return None


def code_check(traj: Trajectory) -> list[str]:
    """Violations found in `traj` (an empty list means it passes)."""
    problems: list[str] = []
    for turn_no, index, call in traj.calls():
        where = f"turn {turn_no} call {index} ({call.name})"
        if set(call.args_prov) != set(call.args_exec):
            problems.append(f"{where}: arguments without provenance: {sorted(set(call.args_exec) ^ set(call.args_prov))}")
        if not call.ok:
            problems.append(f"{where}: committed call failed: {call.error}")
        message = traj.turns[turn_no].user_message
        for name, prov in call.args_prov.items():
            value = call.args_exec.get(name)
            problem = None
            tag = prov.effective_tag()
            if prov.tag == Tag.fallback and prov.fallback_from is None:
                problem = "fallback without fallback_from"
            if problem is None and tag == Tag.prev_output:
                problem = _check_output_ref(traj, turn_no, index, prov, value)
            elif problem is None and tag == Tag.initial_state:
                try:
                    if (found := resolve(traj.c0, prov.path or "")) != value and [found] != value:
                        problem = f"initial_state value {value!r} differs from c0 at {prov.path}"
                except PathError as exc:
                    problem = str(exc)
                if problem is None and not mentions(message, value):
                    problem = f"config value {value!r} not stated in the user message"
            elif problem is None and tag == Tag.prev_user_msg:
                if prov.turn is None or not 0 <= prov.turn < turn_no:
                    problem = f"prev_user_msg anchor {prov.turn} is not an earlier turn"
                elif not mentions(traj.turns[prov.turn].user_message, value):
                    problem = f"value {value!r} does not appear in the user message of anchor turn {prov.turn}"
            elif problem is None and tag == Tag.self_create and not mentions(message, value):
                problem = f"new value {value!r} not stated in the user message"
            if problem:
                problems.append(f"{where} arg {name}: {problem}")
    return problems + closure_check(traj)


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
