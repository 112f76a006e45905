"""Canonical JSON of call arguments and the hashable key of one argument value (for the reverse index)."""
from __future__ import annotations

import hashlib
import json
from typing import Any, Hashable

_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def canonical_json(value: Any) -> str:
    """`value` as JSON with sorted keys and no spaces: equal arguments give equal text."""
    return _ENCODE(value)


def args_digest(function: str, args: dict[str, Any]) -> str:
    """The sha256 of a call (function and canonical arguments), the stored key of a cache entry."""
    return hashlib.sha256(f"{function}\n{canonical_json(args)}".encode()).hexdigest()


def value_key(value: Any) -> Hashable:
    """A hashable stand-in for an argument value: strings as they are, anything else as tagged canonical JSON
    (so "1", 1, 1.0 and true stay apart)."""
    return value if type(value) is str else "\x00" + _ENCODE(value)
