"""Parse-and-repair of structured answers: find the JSON in a model's text and validate it with a pydantic model."""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from sap.errors import SapError
from sap.llm.schema import schema_errors

ResponseT = TypeVar("ResponseT", bound=BaseModel)

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_CLOSER = {"{": "}", "[": "]"}
_MAX_REPORTED_ERRORS = 5
_MAX_INPUT_CHARS = 40


class StructuredOutputError(SapError, ValueError):
    """An answer with no usable JSON, or JSON that breaks the schema; the message is written to be fed back."""


def parse_structured(text: str, response_model: type[ResponseT], schema: dict[str, Any] | None = None) -> ResponseT:
    """The answer in `text` as a `response_model`, first validated against `schema` when given; raises
    StructuredOutputError naming what is wrong."""
    value = extract_json(text)
    if schema is not None and (errors := schema_errors(value, schema)):
        raise StructuredOutputError("; ".join(errors))
    try:
        return response_model.model_validate(value)
    except ValidationError as exc:
        raise StructuredOutputError(describe_validation_error(exc)) from None


def extract_json(text: str) -> Any:
    """The first JSON value in text: ``` fenced blocks first, then the whole text, then each balanced {...} or
    [...] span. Trailing commas and plainly single-quoted keys ('city': ...) are repaired; raw newlines and tabs
    inside strings are accepted."""
    first_error: json.JSONDecodeError | None = None
    for source in [m.group(1) for m in _FENCE.finditer(text)] + [text]:
        for candidate in _candidates(source):
            try:
                return _loads_repaired(candidate)
            except json.JSONDecodeError as exc:
                if candidate[:1] in ("{", "["):  # prose that is not JSON at all is "no JSON", not "invalid JSON"
                    first_error = first_error or exc
    if first_error is None:
        raise StructuredOutputError("no JSON object found in the answer")
    raise StructuredOutputError(
        f"invalid JSON: {first_error.msg} at line {first_error.lineno} column {first_error.colno}")


def describe_validation_error(error: ValidationError) -> str:
    """A compact list of failing field paths, e.g. `args.city: Field required; items[0].n: Input should be ...`."""
    details = error.errors(include_url=False)
    parts = []
    for detail in details[:_MAX_REPORTED_ERRORS]:
        message = detail["msg"]
        if detail["type"] != "missing":
            shown = json.dumps(detail.get("input"), default=str)
            if len(shown) > _MAX_INPUT_CHARS:
                shown = shown[:_MAX_INPUT_CHARS] + "..."
            message += f" (got {shown})"
        parts.append(f"{_field_path(detail['loc'])}: {message}")
    if len(details) > _MAX_REPORTED_ERRORS:
        parts.append(f"and {len(details) - _MAX_REPORTED_ERRORS} more errors")
    return "; ".join(parts)


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(root)"


def _candidates(source: str) -> Iterator[str]:
    stripped = source.strip()
    if stripped:
        yield stripped
    yield from _balanced_spans(source)


def _balanced_spans(text: str) -> Iterator[str]:
    """Each balanced {...} or [...] span, left to right, skipping over brackets inside double-quoted strings."""
    start = 0
    while (start := _next_opener(text, start)) >= 0:
        end = _matching_close(text, start)
        if end < 0:
            start += 1
            continue
        yield text[start:end + 1]
        start = end + 1


def _next_opener(text: str, start: int) -> int:
    positions = [p for p in (text.find("{", start), text.find("[", start)) if p >= 0]
    return min(positions, default=-1)


def _matching_close(text: str, start: int) -> int:
    """The index closing the bracket at `start`, or -1 if it is never closed or closed by the wrong bracket."""
    expected: list[str] = []
    in_string = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            in_string, escaped = _string_continues(ch, escaped)
        elif ch == '"':
            in_string = True
        elif ch in _CLOSER:
            expected.append(_CLOSER[ch])
        elif ch in "}]":
            if ch != expected.pop():
                return -1
            if not expected:
                return i
    return -1


def _loads_repaired(candidate: str) -> Any:
    try:
        return json.loads(candidate, strict=False)
    except json.JSONDecodeError as exc:
        repaired = _repair(candidate)
        if repaired == candidate:
            raise
        try:
            return json.loads(repaired, strict=False)
        except json.JSONDecodeError:
            raise exc from None


def _string_continues(ch: str, escaped: bool) -> tuple[bool, bool]:
    """(still inside the double-quoted string, next character escaped) after reading `ch` inside it."""
    if escaped:
        return True, False
    return ch != '"', ch == "\\"


def _next_significant(text: str, start: int) -> str:
    """The first non-whitespace character at or after `start`, or ''."""
    for i in range(start, len(text)):
        if not text[i].isspace():
            return text[i]
    return ""


def _repair(text: str) -> str:
    """Drop commas before a closing bracket and double-quote single-quoted keys that hold no quote or backslash."""
    out: list[str] = []
    last_significant = ""
    i = 0
    in_string = escaped = False
    while i < len(text):
        ch = text[i]
        if in_string:
            in_string, escaped = _string_continues(ch, escaped)
        elif ch == '"':
            in_string = True
        elif ch == "," and _next_significant(text, i + 1) in ("}", "]"):
            i += 1
            continue
        elif ch == "'" and last_significant in ("{", ","):
            close = text.find("'", i + 1)
            key = text[i + 1:close]
            if close > i and not any(c in key for c in "\"\\\n") and _next_significant(text, close + 1) == ":":
                out.append(json.dumps(key))
                last_significant = '"'
                i = close + 1
                continue
        out.append(ch)
        if not ch.isspace():
            last_significant = ch
        i += 1
    return "".join(out)
