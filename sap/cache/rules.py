"""Argument validators run before a cache lookup: the tool's JSON schema plus optional per-tool rules, each failure
a structured error the way a real API reports a bad request."""
from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

from sap.model import ToolSpec

ErrorCode = Literal["missing_required", "unknown_parameter", "invalid_type", "invalid_enum", "out_of_range",
                    "invalid_pattern", "invalid_date", "date_out_of_range", "invalid_coordinate",
                    "mutually_exclusive", "invalid_order"]
_ISO_HINT = re.compile(r"YYYY-MM-DD", re.I)
_AFTER = re.compile(r"\bafter (\w+)", re.I)
_LATITUDE = {"lat", "latitude"}
_LONGITUDE = {"lon", "lng", "long", "longitude"}
_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}
_BOUNDS = (("minimum", lambda v, b: v >= b, "at least"), ("maximum", lambda v, b: v <= b, "at most"),
           ("exclusiveMinimum", lambda v, b: v > b, "above"), ("exclusiveMaximum", lambda v, b: v < b, "below"))


def _any_type(value: Any) -> bool:
    return True


class ParamRule(BaseModel):
    """Extra constraints on one parameter beyond its schema."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["date", "date-time", "latitude", "longitude"] | None = None
    minimum: float | None = None
    maximum: float | None = None
    min_date: str | None = None  # ISO dates, inclusive
    max_date: str | None = None
    pattern: str | None = None
    enum: list[Any] | None = None


class ToolRules(BaseModel):
    """Per-tool rules: parameter constraints, groups of mutually exclusive parameters, and ordered pairs
    (the first value must be smaller, or earlier, than the second: check_in before check_out)."""

    model_config = ConfigDict(extra="forbid")

    params: dict[str, ParamRule] = Field(default_factory=dict)
    exclusive: list[list[str]] = Field(default_factory=list)
    ordered: list[tuple[str, str]] = Field(default_factory=list)


@dataclass(frozen=True)
class Violation:
    """Why a call is refused: the kind, the parameter and a message naming the value."""

    code: ErrorCode
    param: str | None
    message: str

    def response(self) -> dict[str, Any]:
        """The error body a client sees, shaped like an HTTP API's 400 answer."""
        body: dict[str, Any] = {"status": 400, "code": self.code, "message": self.message}
        if self.param is not None:
            body["param"] = self.param
        return {"error": body}


def infer_rules(spec: ToolSpec) -> ToolRules:
    """Rules the tool's docs imply: ISO dates where a description says YYYY-MM-DD, coordinates by name, and
    `after X` between two date parameters."""
    params: dict[str, ParamRule] = {}
    ordered: list[tuple[str, str]] = []
    for name, schema in spec.properties.items():
        desc = str(schema.get("description", ""))
        if schema.get("format") in ("date", "date-time") or _ISO_HINT.search(desc):
            params[name] = ParamRule(format=schema.get("format", "date"))
            after = _AFTER.search(desc)
            if after and after.group(1) in spec.properties:
                ordered.append((after.group(1), name))
        elif name.lower() in _LATITUDE:
            params[name] = ParamRule(format="latitude")
        elif name.lower() in _LONGITUDE:
            params[name] = ParamRule(format="longitude")
    return ToolRules(params=params, ordered=ordered)


def merge_rules(base: ToolRules, extra: ToolRules | None) -> ToolRules:
    """`base` with `extra`'s parameter rules laid over it (field by field) and its groups and pairs added."""
    if extra is None:
        return base
    params = dict(base.params)
    for name, rule in extra.params.items():
        old = params.get(name)
        params[name] = old.model_copy(update=rule.model_dump(exclude_unset=True)) if old else rule
    return ToolRules(params=params, exclusive=base.exclusive + extra.exclusive,
                     ordered=list(dict.fromkeys(base.ordered + extra.ordered)))


def _date(value: Any, fmt: str) -> dt.date | dt.datetime | None:
    """`value` parsed as an ISO date (or date-time), or None."""
    if not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value) if fmt == "date-time" else dt.date.fromisoformat(value)
    except ValueError:
        return None


def _type_names(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type")
    return [] if kind is None else kind if isinstance(kind, list) else [kind]


class ToolValidator:
    """Checks one tool's arguments: required, unknown, type, enum, range, pattern, date, coordinate, exclusive and
    ordered; the first violation found is returned."""

    def __init__(self, spec: ToolSpec, rules: ToolRules | None = None) -> None:
        self.spec = spec
        self.rules = merge_rules(infer_rules(spec), rules)
        self.required = spec.required
        self.properties = spec.properties
        self.closed = spec.parameters.get("additionalProperties") is not True
        self.patterns = {name: re.compile(p) for name, p in self._patterns().items()}

    def _patterns(self) -> dict[str, str]:
        out = {n: s["pattern"] for n, s in self.properties.items() if isinstance(s.get("pattern"), str)}
        out.update({n: r.pattern for n, r in self.rules.params.items() if r.pattern})
        return out

    def check(self, args: dict[str, Any]) -> Violation | None:
        """The first problem with `args`, or None if a real API would accept them."""
        for name in self.required:
            if name not in args:
                return Violation("missing_required", name, f"missing required parameter '{name}'")
        for name, value in args.items():
            schema = self.properties.get(name)
            if schema is None:
                if self.closed:
                    return Violation("unknown_parameter", name, f"unknown parameter '{name}'")
                continue
            problem = self._value(name, value, schema) or self._rule(name, value)
            if problem:
                return problem
        for group in self.rules.exclusive:
            given = [g for g in group if args.get(g) is not None]
            if len(given) > 1:
                return Violation("mutually_exclusive", given[1],
                                 f"parameters {', '.join(repr(g) for g in given)} cannot be used together")
        for first, second in self.rules.ordered:
            if first in args and second in args:
                a, b = self._comparable(first, args[first]), self._comparable(second, args[second])
                if a is not None and b is not None and not a < b:
                    return Violation("invalid_order", second,
                                     f"'{second}' ({args[second]}) must be after '{first}' ({args[first]})")
        return None

    def _comparable(self, name: str, value: Any) -> Any:
        rule = self.rules.params.get(name)
        if rule and rule.format in ("date", "date-time"):
            return _date(value, rule.format)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def _value(self, name: str, value: Any, schema: dict[str, Any]) -> Violation | None:
        """Schema checks: anyOf/oneOf branches, type, enum, numeric bounds, string length and array items."""
        branches = schema.get("anyOf") or schema.get("oneOf")
        if branches:
            problems = [self._value(name, value, {**b, **{k: v for k, v in schema.items()
                                                          if k not in ("anyOf", "oneOf")}}) for b in branches]
            return None if any(p is None for p in problems) else problems[0]
        kinds = _type_names(schema)
        if kinds and not any(_JSON_TYPES.get(k, _any_type)(value) for k in kinds):
            return Violation("invalid_type", name, f"'{name}' must be of type {' or '.join(kinds)}, got {value!r}")
        if value is None:
            return None
        if "enum" in schema and value not in schema["enum"]:
            return Violation("invalid_enum", name, f"'{name}' must be one of {schema['enum']}, got {value!r}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value):
                return Violation("out_of_range", name, f"'{name}' must be a finite number, got {value!r}")
            for key, ok, words in _BOUNDS:
                if isinstance(schema.get(key), (int, float)) and not ok(value, schema[key]):
                    return Violation("out_of_range", name, f"'{name}' must be {words} {schema[key]}, got {value!r}")
        if isinstance(value, str):
            if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", math.inf):
                return Violation("out_of_range", name, f"'{name}' has length {len(value)}, allowed "
                                 f"{schema.get('minLength', 0)}..{schema.get('maxLength', 'any')}")
        if isinstance(value, list) and isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                problem = self._value(f"{name}[{i}]", item, schema["items"])
                if problem:
                    return problem
        return None

    def _rule(self, name: str, value: Any) -> Violation | None:
        """Rule checks: pattern, enum, date format and range, coordinates, numeric bounds."""
        pattern = self.patterns.get(name)
        if pattern is not None and isinstance(value, str) and not pattern.fullmatch(value):
            return Violation("invalid_pattern", name, f"'{name}' {value!r} does not match {pattern.pattern!r}")
        rule = self.rules.params.get(name)
        if rule is None:
            return None
        if rule.enum is not None and value not in rule.enum:
            return Violation("invalid_enum", name, f"'{name}' must be one of {rule.enum}, got {value!r}")
        if rule.format in ("date", "date-time"):
            day = _date(value, rule.format)
            if day is None:
                shape = "YYYY-MM-DD" if rule.format == "date" else "an ISO date-time"
                return Violation("invalid_date", name, f"'{name}' must be a date as {shape}, got {value!r}")
            iso = day.isoformat()[:10]
            if (rule.min_date and iso < rule.min_date) or (rule.max_date and iso > rule.max_date):
                return Violation("date_out_of_range", name, f"'{name}' {value} is outside "
                                 f"{rule.min_date or 'any'} to {rule.max_date or 'any'}")
        if rule.format in ("latitude", "longitude"):
            limit = 90 if rule.format == "latitude" else 180
            number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
            if isinstance(value, str):
                try:
                    number = float(value)
                except ValueError:
                    number = None
            if number is None or not -limit <= number <= limit:
                return Violation("invalid_coordinate", name,
                                 f"'{name}' must be a {rule.format} between -{limit} and {limit}, got {value!r}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if (rule.minimum is not None and value < rule.minimum) or (rule.maximum is not None and value > rule.maximum):
                return Violation("out_of_range", name, f"'{name}' must be within {rule.minimum}..{rule.maximum}, "
                                 f"got {value!r}")
        return None
