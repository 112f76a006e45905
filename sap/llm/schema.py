"""Exact response schemas: builders for closed JSON schemas, the strict-mode rules they meet or not, and validation."""
from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import jsonschema

_REGEX_SPECIALS = frozenset("\\^$.|?*+()[]{}")
# keywords OpenAI's strict mode does not accept (https://platform.openai.com/docs/guides/structured-outputs)
_NOT_STRICT = frozenset({"prefixItems", "patternProperties", "unevaluatedProperties", "propertyNames",
                         "minProperties", "maxProperties", "contains", "if", "then", "else", "not", "oneOf",
                         "dependentRequired", "dependentSchemas"})
_HINTS = ("default", "examples")
# any text between a pattern's literals: no double quote and no backslash, the one class on which a validator (the
# decoded string) and a grammar converter (llama.cpp writes the pattern over the raw JSON characters, so its `.`
# let a decoder close the string with an unescaped quote and write on) agree; a run of it is bounded, so a decoder
# held to the grammar must come to the next literal (a small model otherwise writes on to its token limit)
TEXT_CLASS = r'[^"\\]'
MESSAGE_RUN = 240  # characters of a message before, between and after the values it must state


def text_run(limit: int) -> str:
    """A pattern's run of at most `limit` characters of text between its literals."""
    return f"{TEXT_CLASS}{{0,{limit}}}"

_TYPED = frozenset({"type", "enum", "const", "anyOf", "$ref"})


@dataclass(frozen=True)
class ResponseSchema:
    """The JSON schema one request's answer must match, and its name as sent to the provider."""

    name: str
    schema: dict[str, Any]


def closed(properties: dict[str, Any], required: Iterable[str] | None = None, **extra: Any) -> dict[str, Any]:
    """An object schema with exactly `properties`, all required unless `required` says which; no other keys."""
    return {"type": "object", "properties": properties,
            "required": list(properties if required is None else required), "additionalProperties": False, **extra}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` or null: how strict mode says a property may be left out."""
    return {"anyOf": [schema, {"type": "null"}]}


def escape_literal(text: str) -> str:
    """`text` as a regular-expression literal in the ECMA-262 subset JSON schema patterns use, each special character
    as a one-character class holding its `\\xNN` escape (`.` -> `[\\x2e]`). Grammar converters copy a class
    whole into a GBNF class their parser takes; llama.cpp's converter turns `\\.` or `\\^` into escapes its parser
    refuses, a trailing `\\$` into an unterminated string, and splits a bare `\\x24` before `)` or `|` into
    `"\\x2" "4"` (the server then dies)."""
    return "".join(f"[\\x{ord(ch):02x}]" if ch in _REGEX_SPECIALS else ch for ch in text)


def containing(pieces: Iterable[str | list[str]], min_length: int = 1, max_length: int | None = None,
               run: int = MESSAGE_RUN) -> dict[str, Any]:
    """A string schema of min_length..max_length characters that holds each piece in this order (a grammar a
    decoder can follow): a string verbatim, a list as one of its alternatives; at most `run` characters of text
    before, between and after them, none a double quote or a backslash. With a max_length the runs are cut so that
    the pattern alone keeps within it (a grammar converter follows the pattern and drops the maxLength beside it)."""
    parts, longest, shortest = [], 0, 0
    for piece in pieces:
        if isinstance(piece, str) and piece:
            parts.append(escape_literal(piece))
            longest, shortest = longest + len(piece), shortest + len(piece)
        elif isinstance(piece, list) and piece:
            parts.append("(" + "|".join(escape_literal(p) for p in piece) + ")")
            longest, shortest = longest + max(map(len, piece)), shortest + min(map(len, piece))
    schema: dict[str, Any] = {"type": "string", "minLength": min_length}
    if max_length is not None:
        schema["maxLength"] = max_length
    if parts:
        gaps = len(parts) + 1
        if max_length is not None:  # within max_length with the longest alternatives, yet room for min_length
            run = max(min(run, (max_length - longest) // gaps), -(-(min_length - shortest) // gaps), 0)
        gap = text_run(run)
        schema["pattern"] = "^" + gap + gap.join(parts) + gap + "$"
    return schema


def closed_copy(schema: dict[str, Any]) -> dict[str, Any]:
    """A parameter schema as an answer schema: every object that lists its properties admits no other keys (unless
    it says otherwise), and the hints `default` and `examples` (not constraints; strict mode may refuse them) are
    left out."""
    out = {k: v for k, v in schema.items() if k not in _HINTS}
    if out.get("type") == "object" and "properties" in out:
        out.setdefault("additionalProperties", False)
    if "properties" in out:
        out["properties"] = {name: closed_copy(sub) for name, sub in out["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = closed_copy(out[key])
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if key in out:
            out[key] = [closed_copy(sub) for sub in out[key]]
    return out


def strict_ready(schema: Any) -> bool:
    """Whether `schema` meets OpenAI strict mode: every subschema typed (type, enum, const or anyOf), every object
    closed (additionalProperties false) with every property required, no keyword strict mode rejects."""
    if not isinstance(schema, dict) or _NOT_STRICT.intersection(schema) or not _TYPED.intersection(schema):
        return False
    if schema.get("type") == "object" or "properties" in schema:
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("required", [])) != set(schema.get("properties", {})):
            return False
    subschemas = [*schema.get("properties", {}).values(), *schema.get("anyOf", []), *schema.get("$defs", {}).values()]
    if isinstance(schema.get("items"), dict):
        subschemas.append(schema["items"])
    return all(strict_ready(s) for s in subschemas)


@functools.lru_cache(maxsize=512)
def _validator(schema_json: str) -> jsonschema.protocols.Validator:
    """A validator of the schema given as sorted JSON, built once per schema."""
    schema = json.loads(schema_json)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def schema_errors(instance: Any, schema: dict[str, Any], limit: int = 5) -> list[str]:
    """Where `instance` breaks `schema`, one `path: message` line each (at most `limit`), in document order."""
    validator = _validator(json.dumps(schema, sort_keys=True))
    errors = sorted(validator.iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path])
    out = []
    for error in errors[:limit]:
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
        message = error.message if len(error.message) <= 160 else error.message[:80] + "..." + error.message[-80:]
        out.append(f"{path or '(root)'}: {message}")
    if len(errors) > limit:
        out.append(f"and {len(errors) - limit} more errors")
    return out
