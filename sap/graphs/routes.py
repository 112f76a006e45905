"""Ways through a scope (a file system's folders): a move of the current folder goes up first where the folder it
was bound to is not below the current one, and a call whose name is in another folder may take several moves."""
from __future__ import annotations

from typing import Any

from sap.agents.planner import PlanRequest, done_calls
from sap.text import error_names
from sap.jsonutil import holds_key
from sap.model import ArgProvenance, Scope, Tag, ToolCall
from sap.provenance.jsonpath import holds_below

MAX_MOVES = 4  # moves of the current folder inserted before one call (up twice, down twice)


def settled(scope: Scope | None, before: list[str]) -> list[str]:
    """The tools run before a call in its turn that its prerequisites may not repeat: all of them, but the moves of
    the current folder while fewer than MAX_MOVES were made (each move is one folder of the way)."""
    if scope is None or sum(map(scope.moves, before)) >= MAX_MOVES:
        return before
    return [t for t in before if not scope.moves(t)]


def worth_moving(scope: Scope, c0: dict[str, Any], before: list[ToolCall], turn: list[ToolCall],
                 error: str | None) -> bool:
    """Whether another move of the current folder can help the call that failed with `error`: what the error is about
    is in another folder of c0's tree than the current one (never where the turn's moves already were, which would
    circle); a name c0 does not hold (made in the dialogue) allows the turn's first move only."""
    here = scope.current(before + turn)
    places = {scope.where(c0, name) for name in error_names(error)} - {None}
    if not places:
        return not any(scope.moves(c.name) for c in turn)
    return bool(places - {here}) and not circles(scope, before, turn)


def circles(scope: Scope, before: list[ToolCall], turn: list[ToolCall]) -> bool:
    """Whether the moves of the current folder in this turn's calls (`turn`, after the earlier turns' `before`)
    came back to a folder they had been in: another move would only wander."""
    visited = [scope.current(before)] + [scope.current(before + turn[:k + 1]) for k, c in enumerate(turn)
                                         if scope.moves(c.name) and c.ok]
    return len(set(visited)) < len(visited)


def route_values(req: PlanRequest, args_exec: dict[str, Any], args_prov: dict[str, ArgProvenance]) -> None:
    """Set (in place) a move of the current folder to the scope's `up` move (`..`, which the user states) where the
    folder bound is not below the current one (a name of c0's tree elsewhere, or a new one: none is left here),
    or does not lead to what the last error could not find."""
    scope = req.scope
    if scope is None or not scope.moves(req.spec.name):
        return
    here = scope.current([h.call for h in done_calls(req.history)])
    quoted = error_names(req.last_error)
    for name, prov in list(args_prov.items()):
        folder = scope.folder_of(prov.path or "")
        if not here or (folder is None and prov.path):  # a listing's name: the planner took one of this folder
            continue
        leads = folder is not None and (not holds_key(req.c0, quoted) or holds_below(req.c0, prov.path or "", quoted))
        if folder != here or not leads:
            args_exec[name] = scope.up
            args_prov[name] = ArgProvenance(tag=Tag.self_create)
