"""sap: synthesize multi-turn tool-use dialogues with executor-verified argument provenance.

The public names resolve on first use, so `import sap` stays light (no LangGraph, no LiteLLM)."""
from __future__ import annotations

from sap.lazy import lazy_exports
from sap.version import __version__ as __version__

_PUBLIC = {
    "synthesize": "sap.api", "resume": "sap.api", "list_runs": "sap.store.runs", "Run": "sap.api",
    "RunSettings": "sap.runs.settings", "AgentsConfig": "sap.agents.config", "derive_seed": "sap.runs.slots",
    "FSM": "sap.model", "ArgProvenance": "sap.model", "Tag": "sap.model", "ToolCall": "sap.model",
    "Toolset": "sap.model", "ToolSpec": "sap.model", "Trajectory": "sap.model", "Turn": "sap.model",
    "builtin_names": "sap.toolsets", "load_toolset": "sap.toolsets",
}

__all__ = sorted([*_PUBLIC, "__version__"])

__getattr__ = lazy_exports(__name__, _PUBLIC)
