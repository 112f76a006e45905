"""Transition conditions: the small language the FSM builders write and the walk evaluates.

A condition is empty (the edge may always be taken) or terms joined by " and ", each of which must hold:

- `after:T1|T2|...`: one of the tools was called earlier in the dialogue (earlier on the walked path, or before
  the walk's start when a dialogue is re-planned); authentication and must-precede rules are written so;
- `not after:T1|T2|...`: none of them was called yet (authenticate once);
- `confirmed`: the turn opens with the user's yes to the recap the turn before ended with, so the edge must
  leave a state of type ACTION_REQUIRED.

Older sap versions wrote a description instead ("user asks to get_order then cancel_order"); a condition that
opens with "user asks to " is read as that description and constrains nothing, so FSMs stored with older runs
still walk. Any other text is an error naming the transition.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

from sap.errors import SapError
from sap.model import FSM, StateType

AND = " and "
LEGACY_PREFIX = "user asks to "


class ConditionError(SapError, ValueError):
    """A transition condition outside the condition language."""


@dataclass(frozen=True)
class Condition:
    """A parsed condition: tool sets one of which must have run, tools none of which may have, and `confirmed`."""

    after: tuple[frozenset[str], ...] = ()
    not_after: frozenset[str] = frozenset()
    confirmed: bool = False

    def holds(self, seen: set[str] | frozenset[str], source_type: StateType) -> bool:
        """Whether the edge may be taken with `seen` tools called so far, from a state of `source_type`."""
        if self.confirmed and source_type != StateType.ACTION_REQUIRED:
            return False
        return all(seen & tools for tools in self.after) and not seen & self.not_after


def after(tools: Iterable[str]) -> str:
    """The term "one of `tools` was called earlier"."""
    return "after:" + "|".join(sorted(tools))


def not_after(tools: Iterable[str]) -> str:
    """The term "none of `tools` was called yet"."""
    return "not after:" + "|".join(sorted(tools))


def join(*terms: str) -> str:
    """The condition requiring every non-empty term (duplicates once, order kept)."""
    return AND.join(dict.fromkeys(t for t in terms if t))


def _tools(text: str, term: str) -> frozenset[str]:
    """The tool names of an after/not-after term; an empty name is an error."""
    names = text.split("|")
    if not all(n.strip() for n in names):
        raise ConditionError(f"term {term!r} names an empty tool")
    return frozenset(n.strip() for n in names)


@lru_cache(maxsize=4096)
def parse(text: str) -> Condition:
    """The condition `text` says; ConditionError naming the term that is not in the language."""
    text = text.strip()
    if not text or text.startswith(LEGACY_PREFIX):
        return Condition()
    afters: list[frozenset[str]] = []
    blocked: set[str] = set()
    confirmed = False
    for term in (t.strip() for t in text.split(AND)):
        if term == "confirmed":
            confirmed = True
        elif term.startswith("not after:"):
            blocked |= _tools(term[len("not after:"):], term)
        elif term.startswith("after:"):
            afters.append(_tools(term[len("after:"):], term))
        else:
            raise ConditionError(f"unknown term {term!r} (known: after:T|..., not after:T|..., confirmed)")
    return Condition(tuple(afters), frozenset(blocked), confirmed)


def condition_of(fsm: FSM, edge: int) -> Condition:
    """Transition `edge`'s parsed condition; ConditionError naming the transition when it is not in the language."""
    t = fsm.transitions[edge]
    try:
        return parse(t.condition)
    except ConditionError as exc:
        raise ConditionError(f"transition {edge} ({t.source!r} -> {t.target!r}, {' + '.join(t.action) or 'no call'}) "
                             f"condition {t.condition!r}: {exc}") from None


def allowed(fsm: FSM, edge: int, seen: set[str] | frozenset[str]) -> bool:
    """Whether transition `edge` may be taken after `seen` tools (its condition evaluated from its source)."""
    return condition_of(fsm, edge).holds(seen, fsm.state(fsm.transitions[edge].source).type)
