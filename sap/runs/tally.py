"""The figures of a run's summary, counted in one pass over its records so a run of any size is summarized in
flat memory."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sap.model import Tag


@dataclass
class RecordTally:
    """Counts over accepted records: truncated ones, kinds, unkept rewrites, arguments and P_f fallbacks."""

    records: int = 0
    truncated: int = 0
    unkept_rewrites: int = 0
    arguments: int = 0
    fallbacks: int = 0
    kinds: Counter[str] = field(default_factory=Counter)

    @classmethod
    def of(cls, records: Iterable[dict[str, Any]]) -> RecordTally:
        """The tally of `records` (consumed once)."""
        tally = cls()
        for record in records:
            tally.add(record)
        return tally

    def add(self, record: dict[str, Any]) -> None:
        """Count one record."""
        meta = record["meta"]
        self.records += 1
        self.truncated += bool(meta.get("truncated"))
        self.unkept_rewrites += bool(meta.get("rewrite_rejection"))
        self.kinds[meta["kind"]] += 1
        for call in record["provenance"]:
            for prov in call["args"].values():
                self.arguments += 1
                self.fallbacks += prov["tag"] == Tag.fallback.value

    @property
    def fallback_rate(self) -> float:
        """The share of arguments whose declared source was unusable (P_f), as `sap stats` counts it."""
        return self.fallbacks / self.arguments if self.arguments else 0.0
