"""What a messenger gets to write a MissParam pair of user turns: the request that leaves values out (worded as a
natural underspecified request, with no hint that they follow) and the follow-up that gives them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sap.model import ToolSpec, Turn


@dataclass(frozen=True)
class WithheldValue:
    """One value the user leaves out: the parameters it fills, their plain words and the value."""

    params: tuple[str, ...]
    noun: str
    value: Any


@dataclass(frozen=True)
class WithheldRequest:
    """The base turn whose values go missing, what went before it, the values left out per call and in words, the
    values it states ahead for later turns, and the rule texts (user_k, user_next) that stand without a writer."""

    turn: Turn
    earlier: list[Turn]  # the turns before it, in order
    withheld: dict[tuple[int, int], frozenset[str]]  # (turn, call) -> parameters left out there
    values: list[WithheldValue]
    specs: dict[str, ToolSpec]
    virtual: list[dict[str, Any]] = field(default_factory=list)
    template: tuple[str, str] = ("", "")
