"""Path re-planner role: after a tool kept failing, re-plan the rest of the FSM path from where the kept turns
ended, around a blacklist of failing tools; the rule re-planner walks the FSM, the LLM one picks transitions
from a numbered list of those reachable from the current state."""
from __future__ import annotations

import random
import re
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, Field

from sap.agents.llm_common import LLMRole
from sap.llm.schema import closed
from sap.fsm.conditions import allowed
from sap.fsm.prerequisites import words
from sap.fsm.walk import NoPathError
from sap.fsm.walk import sample_path as walk
from sap.llm import LLMRoleError
from sap.model import FSM, Tag, ToolSpec, Turn


@dataclass(frozen=True)
class ReplanRequest:
    """What a re-planner sees: the FSM, the path so far, the kept turns, the blacklist and the turn limits."""

    fsm: FSM
    path: list[int]  # the path being followed; its first len(kept) transitions are kept
    kept: list[Turn]
    blacklist: frozenset[str]
    min_turns: int
    max_turns: int
    rng: random.Random

    @property
    def start(self) -> str:
        """The state the re-planned part starts from."""
        return self.kept[-1].state if self.kept else self.fsm.initial

    @property
    def lengths(self) -> tuple[int, int]:
        """How many transitions the re-planned part may have."""
        done = len(self.kept)
        return max(1, self.min_turns - done), max(1, self.max_turns - done)


def refused_kin(tool: str, error: str, specs: Mapping[str, ToolSpec]) -> set[str]:
    """The other tools that need the state an error refused `tool` for: "order '#W1' is 'cancelled'; only pending
    orders allow this action" for modify_pending_order_payment refuses every tool whose name says "pending" (no
    pending order is left to act on), by the words the error shares with the tool's name beyond its verb and the
    thing its id parameters name ("order"); none when the error names the tool itself (a repeated call)."""
    if tool not in specs or tool in error:
        return set()
    verb = next(iter(re.findall(r"[a-z]+", re.sub(r"([a-z])([A-Z])", r"\1 \2", tool).lower())), "")
    things = set().union(*(words(p) for p in specs[tool].properties if re.search(r"(?:_|\b)ids?$|Ids?$", p)))
    needed = (words(error) & words(tool)) - words(verb) - things
    return {t for t in specs if t != tool and words(t) & needed}


def avoided(failures: Mapping[str, Sequence[str]], specs: Mapping[str, ToolSpec]) -> frozenset[str]:
    """The tools a re-planned path avoids after `failures` (tool -> the errors of its failed attempts): each failing
    tool, and the tools that need a state every one of its attempts was refused for (`refused_kin`): one attempt
    refused for another reason ("item not in order") may have held the one fitting thing there was."""
    out: set[str] = set()
    for tool, errors in failures.items():
        kin = [refused_kin(tool, e, specs) for e in errors]
        out |= {tool} | (set.intersection(*kin) if kin else set())
    return frozenset(out)


class Replanner(Protocol):
    """Re-plans the unkept part of a path (rule or LLM)."""

    def replan(self, req: ReplanRequest) -> list[int] | None:
        """The kept part of the path plus a new rest avoiding the blacklist; None if there is none."""


class RuleReplanner:
    """A fresh weighted walk from where the kept turns ended."""

    def replan(self, req: ReplanRequest) -> list[int] | None:
        """The kept path plus a walk that avoids blacklisted tools, or None if the FSM has no such walk."""
        lo, hi = req.lengths
        kept = req.kept
        try:
            rest = walk(req.fsm, req.rng, lo, hi, start=req.start, seen={c.name for t in kept for c in t.calls},
                        blacklist=set(req.blacklist),
                        previous=req.fsm.transitions[kept[-1].transition].action if kept else None)
        except NoPathError:
            return None
        return req.path[:len(kept)] + rest


def allowed_edges(req: ReplanRequest) -> list[int]:
    """Transitions reachable from the start state over edges that call no blacklisted tool, in FSM order."""
    fsm = req.fsm
    ok = [i for i, t in enumerate(fsm.transitions) if not req.blacklist.intersection(t.action)]
    seen, queue = {req.start}, deque([req.start])
    while queue:
        state = queue.popleft()
        for i in ok:
            if fsm.transitions[i].source == state and fsm.transitions[i].target not in seen:
                seen.add(fsm.transitions[i].target)
                queue.append(fsm.transitions[i].target)
    return [i for i in ok if fsm.transitions[i].source in seen]


def has_path(fsm: FSM, start: str, edges: list[int], lo: int, hi: int) -> bool:
    """Whether some walk of lo..hi of `edges` runs from `start` to a final state."""
    layer = {start}
    for n in range(1, hi + 1):
        layer = {fsm.transitions[i].target for i in edges if fsm.transitions[i].source in layer}
        if n >= lo and layer & set(fsm.finals):
            return True
    return False


class ReplanAnswer(BaseModel):
    """The model's re-planned rest of the path: transition numbers in order."""

    transitions: list[int] = Field(min_length=1)


def replan_schema(edges: list[int], lo: int, hi: int) -> dict[str, Any]:
    """The exact answer schema of a re-plan: lo..hi transition numbers, each one of the listed `edges`."""
    return closed({"transitions": {"type": "array", "items": {"type": "integer", "enum": edges},
                                   "minItems": lo, "maxItems": hi}})


def path_problems(req: ReplanRequest, edges: list[int], path: list[int]) -> list[str]:
    """What makes `path` unusable: unlisted or blacklisted transitions, a gap, a condition that does not hold, a
    wrong length or a non-final end."""
    fsm, (lo, hi) = req.fsm, req.lengths
    problems = []
    at = req.start
    seen = {c.name for t in req.kept for c in t.calls}
    for k, i in enumerate(path):
        if i not in edges:
            problems.append(f"transitions[{k}]: {i} is not a listed transition")
            break
        t = fsm.transitions[i]
        if req.blacklist.intersection(t.action):
            problems.append(f"transitions[{k}]: {i} calls blacklisted {sorted(req.blacklist.intersection(t.action))}")
        if t.source != at:
            problems.append(f"transitions[{k}]: {i} starts at {t.source!r}, but the path is at {at!r}")
        elif not allowed(fsm, i, seen):
            problems.append(f"transitions[{k}]: {i} needs {t.condition!r}, which does not hold after "
                            f"{sorted(seen) or 'no call'}")
        seen.update(t.action)
        at = t.target
    if not lo <= len(path) <= hi:
        problems.append(f"transitions: {len(path)} given, need {lo} to {hi}")
    if not problems and at not in fsm.finals:
        problems.append(f"transitions[{len(path) - 1}]: {path[-1]} ends in {at!r}, not a final state {fsm.finals}")
    if not problems and not evolves(req, path):
        problems.append("transitions: with the kept turns the dialogue would change nothing and use no earlier result "
                        "(the judge rejects that): take a transition that changes something or works on a result")
    return problems


def _changes(fsm: FSM, i: int) -> bool:
    """Whether transition `i` calls a write tool."""
    return bool(set(fsm.transitions[i].action) & set(fsm.writes))


def _uses_result(fsm: FSM, i: int) -> bool:
    """Whether transition `i` declares an argument from an earlier output."""
    return any(tag == Tag.prev_output for tags in fsm.transitions[i].provenance_tag.values() for tag in tags.values())


def _marks(fsm: FSM, i: int) -> str:
    """What the re-plan prompt says of transition `i` beside its tools."""
    marks = [m for m, holds in (("changes something", _changes(fsm, i)), ("uses a result", _uses_result(fsm, i)))
             if holds]
    return f" ({', '.join(marks)})" if marks else ""


def evolves(req: ReplanRequest, path: list[int]) -> bool:
    """Whether the kept turns and `path` change something or use an earlier result (the judge's state_evolves):
    a kept call of a write tool or taking an earlier output, or a transition of `path` calling a write tool or
    declaring an argument from an earlier output."""
    fsm, writes = req.fsm, set(req.fsm.writes)
    kept = [c for t in req.kept for c in t.calls]
    if any(c.name in writes or any(p.effective_tag() == Tag.prev_output for p in c.args_prov.values()) for c in kept):
        return True
    return any(_changes(fsm, i) or _uses_result(fsm, i) for i in path)


class LLMReplanner:
    """Asks the model for the rest of the path; no call when no path exists. An invalid answer after the
    client's feedback rounds counts as no path (the ledger records the failure)."""

    def __init__(self, llm: LLMRole) -> None:
        self.llm = llm

    def replan(self, req: ReplanRequest) -> list[int] | None:
        """The kept path plus the model's transitions, checked to be connected, long enough and final."""
        edges = allowed_edges(req)
        lo, hi = req.lengths
        if not has_path(req.fsm, req.start, edges, lo, hi):
            return None

        def check(answer: ReplanAnswer) -> None:
            if problems := path_problems(req, edges, answer.transitions):
                raise ValueError("; ".join(problems))

        fsm = req.fsm
        try:
            answer = self.llm.ask(
                "replan", ReplanAnswer, replan_schema(edges, lo, hi), check=check, start=req.start,
                finals=", ".join(fsm.finals), lo=lo, hi=hi,
                kept="\n".join(f"turn {t.index}: " + ", ".join(c.name for c in t.calls) for t in req.kept) or "(none)",
                blacklist=", ".join(sorted(req.blacklist)), evolved="yes" if evolves(req, []) else "no",
                options="\n".join(f"[{i}] {fsm.transitions[i].source} -> {fsm.transitions[i].target}: "
                                  f"{' then '.join(fsm.transitions[i].action)}{_marks(fsm, i)}" for i in edges))
        except LLMRoleError as exc:
            if exc.kind != "invalid":
                raise
            return None
        return req.path[:len(req.kept)] + answer.transitions
