"""Provenance statistics over records: tag distribution and SAP's source columns, SAP 3.4 chain lengths, value
reuse, turns, tool coverage."""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

from sap.provenance.record_tools import all_tools
from sap.model import Tag
from sap.provenance.generate import is_word_pair


def value_key(value: Any) -> str:
    """A canonical key for a value instance (one-item lists count as their item)."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    return json.dumps(value, sort_keys=True)


@dataclass(frozen=True)
class ArgNode:
    """One argument binding: where it is used, its SAP origin and the earliest turn an equal value was bound."""

    turn: int
    name: str
    tag: str
    origin: int  # SAP 3.4: the turn its value entered through P_o / P_u sources; its own turn for P_i, P_c, P_f
    announced: bool = False  # a user-stated value no call used before: the user announced it ahead of its use
    reuse_origin: int | None = None  # the origin of the earliest binding of an equal value, whatever its tag

    @property
    def chain_length(self) -> int:
        """L(v) = turn(v) - origin(v)."""
        return self.turn - self.origin

    @property
    def reuse_length(self) -> int:
        """Turns since an equal value was first bound (the broader `value_reuse` measure)."""
        return self.turn - (self.origin if self.reuse_origin is None else self.reuse_origin)


SAP_TAGS = frozenset(t.value for t in Tag)
CARRIED = (Tag.prev_output.value, Tag.prev_user_msg.value)  # the tags whose source is an earlier turn


def arg_nodes(record: dict[str, Any]) -> list[ArgNode]:
    """The record's argument bindings in dialogue order, with SAP 3.4 origins.

    A P_i, P_c or P_f argument has its own turn as origin (L = 0). A P_u argument's origin is the user turn
    that stated it. A P_o argument's origin is the turn of the result it reads, or earlier when the call that
    produced that result was itself given the same value through P_o or P_u (the value was carried through it).
    """
    args_by_call = {}
    for msg in record["messages"]:
        for tc in msg.get("tool_calls") or []:
            args_by_call[tc["id"]] = json.loads(tc["function"]["arguments"])
    carried: dict[tuple[int, str], int] = {}  # (turn, value key) -> origin of a P_o / P_u binding at that turn
    first_seen: dict[str, int] = {}  # value key -> reuse origin of its earliest binding
    nodes = []
    for entry in record["provenance"]:
        turn, args = entry["turn"], args_by_call[entry["call_id"]]
        for name, prov in entry["args"].items():
            tag, src = prov["tag"], prov.get("source") or {}
            key = value_key(args.get(name))
            origin = turn
            if tag in CARRIED and src.get("turn") is not None:
                origin = src["turn"]
                if tag == Tag.prev_output.value:
                    origin = min(origin, carried.get((origin, key), origin))
                carried[(turn, key)] = min(origin, carried.get((turn, key), origin))
            earlier = first_seen.get(key)
            reuse = origin if earlier is None else min(origin, earlier)
            announced = tag == Tag.prev_user_msg.value and earlier is None
            first_seen[key] = reuse
            nodes.append(ArgNode(turn, name, tag, origin, announced, reuse))
    return nodes


def lengths_summary(lengths: Counter[int]) -> dict[str, Any]:
    """Mean and max of chain lengths (counted: length -> arguments) and the share with L >= 1."""
    n = sum(lengths.values())
    return {"mean_chain_length": sum(k * v for k, v in lengths.items()) / n if n else 0.0,
            "max_chain_length": max((k for k, v in lengths.items() if v), default=0),
            "dependent_share": sum(v for k, v in lengths.items() if k >= 1) / n if n else 0.0}


def source_columns(tag_counts: Counter, extra: Sequence[str] = ()) -> dict[str, float]:
    """The source shares of SAP's Tables 5 and 6: P_i, P_o, P_c with P_u counted inside it, and P_f, plus any
    `extra` buckets (an inferred "unknown"); they sum to 1 over the arguments counted."""
    total = sum(tag_counts.values())
    counts = {"P_i": tag_counts[Tag.initial_state.value], "P_o": tag_counts[Tag.prev_output.value],
              "P_c": tag_counts[Tag.self_create.value] + tag_counts[Tag.prev_user_msg.value],
              "P_f": tag_counts[Tag.fallback.value], **{b: tag_counts[b] for b in extra}}
    return {k: (v / total if total else 0.0) for k, v in counts.items()}


CHAIN_GROUPS = ("output_derived", "user_derived", "announced")


def chain_groups(node: ArgNode) -> Iterator[str]:
    """The chain groups an argument counts in: `output_derived` (prev_output), `user_derived` (prev_user_msg) and,
    among those, `announced` (a value the user stated turns ahead of any call using it, "keep in mind for later")."""
    if node.tag == Tag.prev_output.value:
        yield "output_derived"
    if node.tag == Tag.prev_user_msg.value:
        yield "user_derived"
    if node.announced:
        yield "announced"


def chain_split(groups: dict[str, Counter[int]], arguments: int) -> dict[str, dict[str, Any]]:
    """Chain lengths apart by where the dependency comes from (`chain_groups`), from each group's counted chain
    lengths: per group its argument count, share of all `arguments`, mean and max L and the share with L >= 1."""
    return {name: {"arguments": sum(groups[name].values()),
                   "share": sum(groups[name].values()) / arguments if arguments else 0.0,
                   **lengths_summary(groups[name])} for name in CHAIN_GROUPS}


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
                         nodes=arg_nodes(record), tools={t["function"]["name"] for t in all_tools(record)},
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
    tag_counts: Counter = Counter()
    lengths: Counter[int] = Counter()
    reuse: Counter[int] = Counter()
    groups: dict[str, Counter[int]] = {name: Counter() for name in CHAIN_GROUPS}
    used: Counter = Counter()
    kinds: Counter = Counter()
    documented: set[str] | None = None
    n = turns = calls = parallel = 0
    parallel_known = False
    for s in summaries:  # one at a time: nothing per record or per argument is kept, only counts
        n += 1
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
            lengths[node.chain_length] += 1
            reuse[node.reuse_length] += 1
            for group in chain_groups(node):
                groups[group][node.chain_length] += 1
    n_args = sum(tag_counts.values())
    share = {t: (tag_counts[t] / n_args if n_args else 0.0) for t in tags}
    called = [c for c in used.values() if c > 0]
    return {
        "records": n,
        "arguments": n_args,
        "tag_distribution": share,
        "source_columns": source_columns(tag_counts, [t for t in tags if t not in SAP_TAGS]),
        "fallback_rate": share.get(Tag.fallback.value),
        **lengths_summary(lengths),
        "chain_length_counts": {str(k): v for k, v in sorted(lengths.items())},
        "chains": chain_split(groups, n_args),
        "value_reuse": lengths_summary(reuse),
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
    called at least once (None if none was), `uncalled_tools` counts the offered tools never called, and
    `word_pair_values` counts the user-created values that are generator word pairs (the last resort).
    """
    word_pairs = 0

    def summaries() -> Iterator[RecordSummary]:
        """Each record's summary, counting its word-pair values on the way (one pass: `records` may be a stream)."""
        nonlocal word_pairs
        for r in records:
            word_pairs += sum(is_word_pair(json.loads(tc["function"]["arguments"]).get(name))
                              for m in r["messages"] for tc in m.get("tool_calls") or []
                              for p in r["provenance"] if p["call_id"] == tc["id"]
                              for name, prov in p["args"].items() if prov["tag"] == Tag.self_create.value)
            yield sap_summary(r)

    stats = summarize(summaries(), [t.value for t in Tag])
    stats["word_pair_values"] = word_pairs
    if stats["tool_coverage"] is None:  # no records: sap records always carry their tools
        stats["tool_coverage"], stats["uncalled_tools"] = 0.0, 0
    return stats
