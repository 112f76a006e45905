"""ShareGPT export as LLaMA-Factory reads it: `conversations` of human / function_call / observation / gpt turns,
`system`, and `tools` as a JSON string (LLaMA-Factory's `formatting: sharegpt` with its default tags).

MissFunc: `tools` holds the tools of the first turn only. LLaMA-Factory takes a system turn only at the start, so the
record's system message that hands a tool over mid-dialogue (its schema as JSON) opens the human turn of the turn the
tool comes back, as BFCL's prompting handler puts added functions into that turn's user message."""
from __future__ import annotations

import json
from typing import Any

from sap.errors import ExportError

# LLaMA-Factory's dataset_info.json entry for a file written by `to_sharegpt` (its default sharegpt tags)
DATASET_INFO = {"formatting": "sharegpt",
                "columns": {"messages": "conversations", "system": "system", "tools": "tools"}}


class ShareGPTError(ExportError):
    """A record that cannot be written as, or a row that cannot be read back from, LLaMA-Factory ShareGPT."""


def _calls_value(tool_calls: list[dict[str, Any]]) -> str:
    """A function_call turn: {"name", "arguments"} for one call, a JSON list of them for a parallel group."""
    calls = [{"name": tc["function"]["name"], "arguments": json.loads(tc["function"]["arguments"])}
             for tc in tool_calls]
    return json.dumps(calls[0] if len(calls) == 1 else calls, ensure_ascii=False)


def _observation_value(contents: list[str]) -> str:
    """An observation turn: the tool result, or a JSON list of the results of a parallel group, in call order."""
    if len(contents) == 1:
        return contents[0]
    return json.dumps([json.loads(c) for c in contents], ensure_ascii=False)


def to_sharegpt(record: dict[str, Any]) -> dict[str, Any]:
    """One sap record as a LLaMA-Factory ShareGPT row; human/observation turns stand at odd positions (1st, 3rd,
    ...) and function_call/gpt turns at even ones, as LLaMA-Factory requires."""
    system = ""
    notices: list[str] = []  # mid-dialogue system messages (tools handed over), for the next human turn
    turns: list[dict[str, str]] = []
    pending: list[str] = []  # tool results of the last function_call turn

    def add(role: str, value: str) -> None:
        if pending:
            turns.append({"from": "observation", "value": _observation_value(pending)})
            pending.clear()
        turns.append({"from": role, "value": value})

    for k, msg in enumerate(record["messages"]):
        role = msg["role"]
        if role == "system" and k == 0:
            system = msg.get("content") or ""
        elif role == "system":
            notices.append(msg.get("content") or "")
        elif role == "user":
            add("human", "\n\n".join([*notices, msg.get("content") or ""]))
            notices.clear()
        elif role == "assistant" and msg.get("tool_calls"):
            add("function_call", _calls_value(msg["tool_calls"]))
        elif role == "assistant":
            add("gpt", msg.get("content") or "")
        elif role == "tool":
            pending.append(msg["content"])
        else:
            raise ShareGPTError(f"record {record.get('id')}: messages[{k}] has role {role!r}")
    if pending:
        turns.append({"from": "observation", "value": _observation_value(pending)})
    tools = [t.get("function", t) for t in record.get("tools", [])]
    return {"id": record.get("id"), "conversations": turns, "system": system,
            "tools": json.dumps(tools, ensure_ascii=False)}


def sharegpt_calls(row: dict[str, Any]) -> list[tuple[str, dict[str, Any], Any]]:
    """(name, arguments, result) of every call in a ShareGPT row, in order: the row read back."""
    out: list[tuple[str, dict[str, Any], Any]] = []
    turns = row["conversations"]
    for k, turn in enumerate(turns):
        if turn["from"] != "function_call":
            continue
        calls = json.loads(turn["value"])
        calls = calls if isinstance(calls, list) else [calls]
        if k + 1 >= len(turns) or turns[k + 1]["from"] != "observation":
            raise ShareGPTError(f"row {row.get('id')}: conversations[{k}] function_call has no observation after it")
        results = json.loads(turns[k + 1]["value"])
        results = results if len(calls) > 1 else [results]
        out += [(c["name"], c["arguments"], r) for c, r in zip(calls, results, strict=True)]
    return out
