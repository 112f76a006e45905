"""RODS variant planner: reads a seed trajectory's call skeleton (functions, tags, dependency sources), plans the
same topology on a new c0 (blacklisted functions swapped for same-role substitutes), writes the narrative, and
keeps the memory of earlier rounds' failures; `TopologyPlanner` makes the binding planner follow the seed's edges."""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field, replace
from typing import Any

from sap.agents.planner import Binding, NarrativeRequest, Planner, PlanRequest, reference_selector
from sap.fsm.build import READ_VERBS
from sap.model import (
    FSM,
    FSMState,
    StateType,
    Tag,
    Toolset,
    ToolSpec,
    Trajectory,
    Transition,
)
from sap.text import task_phrase

EDGE_TAGS = (Tag.prev_output, Tag.prev_user_msg)


@dataclass(frozen=True)
class CallSlot:
    """One call of the skeleton: its tool, the effective tag of each argument, and where edges come from."""

    turn: int
    index: int
    tool: str
    tags: dict[str, Tag]
    sources: dict[str, tuple[int, int] | int]  # P_o argument -> (turn, call); P_u argument -> anchor turn


def skeleton_of(traj: Trajectory) -> list[list[CallSlot]]:
    """The seed's calls turn by turn, with effective tags (a fallback counts as the source it used)."""
    if any(not t.calls for t in traj.turns):
        raise ValueError(f"seed {traj.id}: turn(s) without calls ({traj.rewrite_kind} variant?); RODS seeds are "
                         "base records, whose every turn calls a tool")
    turns = []
    for turn in traj.turns:
        slots = []
        for i, call in enumerate(turn.calls):
            tags, sources = {}, {}
            for name, prov in call.args_prov.items():
                tags[name] = prov.effective_tag()
                if tags[name] == Tag.prev_output:
                    sources[name] = (prov.turn, prov.call or 0)
                elif tags[name] == Tag.prev_user_msg:
                    sources[name] = prov.turn
            slots.append(CallSlot(turn.index, i, call.name, tags, sources))
        turns.append(slots)
    return turns


def role_class(spec: ToolSpec) -> str:
    """A tool's role: read or action (the doc's flag, else the name's verb) and its required parameters."""
    read = spec.read_only if spec.read_only is not None else spec.name.lower().split("_")[0] in READ_VERBS
    return f"{'read' if read else 'action'}({','.join(sorted(spec.required))})"


def substitutes(toolset: Toolset, tool: str, avoid: set[str]) -> list[str]:
    """Other tools of the same role class (same kind, same required parameters), not in `avoid`, by name."""
    role = role_class(toolset.tool(tool))
    return sorted(t.name for t in toolset.tools if t.name != tool and t.name not in avoid and role_class(t) == role)


@dataclass
class VariantPlan:
    """One round's plan: the call skeleton (substitutes applied), the c0 seed, the narrative."""

    turns: list[list[CallSlot]]
    c0_seed: int
    narrative: str
    substitutions: dict[str, str] = field(default_factory=dict)  # seed function -> substitute

    def fsm(self) -> FSM:
        """A linear FSM, one transition per turn carrying that turn's tools and tags, so the synthesis graph walks
        exactly this plan."""
        n = len(self.turns)
        states = [FSMState(id=f"v{k}", type=StateType.INITIAL if k == 0 else StateType.COMPLETED if k == n
                           else StateType.NORMAL) for k in range(n + 1)]
        edges = [Transition(**{"from": f"v{k}", "to": f"v{k + 1}"}, action=[s.tool for s in slots],
                            provenance_tag={s.tool: dict(s.tags) for s in slots})
                 for k, slots in enumerate(self.turns)]
        return FSM(states=states, initial="v0", finals=[f"v{n}"], transitions=edges)

    def dump(self) -> dict[str, Any]:
        """Plain JSON for the graph state."""
        return {"c0_seed": self.c0_seed, "narrative": self.narrative, "substitutions": self.substitutions,
                "turns": [[{"turn": s.turn, "index": s.index, "tool": s.tool,
                            "tags": {k: v.value for k, v in s.tags.items()},
                            "sources": {k: list(v) if isinstance(v, tuple) else v for k, v in s.sources.items()}}
                           for s in slots] for slots in self.turns]}

    @classmethod
    def load(cls, data: dict[str, Any]) -> "VariantPlan":
        """The plan from its `dump`."""
        turns = [[CallSlot(s["turn"], s["index"], s["tool"], {k: Tag(v) for k, v in s["tags"].items()},
                           {k: tuple(v) if isinstance(v, list) else v for k, v in s["sources"].items()})
                  for s in slots] for slots in data["turns"]]
        return cls(turns, data["c0_seed"], data["narrative"], dict(data["substitutions"]))


def variant_c0_seed(seed_id: str, index: int, round_: int) -> int:
    """The c0 seed of variant `index` of a seed in a round: another `sample_config` seed, stable everywhere."""
    return int.from_bytes(hashlib.sha256(f"rods:{seed_id}:{index}:{round_}".encode()).digest()[:8], "big")


class VariantPlanner:
    """Plans a round: the seed's skeleton with every function that kept failing in earlier rounds (the memory)
    replaced by a same-role substitute not tried yet, a fresh c0 seed, and the narrative written by `planner`."""

    def __init__(self, planner: Planner) -> None:
        self.planner = planner

    def plan(self, toolset: Toolset, seed: Trajectory, index: int, round_: int,
             memory: list[dict[str, Any]]) -> VariantPlan:
        """The plan; ValueError if the seed is not a base record."""
        blacklist = {m["tool"] for m in memory if m.get("tool")}
        substitutions: dict[str, str] = {}
        for tool in sorted({s.tool for slots in skeleton_of(seed) for s in slots} & blacklist):
            options = substitutes(toolset, tool, blacklist)
            if options:  # without one, the function stays and the new c0 alone may let it succeed
                substitutions[tool] = random.Random(f"{seed.id}:{index}:{round_}:{tool}").choice(options)
        turns = [[replace(s, tool=substitutions.get(s.tool, s.tool)) for s in slots] for slots in skeleton_of(seed)]
        c0_seed = variant_c0_seed(seed.id, index, round_)
        specs = {t.name: t for t in toolset.tools}
        narrative = self.planner.narrate(NarrativeRequest(toolset.name, toolset.sample_config(c0_seed),
                                                          [[task_phrase(specs[s.tool]) for s in slots] for slots in turns]))
        return VariantPlan(turns, c0_seed, narrative, substitutions)


def binding_matches(binding: Binding, slot: CallSlot) -> bool:
    """Whether a binding has the slot's tags and edge sources, and no dependency edge the slot lacks."""
    for name, prov in binding.args_prov.items():
        tag = prov.effective_tag()
        if name not in slot.tags:
            if tag in EDGE_TAGS:
                return False
            continue
        if tag != slot.tags[name]:
            return False
        if tag == Tag.prev_output and (prov.turn, prov.call or 0) != tuple(slot.sources[name]):
            return False
        if tag == Tag.prev_user_msg and prov.turn != slot.sources[name]:
            return False
    return all(name in binding.args_prov for name in slot.tags)


def _reselected(binding: Binding, req: PlanRequest) -> Binding:
    """The binding with each output reference's selector computed against the whole history (the inner planner saw
    only the slot's sources, not the other results that compete with them)."""
    prov = {name: p.model_copy(update={"selector": reference_selector(req, p.turn, p.call, p.path)})
            if p.effective_tag() == Tag.prev_output and p.path and p.turn is not None and p.call is not None else p
            for name, p in binding.args_prov.items()}
    return replace(binding, args_prov=prov)


class TopologyPlanner:
    """Wraps a binding planner so each call follows its skeleton slot: the slot's tags, and history limited to the
    calls the slot's edges come from; a binding whose edges differ is redrawn (up to `tries` times, each with a
    seed derived from the request's), else the first is returned and the topology check decides."""

    def __init__(self, inner: Planner, plan: VariantPlan, tries: int = 16) -> None:
        self.inner, self.plan, self.tries = inner, plan, tries

    def bind(self, req: PlanRequest) -> Binding:
        """The first binding that matches the slot."""
        slot = self.plan.turns[req.turn][req.index]
        sources = {tuple(v) for v in slot.sources.values() if isinstance(v, tuple)}
        history = [h for h in req.history if (h.turn, h.index) in sources]
        base = req.rng.getrandbits(64)
        first = None
        for k in range(self.tries):
            binding = self.inner.bind(replace(req, tags=dict(slot.tags), history=history,
                                              rng=random.Random(f"{base}:{k}")))
            if binding_matches(binding, slot):
                return _reselected(binding, req)
            first = first or binding
        return _reselected(first, req)

    def narrate(self, req: NarrativeRequest) -> str:
        """The inner planner's narrative."""
        return self.inner.narrate(req)
