"""Exports: one OpenAI-messages JSONL record per trajectory."""
from sap.export.records import record_to_trajectory, to_record

__all__ = ["record_to_trajectory", "to_record"]
