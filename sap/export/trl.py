"""Rows of `sap export --format trl`: per record, the GRPOTrainer prompt (its system and first user message), its
id, the whole record as JSON text (what `sap.envs.trl`'s environments reset from) and its tool group."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def _first(messages: list[dict[str, Any]], role: str) -> str:
    return next((str(m.get("content") or "") for m in messages if m.get("role") == role), "")


def trl_row_maker() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The row maker of one export: a group is the record's first-turn tools (`tools`: a MissFunc tool comes back
    later and is not among them, as `sap.envs.trl.before_comeback` plays the task), named after its toolset and
    numbered when the name is taken, in order of first appearance, so a group keeps its name across the splits."""
    groups: dict[tuple[str, ...], str] = {}

    def to_row(record: dict[str, Any]) -> dict[str, Any]:
        key = tuple(sorted(t["function"]["name"] for t in record.get("tools") or []))
        if key not in groups:
            base = str((record.get("meta") or {}).get("toolset") or "tasks")
            taken = list(groups.values())
            groups[key] = base if base not in taken else f"{base}_{sum(n.startswith(base) for n in taken) + 1}"
        messages = record.get("messages") or []
        return {"prompt": [{"role": "system", "content": _first(messages, "system")},
                           {"role": "user", "content": _first(messages, "user")}],
                "task_id": record.get("id"), "task": json.dumps(record, ensure_ascii=False),
                "environment": groups[key]}

    return to_row
