"""Exports: one OpenAI-messages JSONL record per trajectory (names resolve on first use: listing the formats loads
no record model)."""
from sap.lazy import lazy_exports

_PUBLIC = dict.fromkeys(["record_to_trajectory", "to_record"], "sap.export.records")

__all__ = sorted(_PUBLIC)

__getattr__ = lazy_exports(__name__, _PUBLIC)
