"""Persistence: the SQLAlchemy run store and the LangGraph checkpointer on the same database."""
from sap.store.runs import RunConflict, RunStore, StoreError

__all__ = ["RunConflict", "RunStore", "StoreError"]
