"""A task's tools as typed Python callables: signature and Google-style docstring built from each OpenAI tool spec."""
from __future__ import annotations

import inspect
import keyword
from collections.abc import Callable
from typing import Any

# JSON Schema type -> the Python annotation a tool-calling chat template renders back to that type
JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list,
                              "object": dict}


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    """The function names of OpenAI tools, in order."""
    return [tool["function"]["name"] for tool in tools]


def annotation(schema: dict[str, Any]) -> Any:
    """The Python type of a JSON-schema property (Any for a type JSON Schema does not name, or a union of types)."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [JSON_TYPES[k] for k in kind if k in JSON_TYPES]
        return kinds[0] if len(kinds) == 1 else Any
    return JSON_TYPES.get(kind, Any)


def _identifier(name: str, what: str) -> str:
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"{what} {name!r} is not a Python identifier, so it cannot be a typed method")
    return name


def signature(tool: dict[str, Any], method: bool = False) -> inspect.Signature:
    """The keyword signature of an OpenAI tool: required parameters first, optional ones defaulting to None; with
    `method`, a leading `self`. A tool or parameter name that is not a Python identifier is refused, named."""
    function = tool["function"]
    name = _identifier(function["name"], "tool")
    params = function.get("parameters") or {}
    properties: dict[str, Any] = params.get("properties") or {}
    required = set(params.get("required") or ())
    ordered = sorted(properties, key=lambda p: p not in required)
    out = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] if method else []
    for param in ordered:
        _identifier(param, f"parameter of tool {name!r}:")
        kind = annotation(properties[param] if isinstance(properties[param], dict) else {})
        out.append(inspect.Parameter(param, inspect.Parameter.KEYWORD_ONLY,
                                     default=inspect.Parameter.empty if param in required else None,
                                     annotation=kind if param in required else kind | None))
    return inspect.Signature(out, return_annotation=str)


def docstring(tool: dict[str, Any]) -> str:
    """A Google-style docstring of an OpenAI tool: its description, then `Args:` with each parameter's description."""
    function = tool["function"]
    properties: dict[str, Any] = (function.get("parameters") or {}).get("properties") or {}
    lines = [" ".join(str(function.get("description") or function["name"]).split())]
    if properties:
        lines += ["", "Args:"]
        for param, schema in properties.items():
            text = schema.get("description") if isinstance(schema, dict) else None
            enum = schema.get("enum") if isinstance(schema, dict) else None
            text = " ".join(str(text or param).split()) + (f" (one of {', '.join(map(str, enum))})" if enum else "")
            lines.append(f"    {param}: {text}")
    lines += ["", "Returns:", "    The tool's result as JSON, or {\"error\": ...} when the call failed."]
    return "\n".join(lines)


def typed_callable(tool: dict[str, Any], run: Callable[[str, dict[str, Any]], str],
                   method: bool = False) -> Callable[..., str]:
    """A function named after `tool`, with the tool's signature and docstring, whose call runs `run(name, kwargs)`
    (with `method`, an unbound method whose instance is passed first: `run(self, name, kwargs)`)."""
    name = tool["function"]["name"]
    sig = signature(tool, method)

    if method:
        def call(self: Any, **kwargs: Any) -> str:
            return run(self, name, kwargs)  # type: ignore[call-arg]
    else:
        def call(**kwargs: Any) -> str:
            return run(name, kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = docstring(tool)
    call.__signature__ = sig  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in sig.parameters.values() if p.name != "self"} | {
        "return": str}
    return call
