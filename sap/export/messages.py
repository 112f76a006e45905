"""The `messages` export: each record as the OpenAI chat fine-tuning row, `{"messages": [...], "tools": [...]}` and
nothing else, which OpenAI fine-tuning, TRL's SFTTrainer and `datasets.load_dataset("json")` take as it is."""
from __future__ import annotations

from typing import Any

MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


def to_messages_row(record: dict[str, Any]) -> dict[str, Any]:
    """A record's messages (the OpenAI message keys only, absent ones left out rather than null) and its tools."""
    return {"messages": [{k: m[k] for k in MESSAGE_KEYS if m.get(k) is not None} for m in record["messages"]],
            "tools": list(record.get("tools", []))}
