"""sap's exception root and its families: every error sap raises on purpose is a `SapError`, so a caller (the CLI
above all) catches one class and prints one line. Classes that also derive from a builtin (ValueError,
LookupError, RuntimeError, ImportError) keep that base for callers that catch it."""
from __future__ import annotations


class SapError(Exception):
    """Any error sap raises on purpose; its message is one line a user can act on."""


class UsageError(SapError):
    """Bad command-line input: printed as one line, exit code 2."""


class ToolsetError(SapError):
    """A toolset that cannot be found, read or loaded."""


class StoreError(SapError, RuntimeError):
    """The run database cannot be used (unreadable, foreign, locked, full, unreachable, missing)."""


class ExportError(SapError, ValueError):
    """A record that cannot be written in (or read back from) an export format."""


class MissingExtra(SapError, ImportError):
    """An optional dependency (a pip extra) that a command needs is not installed."""


class ConfigError(SapError, ValueError):
    """A configuration or input file that cannot be used; the message names the file, the field and the value."""
