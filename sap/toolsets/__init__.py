"""Toolsets: tool-doc loaders, the built-in domains, and `load_toolset` over the table of toolset kinds."""
from __future__ import annotations

from sap.toolsets.bfcl import bfcl_names
from sap.toolsets.errors import (
    DataNamesCode,
    DomainModuleError,
    ToolsetUnavailable,
    UnknownToolset,
)
from sap.toolsets.kinds import (
    BUILTIN_MODULES,
    KINDS,
    TAU2_NAMES,
    ToolsetKind,
    data_toolset_name,
    kind_of,
    load_toolset,
    toolset_for_data,
)
from sap.toolsets.loaders import ToolDocError, load_tool_docs, tools_from_class
from sap.toolsets.modules import toolset_from_module
from sap.toolsets.tau2_bench import Tau2Unavailable

__all__ = [
    "BUILTIN_MODULES",
    "KINDS",
    "TAU2_NAMES",
    "DataNamesCode",
    "DomainModuleError",
    "Tau2Unavailable",
    "ToolDocError",
    "ToolsetKind",
    "ToolsetUnavailable",
    "UnknownToolset",
    "bfcl_names",
    "builtin_names",
    "data_toolset_name",
    "kind_of",
    "load_tool_docs",
    "load_toolset",
    "tools_from_class",
    "toolset_for_data",
    "toolset_from_module",
]


def builtin_names() -> list[str]:
    """Names of sap's own built-in toolsets."""
    return sorted(BUILTIN_MODULES)
