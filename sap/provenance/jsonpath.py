"""Resolve the simple JSON paths sap records ($.key[0].field, and $.map["k"]~ for a key itself) inside a document."""
from __future__ import annotations

import json
import re
from typing import Any

from sap.errors import SapError
from sap.jsonutil import holds_key

PATH_TOKEN = re.compile(r'\.([^.\[\]]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')
KEY_OF = "~"  # a path ending in `~` names the key of the entry it reaches (JSONPath-Plus), not the entry's value


class PathError(SapError, LookupError):
    """A path that does not resolve inside its document."""


def steps(path: str) -> list[str | int]:
    """The keys and indices of a plain path (without a trailing `~`), not checked for malformed parts."""
    return [int(m.group(2)) if m.group(2) is not None else json.loads(m.group(3)) if m.group(3) else m.group(1)
            for m in PATH_TOKEN.finditer(path, 1)]


def holds_below(doc: Any, path: str, names: set[str]) -> bool:
    """Whether the entry a key path (`$.a.b~`) names holds one of `names` as a key anywhere inside it (the folder
    a file is in); False for a value's path or one that does not resolve."""
    if not names or not path.endswith(KEY_OF):
        return False
    try:
        return holds_key(_walk(doc, path[:-len(KEY_OF)], path), names)
    except PathError:
        return False


def key_path(path: str) -> str:
    """The path of the key (not the value) of the object entry at `path`."""
    return path + KEY_OF


def resolve(doc: Any, path: str) -> Any:
    """The value at `path` in `doc` (the key itself for a path ending in `~`); raises PathError naming the path
    if it is absent or malformed."""
    if not path.startswith("$"):
        raise PathError(f"path {path!r} does not start with '$'")
    if path.endswith(KEY_OF):
        entry = path[:-len(KEY_OF)]
        last = list(PATH_TOKEN.finditer(entry, 1))[-1:]
        if not last or last[0].end() != len(entry) or last[0].group(2) is not None:
            raise PathError(f"path {path!r}: `~` must follow an object key")
        _walk(doc, entry, path)
        return json.loads(last[0].group(3)) if last[0].group(3) else last[0].group(1)
    return _walk(doc, path, path)


def _walk(doc: Any, path: str, named: str) -> Any:
    """The value at the plain path `path` in `doc`; PathError naming `named` if it is absent or malformed."""
    pos, cur = 1, doc
    for m in PATH_TOKEN.finditer(path, 1):
        if m.start() != pos:
            raise PathError(f"malformed path {named!r}")
        pos = m.end()
        key, idx = (json.loads(m.group(3)) if m.group(3) else m.group(1)), m.group(2)
        try:
            cur = cur[int(idx)] if idx is not None else cur[key]
        except (KeyError, IndexError, TypeError) as exc:
            raise PathError(f"path {named!r} not found") from exc
    if pos != len(path):
        raise PathError(f"malformed path {named!r}")
    return cur
