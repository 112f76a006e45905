"""Canonical JSON of call arguments (stored digests), and the hashable in-memory keys of one argument value and of
a whole argument dict (index lookups)."""
from __future__ import annotations

import hashlib
import json
from typing import Any, Hashable

_JSON = "json"  # the tag of a value keyed by its canonical JSON

_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def canonical_json(value: Any) -> str:
    """`value` as JSON with sorted keys and no spaces: equal arguments give equal text."""
    return _ENCODE(value)


def args_digest(function: str, args: dict[str, Any], state: str | None = None) -> str:
    """The sha256 of a call (function, the state id it was made in if any, canonical arguments), the stored key of a
    cache entry."""
    where = "" if state is None else f"{state}\n"
    return hashlib.sha256(f"{function}\n{where}{canonical_json(args)}".encode()).hexdigest()


def value_key(value: Any) -> Hashable:
    """A hashable stand-in for an argument value, equal exactly when the canonical JSON is: strings as they are,
    ints, bools and None tagged with their type (so 1, True and "1" stay apart), anything else (floats, lists,
    dicts) as tagged canonical JSON (so 1.0 stays apart from 1, and dict key order does not matter)."""
    kind = type(value)
    if kind is str:
        return value
    if kind is int or kind is bool or value is None:
        return kind, value
    return _JSON, _ENCODE(value)


def args_key(args: dict[str, Any]) -> tuple[tuple[str, Hashable], ...]:
    """The in-memory key of an argument dict: its (name, value key) pairs in name order; equal for arguments whose
    canonical JSON is equal, and about three times cheaper to build than that JSON."""
    return tuple([(name, value if type(value) is str else value_key(value)) for name, value in sorted(args.items())])
