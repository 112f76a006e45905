"""JSON helpers: a fast deep copy for plain-JSON documents."""
from __future__ import annotations

import json
from typing import Any


def json_copy(doc: Any) -> Any:
    """A deep copy of a plain-JSON value (several times faster than copy.deepcopy on large configs)."""
    return json.loads(json.dumps(doc))
