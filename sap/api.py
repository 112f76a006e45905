"""The Python entry points: synthesize records for a toolset, one graph thread per trajectory slot."""
from __future__ import annotations

import hashlib
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from sap.graphs.synthesis import SynthesisContext, synthesis_graph
from sap.model import Toolset
from sap.toolsets import load_toolset


def derive_seed(run_seed: int, index: int) -> int:
    """The trajectory seed of slot `index`: stable across runs, machines and Python versions."""
    return int.from_bytes(hashlib.sha256(f"sap:{run_seed}:{index}".encode()).digest()[:8], "big")


@dataclass
class SynthesisSummary:
    """What a run produced: the accepted records and why the other slots were dropped."""

    records: list[dict[str, Any]] = field(default_factory=list)
    attempted: int = 0
    truncated: int = 0
    dropped: Counter = field(default_factory=Counter)
    rejections: list[dict[str, Any]] = field(default_factory=list)  # every dropped slot: index, reason, verdict

    @property
    def accepted(self) -> int:
        """Number of accepted records."""
        return len(self.records)


def reason_kind(reason: str) -> str:
    """A drop reason without its per-trajectory details, for the summary."""
    if reason.startswith("code check"):
        return "code check failed"
    if reason.startswith("judge"):
        return reason.split(":")[0] + ": " + reason.split(":")[1].strip()
    if "failed" in reason and "times" in reason:
        return f"{reason.split(' failed')[0]} kept failing before 2 turns"
    return reason


KINDS = ("base", "miss_param", "miss_func")


def parse_mix(text: str) -> dict[str, float]:
    """`base=0.6,miss_param=0.2,miss_func=0.2` -> shares; raises ValueError naming a bad part."""
    mix: dict[str, float] = {}
    for part in text.split(","):
        name, _, share = part.partition("=")
        name = name.strip()
        if name not in KINDS:
            raise ValueError(f"--mix: unknown kind {name!r}; kinds are {', '.join(KINDS)}")
        try:
            mix[name] = float(share)
        except ValueError:
            raise ValueError(f"--mix: share of {name} is not a number: {share!r}") from None
        if mix[name] < 0:
            raise ValueError(f"--mix: share of {name} is negative")
    if sum(mix.values()) <= 0:
        raise ValueError("--mix: shares add up to zero")
    return mix


def slot_kind(mix: dict[str, float], run_seed: int, index: int) -> str:
    """The kind slot `index` asks for, drawn from the mix with a seed of its own."""
    kinds = [k for k in KINDS if mix.get(k, 0) > 0]
    return random.Random(f"sap-kind:{run_seed}:{index}").choices(kinds, weights=[mix[k] for k in kinds])[0]


def slot_input(run_seed: int, index: int, histogram: Counter, mix: dict[str, float] | None) -> dict[str, Any]:
    """The synthesis graph's input for slot `index`: its seed, the run's tool histogram so far, its kind."""
    return {"index": index, "seed": derive_seed(run_seed, index), "tool_histogram": dict(histogram),
            "kind": slot_kind(mix, run_seed, index) if mix else "base"}


def synthesize(toolset: Toolset | str, n: int, seed: int = 0, *, max_slots: int | None = None,
               mix: dict[str, float] | None = None,
               on_record: Callable[[dict[str, Any]], None] | None = None,
               on_slot: Callable[[int, str], None] | None = None, **context: Any) -> SynthesisSummary:
    """Synthesize `n` accepted trajectories for `toolset`; slots run in index order with seeds from (seed, index)."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    ts = load_toolset(toolset) if isinstance(toolset, str) else toolset
    ctx = SynthesisContext(toolset=ts, run_seed=seed, **context)
    graph = synthesis_graph(ctx)
    summary = SynthesisSummary()
    limit = max_slots if max_slots is not None else 5 * n + 20
    index = 0
    histogram: Counter = Counter()  # H: tool calls in the accepted records so far (long-tail emphasis)
    while summary.accepted < n and index < limit:
        out = graph.invoke(slot_input(seed, index, histogram, mix))
        summary.attempted += 1
        if out.get("record") is not None:
            summary.records.append(out["record"])
            histogram.update(p["name"] for p in out["record"]["provenance"])
            summary.truncated += out["status"] == "truncated"
            if on_record is not None:
                on_record(out["record"])
        else:
            summary.dropped[reason_kind(out.get("drop_reason") or "unknown")] += 1
            summary.rejections.append({"index": index, "reason": out.get("drop_reason"), "verdict": out.get("verdict")})
        if on_slot is not None:
            on_slot(index, out["status"])
        index += 1
    return summary
