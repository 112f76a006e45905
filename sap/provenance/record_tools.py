"""The tools a sap record offers at each user turn: `tools` (those of the first turn), plus every `tools_added`
entry ({turn, tools}: MissFunc's tools coming back) from its turn on; a record without `tools_added` offers all of
`tools` at every turn."""
from __future__ import annotations

from typing import Any


def tools_at_turns(record: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The tools available at each user turn of a record: `tools`, plus every `tools_added` entry from its turn on (a
    record without `tools_added` offers all of `tools` at every turn)."""
    count = sum(m.get("role") == "user" for m in record.get("messages", []))
    added = record.get("tools_added") or []
    return [list(record.get("tools") or []) + [t for entry in added if entry["turn"] <= turn for t in entry["tools"]]
            for turn in range(count)]


def all_tools(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Every tool a record offers at some turn: `tools` then those of `tools_added`."""
    return list(record.get("tools") or []) + [t for entry in record.get("tools_added") or [] for t in entry["tools"]]
