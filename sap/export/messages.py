"""The `messages` export: each record as the OpenAI chat fine-tuning row, `{"messages": [...], "tools": [...]}` and
nothing else, which OpenAI fine-tuning, TRL's SFTTrainer and `datasets.load_dataset("json")` take as it is. A MissFunc
row's `tools` are those of its first turn; the hidden tool comes back in a system message before the user message of
its turn (its schema as JSON), and the row adds `tools_added` ([{turn, tools}], the record's field) for trainers that
change the tool list per turn."""
from __future__ import annotations

from typing import Any

MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


def to_messages_row(record: dict[str, Any]) -> dict[str, Any]:
    """A record's messages (the OpenAI message keys only, absent ones left out rather than null), its tools and, when
    it has them, the tools added at later turns."""
    row = {"messages": [{k: m[k] for k in MESSAGE_KEYS if m.get(k) is not None} for m in record["messages"]],
           "tools": list(record.get("tools", []))}
    if record.get("tools_added"):
        row["tools_added"] = list(record["tools_added"])
    return row
