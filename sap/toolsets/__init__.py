"""Toolsets: tool-doc loaders, the built-in domains and `load_toolset` by name or path."""
from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType

from sap.executors import PythonObjectExecutor
from sap.model import Toolset
from sap.toolsets.bfcl import BfclUnavailable, bfcl_names, is_bfcl_name, load_bfcl_toolset
from sap.toolsets.loaders import ToolDocError, load_tool_docs, tools_from_class
from sap.toolsets.tau2_bench import TOOLSET_NAMES as TAU2_NAMES
from sap.toolsets.tau2_bench import Tau2Unavailable, load_tau2_toolset

BUILTIN_MODULES = {
    "filesystem": "sap.toolsets.domains.filesystem",
    "store": "sap.toolsets.domains.store",
    "travel": "sap.toolsets.domains.travel",
}

__all__ = ["BUILTIN_MODULES", "TAU2_NAMES", "Tau2Unavailable", "ToolDocError", "UnknownToolset", "bfcl_names",
           "builtin_names", "load_tool_docs", "load_toolset", "toolset_from_module", "toolset_names", "tools_from_class"]


class UnknownToolset(LookupError):
    """A toolset name that is neither built in nor a readable domain module."""


def builtin_names() -> list[str]:
    """Names of sap's own built-in toolsets."""
    return sorted(BUILTIN_MODULES)


def toolset_names() -> list[str]:
    """Every toolset loadable by name: sap's own, then tau2-bench's (usable once tau2-bench is installed)."""
    return builtin_names() + list(TAU2_NAMES)


def toolset_from_module(module: ModuleType, timeout: float = 5.0) -> Toolset:
    """A toolset from a domain module defining NAME, DESCRIPTION, TOOL_CLASS and sample_config(seed).

    A module may set ERROR_RESULTS_CHANGE_NOTHING = True when its tests show that a returned {"error": ...}
    never changes state; its executors then skip the rollback replay after such results.
    """
    missing = [a for a in ("NAME", "TOOL_CLASS", "sample_config") if not hasattr(module, a)]
    if missing:
        raise ToolDocError(f"domain module lacks {', '.join(missing)}", file=getattr(module, "__file__", None))
    cls = module.TOOL_CLASS
    trusted = bool(getattr(module, "ERROR_RESULTS_CHANGE_NOTHING", False))
    return Toolset(
        name=module.NAME,
        description=getattr(module, "DESCRIPTION", ""),
        tools=tools_from_class(cls),
        executor_factory=lambda: PythonObjectExecutor([cls], timeout=timeout, trust_error_results=trusted),
        sample_config=module.sample_config,
    )


def _module_from_path(path: Path) -> ModuleType:
    """Import a Python file as a domain module."""
    spec = importlib.util.spec_from_file_location(f"sap_user_domain_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise UnknownToolset(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_toolset(name_or_path: str, timeout: float = 5.0) -> Toolset:
    """A built-in toolset by name, a BFCL toolset (`bfcl/A+B`), or a domain module from a `.py` file path."""
    if is_bfcl_name(name_or_path):
        try:
            return load_bfcl_toolset(name_or_path, timeout)
        except (BfclUnavailable, ValueError) as exc:
            raise UnknownToolset(str(exc)) from None
    if name_or_path in BUILTIN_MODULES:
        return toolset_from_module(importlib.import_module(BUILTIN_MODULES[name_or_path]), timeout)
    if name_or_path in TAU2_NAMES:
        return load_tau2_toolset(name_or_path)
    path = Path(name_or_path)
    if path.suffix == ".py" and path.is_file():
        return toolset_from_module(_module_from_path(path), timeout)
    if path.suffix in (".json", ".jsonl") and path.is_file():
        raise UnknownToolset(
            f"{path}: tool docs alone cannot be executed; give a domain module (.py) whose class implements them")
    raise UnknownToolset(f"unknown toolset {name_or_path!r}; built-in: {', '.join(toolset_names())}, "
                         f"or bfcl/<classes> (see `sap toolsets`)")
