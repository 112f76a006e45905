"""sap: synthesize multi-turn tool-use dialogues with executor-verified argument provenance.

The public names resolve on first use, so `import sap` stays light (no LangGraph, no LiteLLM)."""
from __future__ import annotations

import importlib
from typing import Any

from sap.version import __version__ as __version__

_PUBLIC = {
    "synthesize": "sap.api", "resume": "sap.api", "list_runs": "sap.api", "Run": "sap.api",
    "RunSettings": "sap.runs.settings", "AgentsConfig": "sap.agents.config", "derive_seed": "sap.runs.slots",
    "FSM": "sap.model", "ArgProvenance": "sap.model", "Tag": "sap.model", "ToolCall": "sap.model",
    "Toolset": "sap.model", "ToolSpec": "sap.model", "Trajectory": "sap.model", "Turn": "sap.model",
    "builtin_names": "sap.toolsets", "load_toolset": "sap.toolsets",
}

__all__ = sorted([*_PUBLIC, "__version__"])


def __getattr__(name: str) -> Any:
    """Import a public name's module the first time the name is asked for."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'sap' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value
