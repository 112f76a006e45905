"""The RODS variant graph: a seed record -> isomorphic variants on new values.

```
START -> plan -> execute -> topology -+-> augment -> END        (kept)
           ^                          +-> plan                  (a failure, remembered; at most max_rounds rounds)
           |                          +-> END                   (rounds used up, or no plan)
```

- plan: `VariantPlanner` reads the seed's call skeleton, swaps functions that kept failing in earlier rounds for
  same-role substitutes where the toolset has one, draws a fresh c0 seed and writes the narrative.
- execute: the synthesis graph (`graphs/synthesis.py`) runs the plan as a linear FSM with `TopologyPlanner`
  binding each call along the seed's edges: per-call retries, the repair role patching c0 (dual repair: the
  failing function also goes on the planner's blacklist for the next round), messages written from the
  narrative (the LLM messenger's global mode; the rule messenger writes per turn), the code check with replay,
  and the judge (a text rejection is rewritten, a ground-truth one discards the round).
- topology: the variant is kept only if its call graph is isomorphic to the seed's (`provenance/topology.py`).
- augment: optional MissParam / MissFunc variants of the kept variant, made as synthesis makes them
  (`graphs/rewrite.py` `judged_rewrite`: the operator with the messenger's clarifier and withholder, then the judge).
"""
from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from sap.agents.judge import Judge, RuleJudge
from sap.agents.messenger import Messenger, RuleMessenger
from sap.agents.planner import Planner, RulePlanner
from sap.agents.repair import Repairer, RuleRepairer
from sap.agents.variant_planner import (
    TopologyPlanner,
    VariantPlan,
    VariantPlanner,
    role_class,
)
from sap.drops import JUDGE_DROPS, DropReason
from sap.export.records import record_to_trajectory, to_record
from sap.graphs.rewrite import RewriteRejected, joined_turns, judged_rewrite
from sap.graphs.synthesis import SynthesisContext, synthesis_graph
from sap.model import Toolset, Trajectory
from sap.provenance.topology import topology_difference

AUGMENT_KINDS = ("miss_param", "miss_func")
_FAILED_TOOL = re.compile(r"^(\S+) failed \d+ times at turn \d+")


class VariantState(TypedDict, total=False):
    """One variant's progress (plain JSON, last-value channels)."""

    seed_record: dict[str, Any]  # input: the seed record as `sap synthesize` writes it
    index: int  # input: which variant of this seed (variants of one seed differ by it)
    augment: list[str]  # input: rewrite kinds to add for a kept variant
    round: int
    memory: list[dict[str, Any]]  # earlier rounds' failures: round, stage, reason, tool (a function that kept failing)
    plan: dict[str, Any] | None  # VariantPlan.dump()
    candidate: dict[str, Any] | None  # this round's record, before the topology check
    records: list[dict[str, Any]]  # the kept variant, then its augmentations
    status: str  # running / kept / failed
    reason: str | None


@dataclass
class VariantContext:
    """The variant graph's runtime context: the toolset, the agents and the limits."""

    toolset: Toolset
    planner: Planner = field(default_factory=RulePlanner)
    messenger: Messenger = field(default_factory=RuleMessenger)
    judge: Judge = field(default_factory=RuleJudge)
    repairer: Repairer = field(default_factory=RuleRepairer)
    max_rounds: int = 3  # plan -> execute rounds per variant
    max_repairs: int = 3  # c0 repair rounds per failing call
    bind_tries: int = 16  # TopologyPlanner redraws per call
    agents_meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_agents(cls, toolset: Toolset, agents: dict[str, Any], **limits: Any) -> "VariantContext":
        """A context with the roles `agents.config.build_agents` made (rule or LLM, per role)."""
        return cls(toolset, planner=agents["planner"], messenger=agents["messenger"], judge=agents["judge"],
                   repairer=agents["repairer"], agents_meta=agents.get("agents_meta", {}), **limits)


Ctx = Runtime[VariantContext]


def _labeler(toolset: Toolset, substituted: set[str]) -> Callable[[str], str]:
    """Node labels for the topology check: a function's name, or its role class if a substitution touched it."""
    specs = {t.name: t for t in toolset.tools}
    return lambda name: f"role:{role_class(specs[name])}" if name in substituted else name


def _seed_of(state: VariantState) -> Trajectory:
    """The seed record as a trajectory; a MissParam or MissFunc seed as the base dialogue it was rewritten from
    (its variants are base variants; `augment` rewrites them again)."""
    seed = record_to_trajectory(state["seed_record"])
    return joined_turns(seed) if any(not t.calls for t in seed.turns) else seed


def plan(state: VariantState, runtime: Ctx) -> dict[str, Any]:
    """Plan this round: the seed's skeleton with substitutes for functions that kept failing, a c0 seed, a story."""
    ctx = runtime.context
    round_ = state.get("round", 0)
    try:
        made = VariantPlanner(ctx.planner).plan(ctx.toolset, _seed_of(state), state.get("index", 0), round_,
                                                state.get("memory", []))
    except ValueError as exc:
        return {"status": "failed", "reason": str(exc), "plan": None, "round": round_}
    return {"plan": made.dump(), "status": "running", "round": round_, "candidate": None,
            "memory": state.get("memory", []), "records": []}


def after_plan(state: VariantState) -> Literal["execute", "__end__"]:
    """Execute a plan; end if there is none."""
    return "execute" if state.get("plan") else END


def execute(state: VariantState, runtime: Ctx) -> dict[str, Any]:
    """Run the plan through the synthesis graph as a linear FSM; the record, or the round's failure in memory."""
    ctx = runtime.context
    made = VariantPlan.load(state["plan"])
    n = len(made.turns)
    synth = SynthesisContext(
        toolset=ctx.toolset, planner=TopologyPlanner(ctx.planner, made, ctx.bind_tries), messenger=ctx.messenger,
        judge=ctx.judge, repairer=ctx.repairer, fsm_preset=made.fsm(), min_turns=n, max_turns=n,
        min_keep_turns=n, emphasis_size=0, max_repairs=ctx.max_repairs, agents_meta=ctx.agents_meta)
    if made.own_c0:  # the seed's own world: its c0 stands for the drawn seed's
        synth.configs[made.c0_seed] = copy.deepcopy(state["seed_record"]["initial_config"])
    out = synthesis_graph().invoke({"index": 0, "seed": made.c0_seed, "kind": "base", "narrative": made.narrative},
                                   context=synth)
    if out.get("record") is not None:
        return {"candidate": out["record"]}
    reason = out.get("drop_reason") or "dropped"
    failed = _FAILED_TOOL.match(reason)
    kind = DropReason(out.get("drop_kind") or DropReason.UNKNOWN)
    stage = ("execution" if kind is DropReason.TOOL_FAILED else "judge" if kind in JUDGE_DROPS
             else "code check")
    return {"candidate": None, "memory": state.get("memory", []) + [
        {"round": state["round"], "stage": stage, "reason": reason, "tool": failed.group(1) if failed else None}]}


def topology(state: VariantState, runtime: Ctx) -> dict[str, Any]:
    """Keep the candidate only if its call graph is isomorphic to the seed's; else remember why."""
    if state.get("candidate") is None:
        return {}
    made = VariantPlan.load(state["plan"])
    seed = _seed_of(state)
    variant = record_to_trajectory(state["candidate"])
    label = _labeler(runtime.context.toolset, set(made.substitutions) | set(made.substitutions.values()))
    difference = topology_difference(seed, variant, label)
    if difference is not None:
        return {"candidate": None, "memory": state.get("memory", []) + [
            {"round": state["round"], "stage": "topology", "reason": difference, "tool": None}]}
    record = dict(state["candidate"])
    record["id"] = f"{state['seed_record']['id']}.v{state.get('index', 0)}"
    record["meta"] = {**record["meta"], "rods": {
        "seed_id": state["seed_record"]["id"], "variant": state.get("index", 0), "round": state["round"],
        "c0_seed": made.c0_seed, "own_c0": made.own_c0, "substitutions": made.substitutions,
        "narrative": made.narrative,
        "memory": state.get("memory", [])}}
    return {"records": [record], "status": "kept", "reason": None}


def route(state: VariantState, runtime: Ctx) -> Literal["augment", "next_round", "give_up"]:
    """Augment a kept variant; else another round while rounds remain; else give up."""
    if state.get("status") == "kept":
        return "augment"
    return "next_round" if state["round"] + 1 < runtime.context.max_rounds else "give_up"


def next_round(state: VariantState) -> dict[str, Any]:
    """Count the round."""
    return {"round": state["round"] + 1}


def give_up(state: VariantState, runtime: Ctx) -> dict[str, Any]:
    """No kept variant in max_rounds rounds: the last failure is the reason."""
    last = state["memory"][-1]
    return {"status": "failed", "reason": f"no kept variant in {runtime.context.max_rounds} rounds; last: "
                                          f"{last['stage']}: {last['reason']}"}


def augment(state: VariantState, runtime: Ctx) -> dict[str, Any]:
    """The kept variant's MissParam / MissFunc variants, made and judged as synthesis makes them."""
    ctx = runtime.context
    base_record = state["records"][0]
    base = record_to_trajectory(base_record)
    records = [base_record]
    for kind in state.get("augment", []):
        out = judged_rewrite(kind, base, ctx.toolset, base.seed, ctx.judge, ctx.messenger)
        if isinstance(out, RewriteRejected):
            continue
        meta = {k: v for k, v in base_record["meta"].items()
                if k not in ("seed", "toolset", "sap_version", "rewrite_kind", "kind", "missed_function",
                             "virtual_history", "judge")}
        record = to_record(out, ctx.toolset, meta)
        record["id"] = f"{base_record['id']}-{kind}"
        records.append(record)
    return {"records": records}


@functools.cache
def compiled_variant_graph() -> CompiledStateGraph:
    """The variant graph, compiled once per process without a checkpointer."""
    builder = StateGraph(VariantState, context_schema=VariantContext)
    builder.add_node("plan", plan)
    builder.add_node("execute", execute)
    builder.add_node("topology", topology)
    builder.add_node("next_round", next_round)
    builder.add_node("give_up", give_up)
    builder.add_node("augment", augment)
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", after_plan)
    builder.add_edge("execute", "topology")
    builder.add_conditional_edges("topology", route)
    builder.add_edge("next_round", "plan")
    builder.add_edge("give_up", END)
    builder.add_edge("augment", END)
    return builder.compile(name="variant")


def variant_graph(checkpointer: Any = None) -> CompiledStateGraph:
    """The variant graph (compiled once per process), bound to `checkpointer` if given; invoke with
    {"seed_record": rec, "index": i, "augment": [...]} and `context=VariantContext(...)`, one thread per variant."""
    graph = compiled_variant_graph()
    return graph if checkpointer is None else graph.copy({"checkpointer": checkpointer})


@dataclass
class VariantOutcome:
    """What the graph made of one variant slot: kept records (the variant first), or why none."""

    seed_id: str
    index: int
    records: list[dict[str, Any]]
    reason: str | None
    rounds: int
    memory: list[dict[str, Any]]


def make_variants(ctx: VariantContext, seed_record: dict[str, Any], n: int, augment: tuple[str, ...] = (),
                  checkpointer: Any = None, start: int = 0) -> list[VariantOutcome]:
    """Run the variant graph for variants start..start+n-1 of one seed (thread `SEED_ID:vI` when checkpointed; a
    thread left unfinished by a crash continues from its last checkpoint)."""
    bad = [k for k in augment if k not in AUGMENT_KINDS]
    if bad:
        raise ValueError(f"unknown augmentation {bad[0]!r}; kinds are {', '.join(AUGMENT_KINDS)}")
    graph = variant_graph(checkpointer)
    outcomes = []
    for index in range(start, start + n):
        config = {"configurable": {"thread_id": f"{seed_record['id']}:v{index}"}} if checkpointer is not None else None
        unfinished = config is not None and graph.get_state(config).next
        out = graph.invoke(None if unfinished else {"seed_record": seed_record, "index": index,
                                                    "augment": list(augment), "round": 0, "memory": []}, config,
                           context=ctx)
        outcomes.append(VariantOutcome(seed_record["id"], index, out.get("records", []) if out.get("status") == "kept"
                                       else [], out.get("reason"), out.get("round", 0) + 1, out.get("memory", [])))
    return outcomes
