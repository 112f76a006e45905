"""Provenance statistics over records: tag distribution, SAP 3.4 chain lengths, turns, tool coverage."""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

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


def has_parallel_calls(messages: Iterable[dict[str, Any]]) -> bool:
    """Whether some assistant message carries two or more tool calls."""
    return any(m.get("role") == "assistant" and len(m.get("tool_calls") or []) >= 2 for m in messages)


def record_kind(record: dict[str, Any]) -> str:
    """The record's kind: `meta.kind`, else `meta.rewrite_kind`, else "base"."""
    meta = record.get("meta") or {}
    return str(meta.get("kind") or meta.get("rewrite_kind") or "base")


@dataclass
class RecordSummary:
    """What the dataset figures need from one record, whatever format it came in.

    `tools` is None when the record does not say which tools were offered, and `parallel` is None when
    the format cannot show whether calls were issued together.
    """

    turns: int
    calls: list[str]
    nodes: list[ArgNode]
    tools: set[str] | None
    parallel: bool | None
    kind: str = "base"


def sap_summary(record: dict[str, Any]) -> RecordSummary:
    """The summary of one sap export record (declared provenance)."""
    return RecordSummary(turns=_turns(record), calls=[p["name"] for p in record["provenance"]],
                         nodes=arg_nodes(record), tools={t["function"]["name"] for t in record.get("tools", [])},
                         parallel=has_parallel_calls(record["messages"]), kind=record_kind(record))


def _covered(tool: str, called: Counter) -> bool:
    """Whether a documented tool was called, by its name or as the last part of a dotted call name."""
    return tool in called or any(name.rsplit(".", 1)[-1] == tool for name in called)


def summarize(summaries: Iterable[RecordSummary], tags: Sequence[str]) -> dict[str, Any]:
    """The dataset figures of `sap stats` over record summaries; `tag_distribution` has one share per tag in `tags`.

    Figures that the records cannot show (tool coverage without tool docs, parallel calls in a format
    without them) are None. With no tool docs in any record, `tool_coverage` is None and
    `uncalled_tools` is None.
    """
    summaries = list(summaries)
    tag_counts: Counter = Counter()
    lengths: list[int] = []
    used: Counter = Counter()
    kinds: Counter = Counter()
    documented: set[str] | None = None
    turns = calls = parallel = 0
    parallel_known = False
    for s in summaries:
        turns += s.turns
        calls += len(s.calls)
        used.update(s.calls)
        kinds[s.kind] += 1
        if s.tools is not None:
            documented = (documented or set()) | s.tools
        if s.parallel is not None:
            parallel_known = True
            parallel += s.parallel
        for node in s.nodes:
            tag_counts[node.tag] += 1
            lengths.append(node.chain_length)
    n_args = sum(tag_counts.values())
    share = {t: (tag_counts[t] / n_args if n_args else 0.0) for t in tags}
    n = len(summaries)
    called = [c for c in used.values() if c > 0]
    return {
        "records": n,
        "arguments": n_args,
        "tag_distribution": share,
        "fallback_rate": share.get(Tag.fallback.value),
        "mean_chain_length": sum(lengths) / len(lengths) if lengths else 0.0,
        "max_chain_length": max(lengths, default=0),
        "dependent_share": sum(1 for x in lengths if x >= 1) / len(lengths) if lengths else 0.0,
        "chain_length_counts": {str(k): v for k, v in sorted(Counter(lengths).items())},
        "mean_turns": turns / n if n else 0.0,
        "mean_calls": calls / n if n else 0.0,
        "parallel_share": (parallel / n if n else 0.0) if parallel_known or not n else None,
        "kind_counts": dict(sorted(kinds.items())),
        "tool_coverage": (sum(_covered(t, used) for t in documented) / len(documented) if documented else 0.0)
        if documented is not None else None,
        "tool_counts": dict(sorted(used.items())),
        "frequency_spread": max(called) / min(called) if called else None,
        "uncalled_tools": sum(not _covered(t, used) for t in documented) if documented is not None else None,
    }


def dataset_stats(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Summary statistics of a set of sap records (see `sap stats`).

    Besides the tag shares and chain figures: `parallel_share` is the share of records with an
    assistant message carrying 2+ tool calls, `kind_counts` counts `meta.kind` (or `meta.rewrite_kind`,
    default "base"), `frequency_spread` is the largest over the smallest call count among the tools
    called at least once (None if none was), and `uncalled_tools` counts the offered tools never called.
    """
    stats = summarize((sap_summary(r) for r in records), [t.value for t in Tag])
    if stats["tool_coverage"] is None:  # no records: sap records always carry their tools
        stats["tool_coverage"], stats["uncalled_tools"] = 0.0, 0
    return stats
