"""RODS variant planner: reads a seed trajectory's call skeleton (functions, tags, dependency sources), plans the
same topology on a new c0 (blacklisted functions swapped for same-role substitutes), writes the narrative, and
keeps the memory of earlier rounds' failures; `TopologyPlanner` makes the binding planner follow the seed's edges."""
from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field, replace
from typing import Any

from sap.agents.planner import Ahead, Binding, NarrativeRequest, Planner, PlanRequest
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
    stated: dict[str, Any] = field(default_factory=dict)  # P_c argument -> the seed's value (its settings stay)


def skeleton_of(traj: Trajectory) -> list[list[CallSlot]]:
    """The seed's calls turn by turn, with effective tags (a fallback counts as the source it used)."""
    if any(not t.calls for t in traj.turns):
        raise ValueError(f"seed {traj.id}: turn(s) without calls ({traj.rewrite_kind} variant?); RODS seeds are "
                         "base records, whose every turn calls a tool")
    turns = []
    for turn in traj.turns:
        slots = []
        for i, call in enumerate(turn.calls):
            tags, sources, stated = {}, {}, {}
            for name, prov in call.args_prov.items():
                tags[name] = prov.effective_tag()
                if tags[name] == Tag.prev_output:
                    sources[name] = (prov.turn, prov.call or 0)
                elif tags[name] == Tag.prev_user_msg:
                    sources[name] = prov.turn
                elif tags[name] == Tag.self_create:
                    stated[name] = call.arg_value(name)
            slots.append(CallSlot(turn.index, i, call.name, tags, sources, stated))
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
    own_c0: bool = False  # no drawn c0 holds what a seed's foreign c0 held (a BFCL task's): the variant runs on it

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
        return {"c0_seed": self.c0_seed, "own_c0": self.own_c0, "narrative": self.narrative,
                "substitutions": self.substitutions,
                "turns": [[{"turn": s.turn, "index": s.index, "tool": s.tool,
                            "tags": {k: v.value for k, v in s.tags.items()},
                            "sources": {k: list(v) if isinstance(v, tuple) else v for k, v in s.sources.items()},
                            "stated": s.stated}
                           for s in slots] for slots in self.turns]}

    @classmethod
    def load(cls, data: dict[str, Any]) -> "VariantPlan":
        """The plan from its `dump`."""
        turns = [[CallSlot(s["turn"], s["index"], s["tool"], {k: Tag(v) for k, v in s["tags"].items()},
                           {k: tuple(v) if isinstance(v, list) else v for k, v in s["sources"].items()},
                           s.get("stated", {}))
                  for s in slots] for slots in data["turns"]]
        return cls(turns, data["c0_seed"], data["narrative"], dict(data["substitutions"]), data.get("own_c0", False))


def variant_c0_seed(seed_id: str, index: int, round_: int, draw: int = 0) -> int:
    """The c0 seed of variant `index` of a seed in a round (its `draw`-th candidate): another `sample_config`
    seed, stable everywhere."""
    suffix = f":{draw}" if draw else ""
    return int.from_bytes(hashlib.sha256(f"rods:{seed_id}:{index}:{round_}{suffix}".encode()).digest()[:8], "big")


C0_DRAWS = 12  # candidate c0 seeds a round looks at for one that holds what the seed's c0 held
_STATUS = "status"


def c0_profile(c0: Any, path: str = "$", depth: int = 0) -> dict[str, tuple[int, set[str]]]:
    """What a c0 holds that a skeleton may need, per collection (a list, or a map of objects; the entries of one
    merged under `[*]`) down to depth 4: how many entries it has (summed over the merged ones), and the values of
    its entries' status fields (a confirmed booking, a pending order)."""
    out: dict[str, tuple[int, set[str]]] = {}
    if depth > 4 or not isinstance(c0, (dict, list)):
        return out
    entries = list(c0.values()) if isinstance(c0, dict) and c0 and all(isinstance(v, dict) for v in c0.values()) \
        else c0 if isinstance(c0, list) else None
    if entries is None:  # a plain object: its fields
        for key, child in c0.items():
            out.update(c0_profile(child, f"{path}.{key}", depth + 1))
        return out
    out[path] = (len(entries), {f"{k}={v}" for e in entries if isinstance(e, dict) for k, v in e.items()
                                if k.endswith(_STATUS) and isinstance(v, str)})
    for entry in entries:
        for sub, (count, marks) in c0_profile(entry, f"{path}[*]", depth + 1).items():
            had, seen = out.get(sub, (0, set()))
            out[sub] = (had + count, seen | marks)
    return out


def holds_as_much(candidate: dict[str, tuple[int, set[str]]], seed: dict[str, tuple[int, set[str]]]) -> bool:
    """Whether a candidate c0's profile has, in every collection of the seed's c0, at least as many entries and
    every status."""
    return all(count <= candidate.get(path, (0, set()))[0] and marks <= candidate.get(path, (0, set()))[1]
               for path, (count, marks) in seed.items())


def _first_fitting(toolset: Toolset, draws: list[int], wanted: dict[str, tuple[int, set[str]]]
                   ) -> tuple[int, dict[str, Any]] | None:
    """(seed, c0) of the first drawn c0 that holds as much as `wanted` (a seed c0's profile), or None."""
    for draw in draws:
        c0 = toolset.sample_config(draw)
        if holds_as_much(c0_profile(c0), wanted):
            return draw, c0
    return None


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
        wanted = c0_profile(seed.c0)
        draws = [variant_c0_seed(seed.id, index, round_, k) for k in range(C0_DRAWS)]
        fitting = _first_fitting(toolset, draws, wanted)
        own = fitting is None and toolset.sample_config(seed.seed) != seed.c0  # a world the sampler did not make
        c0_seed, c0 = fitting or (draws[0], seed.c0 if own else toolset.sample_config(draws[0]))
        specs = {t.name: t for t in toolset.tools}
        narrative = self.planner.narrate(NarrativeRequest(toolset.name, c0,
                                                          [[task_phrase(specs[s.tool]) for s in slots] for slots in turns]))
        return VariantPlan(turns, c0_seed, narrative, substitutions, own_c0=own)


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


def _carries_intent(schema: dict[str, Any]) -> bool:
    """Whether a parameter is a setting that carries the request's intent: a choice among few values (an enum, a
    flag, a list of enum members: "START", lock, all four doors) or a position on a bounded scale (a brake pedal
    pressed fully, 1.0 of 0..1). A variant keeps the seed's, where a name, an amount or a date is drawn anew."""
    items = schema.get("items", {}) if schema.get("type") == "array" else {}
    scale = schema.get("type") in ("number", "integer") and "minimum" in schema and "maximum" in schema
    return bool(schema.get("enum")) or schema.get("type") == "boolean" or bool(items.get("enum")) or scale


class TopologyPlanner:
    """Wraps a binding planner so each call follows its skeleton slot: the slot's tags and per-argument sources (the
    whole history stays visible, as it was to the seed's planner: twins and newer results are avoided as there).
    A binding whose edges differ, or that repeats an earlier call of the tool (refused as a repeat, it would leave
    the variant one call short), is redrawn (up to `tries` times, each with a seed derived from the request's; the
    later half with the earlier calls' values among those to avoid), else the first is returned and the topology
    check decides. The seed's settings (`_carries_intent`) stay as they were, through the planner's
    `combinations`."""

    def __init__(self, inner: Planner, plan: VariantPlan, tries: int = 16) -> None:
        self.inner, self.plan, self.tries = inner, plan, tries

    def bind(self, req: PlanRequest) -> Binding:
        """The first binding that matches the slot."""
        slot = self.plan.turns[req.turn][req.index]
        base = req.rng.getrandbits(64)
        first = None
        done = [h.call.args_exec for h in req.history if h.call.ok and h.call.name == req.spec.name]
        settings = {name: value for name, value in slot.stated.items()
                    if _carries_intent(req.spec.properties.get(name, {}))}
        combinations = [settings] if settings else req.combinations
        for k in range(self.tries):
            avoid = done if k >= self.tries // 2 else []  # late tries steer clear of the earlier calls' values
            binding = self.inner.bind(replace(req, tags=dict(slot.tags), sources=dict(slot.sources),
                                              combinations=combinations, failed_args=[*req.failed_args, *avoid],
                                              rng=random.Random(f"{base}:{k}")))
            if binding_matches(binding, slot) and binding.args_exec not in done:  # a repeat would be left out
                return binding
            first = first or binding
        return first

    def ahead(self, reqs: list[PlanRequest], story: NarrativeRequest | None = None,
              later: list[PlanRequest] = ()) -> Ahead:
        """Nothing ahead: each call is bound to its slot's tags and sources when it comes."""
        return Ahead()

    def narrate(self, req: NarrativeRequest) -> str:
        """The inner planner's narrative."""
        return self.inner.narrate(req)
