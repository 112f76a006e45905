"""The toolset kinds, one table: how each recognises a name, loads it and lists its names, and whether loading it
runs user code (only such kinds may never be named by data)."""
from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sap.model import Toolset
from sap.toolsets.bfcl import bfcl_names, is_bfcl_name, load_bfcl_toolset
from sap.toolsets.errors import DataNamesCode, UnknownToolset
from sap.toolsets.mcp import load_mcp_toolset
from sap.toolsets.modules import module_from_path, toolset_from_module
from sap.toolsets.tau2_bench import TOOLSET_NAMES as TAU2_NAMES
from sap.toolsets.tau2_bench import load_tau2_toolset

BUILTIN_MODULES = {
    "filesystem": "sap.toolsets.domains.filesystem",
    "store": "sap.toolsets.domains.store",
    "travel": "sap.toolsets.domains.travel",
}
TOOL_DOC_SUFFIXES = (".json", ".jsonl")


@dataclass(frozen=True)
class LoadOptions:
    """What loading a toolset may need besides its name: the executor timeout, and how to open a `cache:NAME`
    (a cache lives in a run database, which only the caller knows)."""

    timeout: float = 5.0
    open_cache: Callable[[str], Toolset] | None = None


@dataclass(frozen=True)
class ToolsetKind:
    """One kind of toolset: its name form (for messages and help), how a name of it is recognised and loaded, the
    names `sap toolsets` lists, and whether loading it imports user code."""

    form: str
    recognises: Callable[[str], bool]
    load: Callable[[str, LoadOptions], Toolset]
    names: Callable[[], Sequence[str]]
    runs_user_code: bool


def _load_builtin(name: str, options: LoadOptions) -> Toolset:
    """One of sap's own domain modules."""
    return toolset_from_module(importlib.import_module(BUILTIN_MODULES[name]), options.timeout)


def _load_bfcl(name: str, options: LoadOptions) -> Toolset:
    """A BFCL toolset; a bad class list is an UnknownToolset naming it."""
    try:
        return load_bfcl_toolset(name, options.timeout)
    except ValueError as exc:
        raise UnknownToolset(str(exc)) from None


def _load_tau2(name: str, options: LoadOptions) -> Toolset:
    """A tau2-bench domain (its executor has no timeout of its own)."""
    return load_tau2_toolset(name)


def _load_cache(name: str, options: LoadOptions) -> Toolset:
    """A cache of a run database, opened by the caller's `open_cache`."""
    if options.open_cache is None:
        raise UnknownToolset(f"{name}: a cache toolset lives in a run database, which this command does not open")
    return options.open_cache(name.split(":", 1)[1])


def _load_module(name: str, options: LoadOptions) -> Toolset:
    """A domain module from a .py file: imports (runs) the file."""
    return toolset_from_module(module_from_path(Path(name)), options.timeout)


def _load_mcp(name: str, options: LoadOptions) -> Toolset:
    """MCP servers from a config file: starts them (runs their code) to list their tools."""
    return load_mcp_toolset(name, options.timeout)


def _load_tool_docs(name: str, options: LoadOptions) -> Toolset:
    """Tool docs describe tools but cannot run them: the error says what to give instead."""
    raise UnknownToolset(f"{name}: tool docs alone cannot be executed; give a domain module (.py) whose class "
                         f"implements them")


def _none() -> Sequence[str]:
    """No listed names (a kind named by path or by database)."""
    return ()


KINDS: tuple[ToolsetKind, ...] = (
    ToolsetKind(", ".join(BUILTIN_MODULES), lambda n: n in BUILTIN_MODULES, _load_builtin,
                lambda: sorted(BUILTIN_MODULES), runs_user_code=False),
    ToolsetKind("tau2/<domain>", lambda n: n in TAU2_NAMES, _load_tau2, lambda: TAU2_NAMES, runs_user_code=False),
    ToolsetKind("bfcl/<classes>", is_bfcl_name, _load_bfcl, bfcl_names, runs_user_code=False),
    ToolsetKind("cache:NAME", lambda n: n.startswith("cache:"), _load_cache, _none, runs_user_code=False),
    ToolsetKind("mcp:CONFIG.json (MCP servers)", lambda n: n.startswith("mcp:"), _load_mcp, _none,
                runs_user_code=True),
    ToolsetKind("PATH.py (domain module)", lambda n: n.endswith(".py"), _load_module, _none, runs_user_code=True),
    ToolsetKind("PATH.json|PATH.jsonl (tool docs)", lambda n: n.lower().endswith(TOOL_DOC_SUFFIXES), _load_tool_docs,
                _none, runs_user_code=False),
)


def kind_of(name: str) -> ToolsetKind | None:
    """The kind that recognises `name`, or None."""
    return next((kind for kind in KINDS if kind.recognises(name)), None)


def forms() -> str:
    """The name forms of every kind, for messages: the built-in (listed) ones, then the others."""
    listed = ", ".join(kind.form for kind in KINDS if kind.names())
    return f"built-in: {listed}; or {', '.join(kind.form for kind in KINDS if not kind.names())}"


def load_toolset(name_or_path: str, timeout: float = 5.0, *,
                 open_cache: Callable[[str], Toolset] | None = None) -> Toolset:
    """The toolset a name or path given by the user (command line or API call) names, by the kind recognising it."""
    kind = kind_of(name_or_path)
    if kind is None:
        raise UnknownToolset(f"unknown toolset {name_or_path!r}; {forms()} (see `sap toolsets`)")
    toolset = kind.load(name_or_path, LoadOptions(timeout, open_cache))
    if kind.runs_user_code:  # named by a file: remembered so a resume command can name it from anywhere
        toolset.source = absolute_source(name_or_path)
    return toolset


def absolute_source(name_or_path: str) -> str:
    """A toolset name that is a file (PATH.py, mcp:PATH) with its path made absolute."""
    prefix = "mcp:" if name_or_path.startswith("mcp:") else ""
    return prefix + os.path.abspath(name_or_path[len(prefix):])


def data_toolset_name(name: str | None, given: str | None, field: str = "meta.toolset") -> str:
    """The toolset to read data with: `given` (from --toolset or the API call), else `name`, read from the data's
    `field`, which may name only a kind that runs no user code: data never names code."""
    if given:
        return given
    if not name:
        raise UnknownToolset(f"record has no {field}; pass --toolset")
    kind = kind_of(name)
    if kind is None:
        raise UnknownToolset(f"{field} {name!r} is not a built-in toolset; for the data of a domain module, pass "
                             f"the module's path: --toolset PATH")
    if kind.runs_user_code:
        raise DataNamesCode(f"{field} {name!r} names code to run ({kind.form}); sap runs no code named by data: "
                            f"if you trust it, pass --toolset {name}")
    return name


def toolset_for_data(name: str | None, given: str | None, where: str, loaded: dict[str, Toolset],
                     open_cache: Callable[[str], Toolset] | None = None) -> Toolset:
    """The toolset to read one record with (`given`, else the data's `name`, as `data_toolset_name` allows), loaded
    once into `loaded`; an error about a name the data gave starts with `where` (file:line)."""
    try:
        chosen = data_toolset_name(name, given)
        if chosen not in loaded:
            loaded[chosen] = load_toolset(chosen, open_cache=open_cache)
    except UnknownToolset as exc:
        if given:
            raise
        raise type(exc)(f"{where}: {exc}") from None
    return loaded[chosen]
