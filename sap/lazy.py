"""Lazy package exports: a package's public names are imported from their modules on first use (PEP 562)."""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, origins: dict[str, str]) -> Callable[[str], Any]:
    """The module `__getattr__` of `package` that imports each public name from its module in `origins` when the
    name is first asked for, and keeps it in the package's namespace."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        if name not in origins:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(origins[name]), name)
        namespace[name] = value
        return value

    return __getattr__
