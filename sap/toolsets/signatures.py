"""JSON schemas of Python tool methods, from their signatures (through pydantic) and Google-style docstrings."""
from __future__ import annotations

import inspect
import re
import typing
from typing import Any, Callable

from pydantic import Field, create_model

SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns?|Yields?|Raises|Examples?|Notes?|Attributes)\s*:\s*$")
ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def docstring_parts(doc: str) -> tuple[str, dict[str, str]]:
    """A Google-style docstring's description (the text before its first section) and its `Args:` entries."""
    lines = inspect.cleandoc(doc).splitlines()
    starts = [i for i, line in enumerate(lines) if SECTION.match(line.strip()) and not line.startswith(" ")]
    description = "\n".join(lines[:starts[0]] if starts else lines).strip()
    args: dict[str, str] = {}
    for start, end in zip(starts, [*starts[1:], len(lines)]):
        if SECTION.match(lines[start].strip()).group(1) not in ("Args", "Arguments", "Parameters"):
            continue
        current, args_indent = None, 0
        for line in lines[start + 1:end]:
            if not line.strip():
                continue
            indent = len(line) - len(line.lstrip())
            entry = ARG_LINE.match(line.strip())
            if entry and (current is None or indent <= args_indent):
                args_indent, current = indent, entry.group(1).lstrip("*")
                args[current] = entry.group(2).strip()
            elif current is not None:
                args[current] = f"{args[current]} {line.strip()}".strip()
    return description, args


def _without_titles(schema: Any, in_properties: bool = False) -> Any:
    """`schema` without pydantic's generated `title` keys (a property called `title` stays)."""
    if isinstance(schema, list):
        return [_without_titles(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {key: _without_titles(value, key == "properties") for key, value in schema.items()
            if in_properties or key != "title"}


def _inlined(schema: Any, defs: dict[str, Any]) -> Any:
    """`schema` with every `$ref` to its `$defs` replaced by the definition itself."""
    if isinstance(schema, list):
        return [_inlined(item, defs) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#/$defs/"):
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return {**_inlined(defs[schema["$ref"].rsplit("/", 1)[1]], defs), **_inlined(rest, defs)}
    return {key: _inlined(value, defs) for key, value in schema.items() if key != "$defs"}


def function_schema(func: Callable[..., Any], params: list[inspect.Parameter]) -> tuple[str, dict[str, Any]]:
    """The description and the parameters schema of `func` over its parameters `params` (self already left out)."""
    description, arg_docs = docstring_parts(inspect.getdoc(func) or "")
    hints = typing.get_type_hints(func, include_extras=True)
    fields = {p.name: (hints.get(p.name, p.annotation),
                       Field(... if p.default is inspect.Parameter.empty else p.default,
                             description=arg_docs.get(p.name)))
              for p in params}
    model = create_model(func.__name__, **fields)  # type: ignore[call-overload]
    schema = model.model_json_schema()
    schema = _without_titles(_inlined(schema, schema.get("$defs", {})))
    return description, {"properties": {}, **schema, "required": schema.get("required", [])}
