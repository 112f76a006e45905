"""Load tool documentation (OpenAI tools JSON, BFCL func-doc JSON lines, Python classes) as validated ToolSpecs."""
from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any, Callable

from sap.errors import ToolsetError
from sap.model import ToolSpec
from sap.toolsets.signatures import function_schema

JSON_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})
BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}
TYPE_SUBSTITUTES = ("enum", "anyOf", "oneOf", "allOf", "const", "$ref")
NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")


class ToolDocError(ToolsetError, ValueError):
    """A malformed tool document, located by file, tool and field path."""

    def __init__(self, message: str, *, file: str | None = None, tool: str | None = None, field: str | None = None):
        self.message = message
        self.file = file
        self.tool = tool
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        """`file: tool 'name' field 'path': message`, leaving out the parts that are unknown."""
        where = []
        if self.tool is not None:
            where.append(f"tool {self.tool}" if self.tool.startswith("#") else f"tool {self.tool!r}")
        if self.field is not None:
            where.append(f"field {self.field!r}")
        text = f"{' '.join(where)}: {self.message}" if where else self.message
        return f"{self.file}: {text}" if self.file is not None else text


class _Doc:
    """Builds ToolDocErrors located in one tool entry of one file."""

    def __init__(self, file: str | None, tool: str | None):
        self.file, self.tool = file, tool

    def fail(self, field: str | None, message: str) -> ToolDocError:
        """An error located at `field` of this tool."""
        return ToolDocError(message, file=self.file, tool=self.tool, field=field)


def _kind(value: Any) -> str:
    """The JSON name of a Python value's type, for messages."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _convert_type(value: Any, path: str, doc: _Doc, bfcl: bool) -> Any:
    """The checked (and, for BFCL, translated) `type` value; None means no type constraint."""
    names = value if isinstance(value, list) else [value]
    if not names:
        raise doc.fail(path, "empty type list")
    out = []
    for name in names:
        if not isinstance(name, str):
            raise doc.fail(path, f"type must be a string, got {_kind(name)}")
        if bfcl and name in BFCL_TYPES:
            if BFCL_TYPES[name] is None:
                return None
            name = BFCL_TYPES[name]
        elif name not in JSON_TYPES:
            raise doc.fail(path, f"unknown JSON type {name!r}")
        out.append(name)
    return out if isinstance(value, list) else out[0]


def _schema(node: Any, path: str, doc: _Doc, bfcl: bool) -> dict[str, Any]:
    """A checked copy of one JSON schema node, its children checked recursively."""
    if not isinstance(node, dict):
        raise doc.fail(path, f"schema must be a JSON object, got {_kind(node)}")
    out = dict(node)
    if "type" in node:
        converted = _convert_type(node["type"], f"{path}.type", doc, bfcl)
        if converted is None:
            del out["type"]
        else:
            out["type"] = converted
    elif not any(key in node for key in TYPE_SUBSTITUTES):
        raise doc.fail(path, "schema has no 'type' (nor 'enum', 'anyOf' or 'oneOf')")
    if "description" in node and not isinstance(node["description"], str):
        raise doc.fail(f"{path}.description", f"description must be a string, got {_kind(node['description'])}")
    if "enum" in node and (not isinstance(node["enum"], list) or not node["enum"]):
        raise doc.fail(f"{path}.enum", "enum must be a non-empty list")
    for key in ("anyOf", "oneOf", "allOf"):
        if key in node:
            if not isinstance(node[key], list) or not node[key]:
                raise doc.fail(f"{path}.{key}", f"{key} must be a non-empty list of schemas")
            out[key] = [_schema(sub, f"{path}.{key}[{i}]", doc, bfcl) for i, sub in enumerate(node[key])]
    if "items" in node:
        items = node["items"]
        if isinstance(items, list):
            out["items"] = [_schema(sub, f"{path}.items[{i}]", doc, bfcl) for i, sub in enumerate(items)]
        else:
            out["items"] = _schema(items, f"{path}.items", doc, bfcl)
    if isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = _schema(node["additionalProperties"], f"{path}.additionalProperties", doc, bfcl)
    if "properties" in node or "required" in node:
        out.update(_object_members(node, path, doc, bfcl))
    return out


def _object_members(node: dict[str, Any], path: str, doc: _Doc, bfcl: bool) -> dict[str, Any]:
    """Checked `properties` and `required` of an object schema."""
    props = node.get("properties", {})
    if not isinstance(props, dict):
        raise doc.fail(f"{path}.properties", f"properties must be a JSON object, got {_kind(props)}")
    members: dict[str, Any] = {"properties": {k: _schema(v, f"{path}.properties.{k}", doc, bfcl) for k, v in props.items()}}
    if "required" in node:
        required = node["required"]
        if not isinstance(required, list):
            raise doc.fail(f"{path}.required", f"required must be a list of property names, got {_kind(required)}")
        for i, name in enumerate(required):
            if not isinstance(name, str):
                raise doc.fail(f"{path}.required[{i}]", f"required entries must be strings, got {_kind(name)}")
            if name not in props:
                raise doc.fail(f"{path}.required", f"required parameter {name!r} is not in {path}.properties")
        members["required"] = list(required)
    return members


def _parameters(raw: Any, doc: _Doc, bfcl: bool) -> dict[str, Any]:
    """The checked top-level parameters schema: an object with a properties dict and a required list."""
    if raw is None:
        return {"type": "object", "properties": {}, "required": []}
    if not isinstance(raw, dict):
        raise doc.fail("parameters", f"parameters must be a JSON object, got {_kind(raw)}")
    if "type" not in raw:
        raise doc.fail("parameters.type", "parameters must have type 'object'")
    params = _schema(raw, "parameters", doc, bfcl)
    if params.get("type") != "object":
        raise doc.fail("parameters.type", f"parameters must have type 'object', got {raw['type']!r}")
    params.setdefault("properties", {})
    params.setdefault("required", [])
    return params


def validate_tool_spec(raw: dict, file: str | None, index: int, *, bfcl: bool = False) -> ToolSpec:
    """Check one function dict (name, description, parameters, response, read_only) and build its ToolSpec."""
    doc = _Doc(file, f"#{index}")
    if not isinstance(raw, dict):
        raise doc.fail(None, f"tool entry must be a JSON object, got {_kind(raw)}")
    name = raw.get("name")
    if name is None:
        raise doc.fail("name", "missing tool name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise doc.fail("name", f"invalid tool name {name!r}: use letters, digits, '_', '-' and '.'")
    doc.tool = name
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise doc.fail("description", f"description must be a string, got {_kind(description)}")
    parameters = _parameters(raw.get("parameters"), doc, bfcl)
    response = raw.get("response")
    if response is not None:
        response = _schema(response, "response", doc, bfcl)
    read_only = raw.get("read_only")
    if read_only is not None and not isinstance(read_only, bool):
        raise doc.fail("read_only", f"read_only must be true or false, got {_kind(read_only)}")
    return ToolSpec(name=name, description=description, parameters=parameters, response=response, read_only=read_only)


def _read_text(path: str | Path) -> str:
    """The file's text, or a ToolDocError naming the path."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ToolDocError("no such file", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolDocError(f"cannot read file: {exc}", file=str(path)) from None


def _parse_json(text: str, file: str, line_offset: int = 0) -> Any:
    """Parsed JSON, or a ToolDocError giving the line and column of the syntax error."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno + line_offset} column {exc.colno}"
        raise ToolDocError(f"invalid JSON at {where}: {exc.msg}", file=file) from None


def _specs(entries: list[Any], file: str, bfcl: bool) -> list[ToolSpec]:
    """Validated specs of a file's function dicts, rejecting duplicate names."""
    specs: list[ToolSpec] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(entries):
        spec = validate_tool_spec(raw, file, index, bfcl=bfcl)
        if spec.name in seen:
            message = f"duplicate tool name (first defined by tool #{seen[spec.name]})"
            raise ToolDocError(message, file=file, tool=spec.name, field="name")
        seen[spec.name] = index
        specs.append(spec)
    return specs


def _unwrap_openai(entry: Any, file: str, index: int) -> Any:
    """The function dict of an OpenAI tools entry: `{"type": "function", "function": {...}}` or a bare function dict."""
    if not isinstance(entry, dict) or "type" not in entry:
        return entry
    inner = entry.get("function")
    name = inner.get("name") if isinstance(inner, dict) else entry.get("name")
    label = name if isinstance(name, str) and name else f"#{index}"
    if entry["type"] != "function":
        message = f"unsupported tool type {entry['type']!r} (expected 'function')"
        raise ToolDocError(message, file=file, tool=label, field="type")
    if "function" in entry:
        if not isinstance(entry["function"], dict):
            message = f"function must be a JSON object, got {_kind(entry['function'])}"
            raise ToolDocError(message, file=file, tool=label, field="function")
        return entry["function"]
    return {k: v for k, v in entry.items() if k != "type"}  # flat form: {"type": "function", "name": ..., ...}


def load_openai_tools(path: str | Path) -> list[ToolSpec]:
    """ToolSpecs from an OpenAI `tools` JSON file: a list of tools, or `{"tools": [...]}`."""
    file = str(path)
    data = _parse_json(_read_text(path), file)
    if isinstance(data, dict) and "tools" in data:
        data = data["tools"]
        if not isinstance(data, list):
            raise ToolDocError(f"tools must be a list, got {_kind(data)}", file=file, field="tools")
    elif not isinstance(data, list):
        raise ToolDocError(f'expected a list of tools or {{"tools": [...]}}, got {_kind(data)}', file=file)
    return _specs([_unwrap_openai(entry, file, i) for i, entry in enumerate(data)], file, bfcl=False)


def load_bfcl_func_doc(path: str | Path) -> list[ToolSpec]:
    """ToolSpecs from a BFCL func-doc file, one JSON object per line, with BFCL types translated to JSON Schema."""
    file = str(path)
    entries = []
    for lineno, line in enumerate(_read_text(path).splitlines(), start=1):
        if line.strip():
            entries.append(_parse_json(line, file, line_offset=lineno - 1))
    return _specs(entries, file, bfcl=True)


def _is_json_lines(text: str) -> bool:
    """Whether the first non-blank line is a whole JSON object and more non-blank lines follow it."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return False
    try:
        return isinstance(json.loads(lines[0]), dict)
    except json.JSONDecodeError:
        return False


def load_tool_docs(path: str | Path) -> list[ToolSpec]:
    """ToolSpecs from a tool-doc file, picking BFCL JSON lines (`.jsonl` or one object per line) or OpenAI JSON."""
    if Path(path).suffix.lower() == ".jsonl" or _is_json_lines(_read_text(path)):
        return load_bfcl_func_doc(path)
    return load_openai_tools(path)


def _public_methods(cls: type) -> list[tuple[str, Callable[..., Any], bool]]:
    """(name, function, drops-first-parameter) for public methods of `cls` and its bases except object, base-first."""
    methods = []
    seen: set[str] = set()
    for klass in reversed(cls.__mro__):
        if klass is object:
            continue
        for name in vars(klass):
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            attr = inspect.getattr_static(cls, name)
            if isinstance(attr, staticmethod):
                methods.append((name, attr.__func__, False))
            elif isinstance(attr, classmethod):
                methods.append((name, attr.__func__, True))
            elif inspect.isfunction(attr):
                methods.append((name, attr, True))
    return methods


def _method_spec(name: str, func: Callable[..., Any], bound: bool, owner: str, class_name: str) -> ToolSpec:
    """The ToolSpec of one method, requiring a docstring and a type hint on every parameter."""
    doc = _Doc(None, f"{class_name}.{name}")
    if not (inspect.getdoc(func) or "").strip():
        raise doc.fail("description", "method has no docstring")
    params = list(inspect.signature(func).parameters.values())
    if bound and params:
        params = params[1:]
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            field = f"parameters.properties.{param.name}"
            raise doc.fail(field, f"variadic parameter {param.name!r} cannot be a tool parameter")
        if param.annotation is inspect.Parameter.empty:
            raise doc.fail(f"parameters.properties.{param.name}", f"parameter {param.name!r} has no type hint")
    description, schema = function_schema(func, params)
    return ToolSpec(name=name, description=description, parameters=schema, owner=owner)


def tools_from_class(cls: type, owner: str | None = None) -> list[ToolSpec]:
    """ToolSpecs of a class's public methods, described by their signatures and Google-style docstrings."""
    owner = owner or cls.__name__
    return [_method_spec(name, func, bound, owner, cls.__name__) for name, func, bound in _public_methods(cls)]
