"""Error-shaped tool results: what makes a returned value a failed call, wherever it comes from.

Always a failure: a dict with an "error" key, a non-empty list whose every item is error-shaped (BFCL's
`[{"error": ...}]`, `["Error: ..."]`) and a string that opens with "Error:" (tau2's text of a raised tool
error). Beyond these, a toolset declares its soft failures as `FailureShape`s: a result field whose value
marks the call as failed (`{"authentication_status": false}`), optionally only for some tools (a
`login_status: false` is a failed `message_login` but a normal answer of a login-status query).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

ERROR_TEXT = re.compile(r"\s*error\s*:", re.I)
MESSAGE_FIELDS = ("error", "message", "verification_failure", "reason")


@dataclass(frozen=True)
class FailureShape:
    """A soft failure: a result dict whose `field` equals `value` (for the listed `tools`, or for any tool)."""

    field: str
    value: Any = False
    tools: frozenset[str] = field(default_factory=frozenset)

    def matches(self, tool: str, result: Any) -> bool:
        """Whether `result` of a call to `tool` has this shape (True is not 1, False is not 0)."""
        if self.tools and tool not in self.tools:
            return False
        if not isinstance(result, dict) or self.field not in result:
            return False
        got = result[self.field]
        return type(got) is type(self.value) and got == self.value


def shape_from_json(obj: Any) -> FailureShape:
    """A FailureShape from a domain module's declaration: a FailureShape, or {"field", "value"?, "tools"?}."""
    if isinstance(obj, FailureShape):
        return obj
    if not isinstance(obj, dict) or not isinstance(obj.get("field"), str):
        raise ValueError(f"FAILURE_SHAPES entry {obj!r} is not a FailureShape or a dict with a 'field' name")
    return FailureShape(obj["field"], obj.get("value", False), frozenset(obj.get("tools", ())))


def error_text(value: Any) -> str | None:
    """The error an error-shaped value carries ({"error": ...}, "Error: ...", a list of those), or None."""
    if isinstance(value, dict) and "error" in value:
        return str(value["error"])
    if isinstance(value, str) and ERROR_TEXT.match(value):
        return value.strip()
    if isinstance(value, list) and value:
        texts = [error_text(item) for item in value]
        if all(t is not None for t in texts):
            return "; ".join(t for t in texts if t is not None)
    return None


def failure_text(tool: str, value: Any, shapes: Sequence[FailureShape] = ()) -> str | None:
    """Why the result `value` of a call to `tool` is a failed call (error-shaped or a declared soft failure),
    or None when it is a normal answer."""
    text = error_text(value)
    if text is not None:
        return text
    for shape in shapes:
        if shape.matches(tool, value):
            said = next((str(value[k]) for k in MESSAGE_FIELDS if value.get(k)), "")
            return f"{tool}: {shape.field} is {value[shape.field]!r}" + (f" ({said})" if said else "")
    return None
