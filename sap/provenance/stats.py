"""Provenance statistics over records: tag distribution, SAP 3.4 chain lengths, turns, tool coverage."""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable

from sap.model import Tag


def _key(value: Any) -> str:
    """A canonical key for a value instance (one-item lists count as their item)."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    return json.dumps(value, sort_keys=True)


@dataclass(frozen=True)
class ArgNode:
    """One argument binding in the dependency graph: where it is used and where its value first entered."""

    turn: int
    name: str
    tag: str
    origin: int

    @property
    def chain_length(self) -> int:
        """L(v) = turn(v) - origin(v)."""
        return self.turn - self.origin


def arg_nodes(record: dict[str, Any]) -> list[ArgNode]:
    """The record's argument bindings in dialogue order, each linked to the earliest occurrence of its value."""
    args_by_call = {}
    for msg in record["messages"]:
        for tc in msg.get("tool_calls") or []:
            args_by_call[tc["id"]] = json.loads(tc["function"]["arguments"])
    first_seen: dict[str, int] = {}  # value key -> origin turn of its earliest binding
    nodes = []
    for entry in record["provenance"]:
        turn, args = entry["turn"], args_by_call[entry["call_id"]]
        for name, prov in entry["args"].items():
            tag, src = prov["tag"], prov.get("source") or {}
            key = _key(args.get(name))
            earlier = first_seen.get(key)
            if tag == Tag.self_create.value:
                origin = turn
            elif src.get("turn") is not None:
                origin = min(src["turn"], earlier if earlier is not None else src["turn"])
            else:
                origin = earlier if earlier is not None else turn
            first_seen.setdefault(key, origin)
            first_seen[key] = min(first_seen[key], origin)
            nodes.append(ArgNode(turn, name, tag, origin))
    return nodes


def _turns(record: dict[str, Any]) -> int:
    """Number of user turns."""
    return sum(m["role"] == "user" for m in record["messages"])


def dataset_stats(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Summary statistics of a set of records (see `sap stats`)."""
    records = list(records)
    tags: Counter = Counter()
    lengths: list[int] = []
    used_tools: Counter = Counter()
    all_tools: set[str] = set()
    turns = calls = 0
    for rec in records:
        turns += _turns(rec)
        calls += len(rec["provenance"])
        all_tools |= {t["function"]["name"] for t in rec.get("tools", [])}
        used_tools.update(p["name"] for p in rec["provenance"])
        for node in arg_nodes(rec):
            tags[node.tag] += 1
            lengths.append(node.chain_length)
    n_args = sum(tags.values())
    share = {t.value: (tags[t.value] / n_args if n_args else 0.0) for t in Tag}
    return {
        "records": len(records),
        "arguments": n_args,
        "tag_distribution": share,
        "fallback_rate": share[Tag.fallback.value],
        "mean_chain_length": sum(lengths) / len(lengths) if lengths else 0.0,
        "max_chain_length": max(lengths, default=0),
        "dependent_share": sum(1 for x in lengths if x >= 1) / len(lengths) if lengths else 0.0,
        "mean_turns": turns / len(records) if records else 0.0,
        "mean_calls": calls / len(records) if records else 0.0,
        "tool_coverage": len(set(used_tools) & all_tools) / len(all_tools) if all_tools else 0.0,
        "tool_counts": dict(sorted(used_tools.items())),
    }
