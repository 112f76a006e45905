"""The minimal-instance stand-in model: answers every request with the smallest JSON value its response schema
admits (first enum value, lowest number of a range, fewest array items, required keys only), i.e. what a model
that obeys the schema and nothing else would say."""
from __future__ import annotations

import json
import re
from typing import Any

from sap.llm.schema import TEXT_CLASS
from sap.testing.scripted_llm import request_schema

# what a format-checked string is at its smallest
_FORMATS = {"date": "2000-01-01", "date-time": "2000-01-01T00:00:00Z", "time": "00:00:00Z", "email": "a@b.c",
            "uri": "a:b"}


_RUN = re.escape(TEXT_CLASS) + r"\{0,\d+\}"  # a text run of sap.llm.schema.text_run


def pattern_literals(pattern: str) -> list[str]:
    """The literals of a `^RUN A RUN (B|C) RUN$` pattern (what sap.llm.schema.containing builds, RUN a text_run),
    unescaped, a group as its first alternative; ValueError for any other pattern."""
    ends = re.fullmatch(r"\^(" + _RUN + r")(.*?)(" + _RUN + r")\$", pattern)
    if ends is None:
        raise ValueError(f"minimal_instance: pattern {pattern!r} is not of the form ^RUN literal RUN literal RUN$")
    body, literals, current, i = ends.group(2), [], "", 0
    in_group = skipping = False  # skipping: inside a group, past its first alternative
    while i < len(body):
        ch = body[i]
        gap = re.match(_RUN, body[i:])
        if gap and not in_group:
            literals.append(current)
            current, i = "", i + gap.end()
            continue
        hexed = re.match(r"\[\\x([0-9a-f]{2})\]", body[i:])  # escape_literal's [\xNN]
        if hexed or ch == "\\":  # or a plain backslash escape
            current += "" if skipping else chr(int(hexed.group(1), 16)) if hexed else body[i + 1]
            i += hexed.end() if hexed else 2
            continue
        if ch == "(" and not in_group:
            in_group = True
        elif ch == "|" and in_group:
            skipping = True
        elif ch == ")" and in_group:
            in_group = skipping = False
        elif ch in "^$.|?*+()[]{}":
            raise ValueError(f"minimal_instance: pattern {pattern!r} has the operator {ch!r} outside a literal")
        elif not skipping:
            current += ch
        i += 1
    return [*literals, current]


def minimal_instance(schema: dict[str, Any]) -> Any:
    """The smallest instance of `schema`: its const, its first enum value or anyOf branch; an object with its
    required keys only; an array of minItems items; a number at its minimum (else 0 within the range); a string of
    minLength 'a's, a pattern's literals joined by spaces (then a space and an 'a' per character short of
    minLength), or a format's smallest value; false; null."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        return minimal_instance(schema["anyOf"][0])
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object" or "properties" in schema:
        return {k: minimal_instance(schema.get("properties", {}).get(k, {})) for k in schema.get("required", [])}
    if kind == "array":
        prefix = [minimal_instance(s) for s in schema.get("prefixItems", [])]
        rest = max(schema.get("minItems", 0) - len(prefix), 0)
        return prefix + [minimal_instance(schema.get("items") or {}) for _ in range(rest)]
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema["exclusiveMinimum"] + 1 if "exclusiveMinimum" in schema else 0)
        return min(low, schema.get("maximum", low))
    if kind == "string":
        if "pattern" in schema:
            text = " ".join(pattern_literals(schema["pattern"]))
            short = schema.get("minLength", 0) - len(text)
            return text + (" " + "a" * short if short > 0 else "")  # never ends in the space a strip would cut
        if schema.get("format") in _FORMATS:
            return _FORMATS[schema["format"]]
        return "a" * schema.get("minLength", 0)
    if kind == "boolean":
        return False
    return None


def minimal_model(request: dict[str, Any]) -> str:
    """A ScriptedLLMServer responder: the minimal instance of the request's response schema, as JSON."""
    schema = request_schema(request)
    if schema is None:
        raise ValueError("minimal_model: the request carries no response schema")
    return json.dumps(minimal_instance(schema))
