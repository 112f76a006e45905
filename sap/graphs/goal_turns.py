"""Goal-level turns from executed FSM turns: a turn whose calls only serve the next turn's (lookups whose results
it uses, authentication, preconditions) merges into it, so the user states the goal and the assistant works out
the steps; calls keep their executor order, and provenance, call ids and the virtual history follow the new turns."""
from __future__ import annotations

import random
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from sap.model import ArgProvenance, Tag, ToolCall, Trajectory, Turn
from sap.provenance.checks import statements
from sap.provenance.goals import prerequisites
from sap.provenance.jsonpath import resolve
from sap.provenance.selectors import output_selector, stated_selector

MAX_CALLS = 6  # a merged turn holds at most this many calls: one request a user would make in one message
PAIR_RATE = 0.7  # how often a turn independent of the one before is asked for in the same message


@dataclass(frozen=True)
class GoalTurns:
    """Merged turns, the virtual history re-anchored, and old turn index -> new turn index."""

    turns: list[Turn]
    virtual: list[dict[str, Any]]
    turn_of: dict[int, int]


def merge_goal_turns(turns: list[Turn], virtual: list[dict[str, Any]], requires: Mapping[str, Collection[str]],
                     writes: Collection[str], min_turns: int, rng: random.Random | None = None) -> GoalTurns:
    """The turns with each turn whose calls are all prerequisites of the next turn's merged into it (greedily,
    first to last, never below `min_turns` turns or above MAX_CALLS calls a turn), each turn's prerequisites
    marked (`Turn.prerequisites`). With `rng`, a turn independent of the one before (it uses nothing that turn
    found) also joins it at PAIR_RATE, once per turn, when no reference spans the two (a value found or said
    before them and used after stays as many turns back): the user asks for two things in one message."""
    groups: list[list[Turn]] = []
    paired: set[int] = set()  # groups that took a second request already
    spans = _references(turns)
    for n, turn in enumerate(turns):
        room = len(groups) + len(turns) - n - 1 >= min_turns
        if groups and room and _serves(groups[-1], turn, requires, writes):
            groups[-1].append(turn)
        elif groups and room and rng is not None and len(groups) - 1 not in paired and \
                _independent(groups[-1], turn, requires, writes) and \
                not any(src <= groups[-1][-1].index < use for src, use in spans) and rng.random() < PAIR_RATE:
            groups[-1].append(turn)
            paired.add(len(groups) - 1)
        else:
            groups.append([turn])
    return renumbered(groups, virtual, requires, writes)


def _references(turns: list[Turn]) -> set[tuple[int, int]]:
    """(source turn, using turn) of every argument taken from an earlier turn's result or statement: pairing two
    requests across such a span would shorten how far back the dialogue reaches (its chain length)."""
    return {(p.turn, t.index) for t in turns for c in t.calls for p in c.args_prov.values()
            if p.effective_tag() in (Tag.prev_output, Tag.prev_user_msg) and p.turn is not None and p.turn < t.index}


def _fit(group: list[Turn], turn: Turn) -> bool:
    """Whether `group` and `turn` both make calls and hold at most MAX_CALLS together."""
    size = sum(len(t.calls) for t in group)
    return bool(size and turn.calls) and size + len(turn.calls) <= MAX_CALLS


def _independent(group: list[Turn], turn: Turn, requires: Mapping[str, Collection[str]],
                 writes: Collection[str]) -> bool:
    """Whether `turn` can be asked for in the same message as `group` (its use of `group`'s results is ruled out by
    the caller's span check): they fit in one turn; `turn` prepares nothing (its preparation, a brake pressed
    again, could undo what `group` asked for) and calls no tool `group` calls (no "release the brake, then press
    it" in one message)."""
    return _fit(group, turn) and not prerequisites(turn.calls, turn.index, requires, writes) and \
        not {c.name for c in turn.calls} & {c.name for t in group for c in t.calls}


def _serves(group: list[Turn], turn: Turn, requires: Mapping[str, Collection[str]], writes: Collection[str]) -> bool:
    """Whether every call of `group` is a prerequisite of the turn the group and `turn` would make."""
    if not _fit(group, turn):
        return False
    size = sum(len(t.calls) for t in group)
    candidate = [*group, turn]  # numbered -1 here, a number no reference outside it holds
    calls = _joined(candidate, -1, _places([candidate], -1), {t.index: -1 for t in candidate})
    return set(range(size)) <= set(prerequisites(calls, -1, requires, writes))


def _places(groups: list[list[Turn]], first: int = 0) -> dict[tuple[int, int], tuple[int, int]]:
    """old (turn, call) -> new (turn, call) when each group becomes one turn, numbered from `first`."""
    where: dict[tuple[int, int], tuple[int, int]] = {}
    for n, group in enumerate(groups, start=first):
        places = [(t.index, i) for t in group for i in range(len(t.calls))]
        where.update({old: (n, j) for j, old in enumerate(places)})
    return where


def _joined(group: list[Turn], n: int, where: Mapping[tuple[int, int], tuple[int, int]],
            turn_of: Mapping[int, int]) -> list[ToolCall]:
    """The calls of a group as new turn `n`'s: renamed, their provenance pointing at the new turns."""
    return [_moved(c, n, where, turn_of).model_copy(update={"call_id": f"call_{n}_{j}"})
            for j, c in enumerate(c for t in group for c in t.calls)]


def renumbered(groups: list[list[Turn]], virtual: list[dict[str, Any]], requires: Mapping[str, Collection[str]],
               writes: Collection[str]) -> GoalTurns:
    """One turn per group (its calls in order, the last turn's state and transition), with call ids, provenance and
    the virtual history pointing at the new turns: a value stated earlier in what is now the same turn becomes a
    new value of that turn; selectors are worked out again for the new turns, as the code check expects them."""
    turn_of = {t.index: n for n, g in enumerate(groups) for t in g}
    where = _places(groups)
    out = [g[-1].model_copy(update={"index": n, "calls": _joined(g, n, where, turn_of)}) for n, g in enumerate(groups)]
    moved = [{**v, "turn": turn_of.get(v["turn"], v["turn"]),
              **({"used_at": turn_of[v["used_at"]]} if v.get("used_at") in turn_of else {})} for v in virtual]
    moved = [v for v in moved if v.get("used_at") != v["turn"]]  # now said in the turn that uses it
    out = _reselected(out, moved)
    out = [t.model_copy(update={"prerequisites": prerequisites(t.calls, t.index, requires, writes)}) for t in out]
    return GoalTurns(out, moved, turn_of)


def _moved(call: ToolCall, turn: int, where: Mapping[tuple[int, int], tuple[int, int]],
           turn_of: Mapping[int, int]) -> ToolCall:
    """The call in new turn `turn`, its provenance pointing at the new turns (a value stated in that same turn is
    a new value)."""
    prov = {}
    for name, p in call.args_prov.items():
        if p.turn is not None and p.call is not None and (p.turn, p.call) in where:
            new, index = where[(p.turn, p.call)]
            p = p.model_copy(update={"turn": new, "call": index})
        elif p.turn is not None and p.turn in turn_of:
            p = p.model_copy(update={"turn": turn_of[p.turn]})
            if p.tag == Tag.prev_user_msg and p.turn == turn:
                p = ArgProvenance(tag=Tag.self_create)
        prov[name] = p
    return call.model_copy(update={"args_prov": prov})


def _reselected(turns: list[Turn], virtual: list[dict[str, Any]]) -> list[Turn]:
    """The turns with each reference's selector worked out again on them (a source now in the using call's turn is
    one the user has not seen: named rather than placed; statements count before the using turn)."""
    traj = Trajectory(id="", toolset="", seed=0, c0={}, turns=turns, virtual_history=virtual)
    said = statements(traj)
    out = []
    for turn in turns:
        calls = []
        for index, call in enumerate(turn.calls):
            prov = {}
            for name, p in call.args_prov.items():
                value = call.arg_value(name)
                if p.tag == Tag.prev_output and p.path is not None:
                    src = turns[p.turn].calls[p.call]
                    earlier = [c.result for t, i, c in traj.calls() if (t, i) < (p.turn, p.call) and c.ok
                               and c.name == src.name]
                    later = [c.result for t, i, c in traj.calls() if (p.turn, p.call) < (t, i) < (turn.index, index)
                             and c.ok]
                    p = p.model_copy(update={"selector": output_selector(
                        src.result, p.path, resolve(src.result, p.path), p.turn == turn.index, earlier, later)})
                elif p.tag == Tag.prev_user_msg:
                    p = p.model_copy(update={"selector": stated_selector(
                        name, value, [s for s in said if s[0] < turn.index])})
                prov[name] = p
            calls.append(call.model_copy(update={"args_prov": prov}))
        out.append(turn.model_copy(update={"calls": calls}))
    return out
