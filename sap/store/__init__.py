"""Persistence: the SQLAlchemy run store and the LangGraph checkpointer on the same database (names resolve on
first use, so the command line's help loads no SQLAlchemy)."""
from sap.lazy import lazy_exports

_PUBLIC = dict.fromkeys(["RunConflict", "RunStore", "StoreError"], "sap.store.runs")

__all__ = sorted(_PUBLIC)

__getattr__ = lazy_exports(__name__, _PUBLIC)
