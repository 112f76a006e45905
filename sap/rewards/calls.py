"""Ground-truth and predicted calls, argument normalization and the provenance groups of arguments."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from sap.model import Tag, Trajectory
from sap.provenance.checks import normalize_text

ArgGroup = Literal["query", "dependent", "other"]
QUERY_TAGS = frozenset({Tag.self_create.value, Tag.initial_state.value})
DEPENDENT_TAGS = frozenset({Tag.prev_output.value, Tag.prev_user_msg.value})
GROUPS: tuple[ArgGroup, ...] = ("query", "dependent", "other")


def arg_group(tag: str | None) -> ArgGroup:
    """`query` for values from the request or the initial state (self_create, initial_state), `dependent` for
    values carried over from earlier results or messages (prev_output, prev_user_msg), `other` otherwise
    (no or unknown provenance, or an argument the ground truth does not have)."""
    if tag in QUERY_TAGS:
        return "query"
    if tag in DEPENDENT_TAGS:
        return "dependent"
    return "other"


@dataclass(frozen=True)
class GoldCall:
    """One ground-truth call: function, arguments, each argument's provenance tag (the effective tag of a
    fallback; absent when unknown) and, per argument carried over from an earlier result, the (turn, call)
    of the ground-truth call that produced it: the provenance edges R_orch checks."""

    name: str
    args: dict[str, Any]
    tags: dict[str, str] = field(default_factory=dict)
    sources: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class PredCall:
    """One call the model made, and whether the executor accepted it."""

    name: str
    args: dict[str, Any]
    ok: bool = True
    error: str | None = None


def normalize_value(value: Any) -> Any:
    """A canonical, hashable form for comparing argument values.

    Strings: case-folded, whitespace collapsed and trimmed; a string that reads as a finite number is that
    number. Numbers: as floats (so 2 == 2.0 == "2"). Booleans stay booleans (True != 1). A one-item list is
    its item; other lists keep their order; dicts compare by key. None is None.
    """
    if isinstance(value, bool) or value is None:
        return ("const", value)
    if isinstance(value, (int, float)):
        return ("num", float(value))
    if isinstance(value, str):
        text = normalize_text(value)
        try:
            number = float(text)
        except ValueError:
            return ("str", text)
        return ("num", number) if math.isfinite(number) else ("str", text)
    if isinstance(value, (list, tuple)):
        if len(value) == 1:
            return normalize_value(value[0])
        return ("list", tuple(normalize_value(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), normalize_value(v)) for k, v in value.items())))
    return ("other", repr(value))


def values_match(gold: Any, pred: Any) -> bool:
    """Whether two argument values are equal after `normalize_value`."""
    return normalize_value(gold) == normalize_value(pred)


def arg_hits(gold: GoldCall, pred: PredCall) -> dict[str, tuple[ArgGroup, bool]]:
    """Per argument name (the ground truth's and any extra the model passed): its group and whether it matches.

    An argument of the ground truth matches when the model passed an equal value; an extra argument never
    matches and falls in the `other` group."""
    hits: dict[str, tuple[ArgGroup, bool]] = {
        name: (arg_group(gold.tags.get(name)), name in pred.args and values_match(value, pred.args[name]))
        for name, value in gold.args.items()}
    for name in pred.args:
        if name not in gold.args:
            hits[name] = ("other", False)
    return hits


def arg_share(gold: GoldCall, pred: PredCall) -> float:
    """The share of matching arguments among the ground truth's and the extra ones; 1.0 when neither has any."""
    hits = arg_hits(gold, pred)
    return sum(ok for _, ok in hits.values()) / len(hits) if hits else 1.0


def exact(gold: GoldCall, pred: PredCall) -> bool:
    """Same function and every argument matching, none extra."""
    return gold.name == pred.name and arg_share(gold, pred) == 1.0


def gold_turns(traj: Trajectory) -> list[list[GoldCall]]:
    """The ground-truth calls of a trajectory per turn, each argument tagged with its effective provenance and,
    for an argument taken from an earlier result, the (turn position, call) of its source."""
    position = {turn.index: t for t, turn in enumerate(traj.turns)}
    return [[GoldCall(c.name, dict(c.args_exec), {k: p.effective_tag().value for k, p in c.args_prov.items()},
                      {k: (position[p.turn], p.call) for k, p in c.args_prov.items()
                       if p.effective_tag() == Tag.prev_output and p.turn in position and p.call is not None})
             for c in turn.calls] for turn in traj.turns]
