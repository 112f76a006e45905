"""Why a toolset name cannot be loaded: unknown, not installed, a broken domain module, or code named by data."""
from __future__ import annotations

from sap.errors import ToolsetError


class UnknownToolset(ToolsetError, LookupError):
    """A toolset name that no toolset kind can load; the message says which names are possible."""


class ToolsetUnavailable(UnknownToolset):
    """A toolset whose package (bfcl-eval, tau2-bench) is not installed; the message gives the install command."""


class DomainModuleError(UnknownToolset):
    """A domain module that fails to import: `file:line: ExceptionType: message`, one line."""


class DataNamesCode(UnknownToolset):
    """A record's meta.toolset names code to run (a domain module path); code is only taken from --toolset."""
