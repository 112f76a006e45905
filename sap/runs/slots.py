"""What a run's slots are: the seed of each slot, the mix of record kinds, a slot's graph input, drop-reason kinds."""
from __future__ import annotations

import hashlib
import random
import threading
from collections import Counter
from typing import Any, Callable, Iterable

from sap.drops import DropReason


def derive_seed(run_seed: int, index: int) -> int:
    """The trajectory seed of slot `index`: stable across runs, machines and Python versions."""
    return int.from_bytes(hashlib.sha256(f"sap:{run_seed}:{index}".encode()).digest()[:8], "big")


def reason_kind(rejection: dict[str, Any]) -> str:
    """The summary line of a rejection (a stored row, or a slot's graph output): its DropReason's value."""
    return rejection.get("kind") or DropReason.of_text(rejection.get("reason") or "").value


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


EMPHASIS_BLOCK = 32  # slots per emphasis block: every slot of a block reads the same tool histogram H
EMPHASIS_LAG = 1  # H of block b counts the accepted records of blocks before b - EMPHASIS_LAG


def histogram_bound(index: int) -> int:
    """Slot `index` reads H from the accepted records of the slots below this index (a block boundary), so its
    emphasis depends on the seed and on slots fixed by the schedule, never on which slots finished first."""
    return max(0, (index // EMPHASIS_BLOCK - EMPHASIS_LAG) * EMPHASIS_BLOCK)


class ScheduledHistogram:
    """H at each schedule bound, kept incrementally: H(bound) = H(the nearest lower bound known) + the tool calls
    of the accepted records between the two, read once per bound (not re-summed per slot)."""

    def __init__(self, calls_between: Callable[[int, int], Iterable[dict[str, int]]]) -> None:
        self._calls_between = calls_between  # (lo, hi) -> tool calls of each accepted record with lo <= index < hi
        self._at: dict[int, Counter] = {0: Counter()}
        self._lock = threading.Lock()

    def for_slot(self, index: int) -> Counter:
        """H for slot `index` (the caller makes sure every slot below its bound has finished)."""
        bound = histogram_bound(index)
        with self._lock:
            if bound not in self._at:
                below = max(b for b in self._at if b < bound)
                histogram = Counter(self._at[below])
                for calls in self._calls_between(below, bound):
                    histogram.update(calls)
                self._at[bound] = histogram
            return self._at[bound]


def slot_input(run_seed: int, index: int, histogram: Counter, mix: dict[str, float] | None) -> dict[str, Any]:
    """The synthesis graph's input for slot `index`: its seed, the run's scheduled tool histogram, its kind."""
    return {"index": index, "seed": derive_seed(run_seed, index), "tool_histogram": dict(histogram),
            "kind": slot_kind(mix, run_seed, index) if mix else "base"}


