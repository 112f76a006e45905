"""Resolve the simple JSON paths sap records ($.key[0].field) inside a document."""
from __future__ import annotations

import json
import re
from typing import Any

PATH_TOKEN = re.compile(r'\.([^.\[\]]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


class PathError(LookupError):
    """A path that does not resolve inside its document."""


def resolve(doc: Any, path: str) -> Any:
    """The value at `path` in `doc`; raises PathError naming the path if it is absent."""
    if not path.startswith("$"):
        raise PathError(f"path {path!r} does not start with '$'")
    pos, cur = 1, doc
    for m in PATH_TOKEN.finditer(path, 1):
        if m.start() != pos:
            raise PathError(f"malformed path {path!r}")
        pos = m.end()
        key, idx = (json.loads(m.group(3)) if m.group(3) else m.group(1)), m.group(2)
        try:
            cur = cur[int(idx)] if idx is not None else cur[key]
        except (KeyError, IndexError, TypeError) as exc:
            raise PathError(f"path {path!r} not found") from exc
    if pos != len(path):
        raise PathError(f"malformed path {path!r}")
    return cur
