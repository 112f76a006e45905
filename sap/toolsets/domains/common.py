"""Helpers the built-in domains share: structured tool errors and money rounding."""
from __future__ import annotations

import functools
from typing import Any, Callable

from sap.errors import SapError


class ToolError(SapError):
    """A user mistake, reported to the caller as {"error": message}."""


def tool_method(method: Callable[..., dict]) -> Callable[..., dict]:
    """Turn a ToolError raised by a tool method into an error result."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> dict:
        try:
            return method(self, *args, **kwargs)
        except ToolError as exc:
            return {"error": str(exc)}

    return wrapper


def money(value: float) -> float:
    """An amount rounded to cents (and never -0.0)."""
    return round(value + 0.0, 2)
