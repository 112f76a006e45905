"""The cache-mode synthesis graph: sample a template chain from the cache -> write the query with its echo ->
check (echo, replay of every step through the cache executor, code check) -> judge (-> write_query with the
findings on a text rejection) -> persist. One thread per slot, like the FSM graph, so runs are checkpointed and
resumable with the same driver."""
from __future__ import annotations

import functools
import random
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command

from sap.agents.judge import Judge, RuleJudge, Verdict
from sap.agents.replies import assistant_reply
from sap.cache.coherence import entity_contradictions
from sap.cache.index import CacheIndex
from sap.cache.query import QueryDraft, QueryWriter, RuleQueryWriter, echo_problems
from sap.cache.sampling import Sample, SampledStep, Sampler, TemplateAbandoned
from sap.cache.templates import Template
from sap.drops import DropReason
from sap.export.records import to_record, trajectory_id
from sap.model import ArgProvenance, Tag, ToolCall, Toolset, ToolSpec, Trajectory, Turn
from sap.provenance.checks import code_check
from sap.provenance.groups import group_calls


class CacheState(TypedDict, total=False):
    """One slot's progress (plain JSON, last-value channels)."""

    index: int
    seed: int
    template: str
    sample: dict[str, Any] | None
    draft: dict[str, Any] | None
    query_rounds: int  # queries written so far (the first, then one per text rejection)
    verdict: dict[str, Any] | None  # the judge's last verdict
    trajectory: dict[str, Any] | None
    status: str  # running / accepted / dropped
    drop_reason: str | None
    drop_kind: str | None  # the DropReason value beside drop_reason's details
    record: dict[str, Any] | None


@dataclass
class CacheSynthesisContext:
    """The cache graph's runtime context: the cache as a toolset, its index, the templates and the query writer."""

    toolset: Toolset
    index: CacheIndex
    templates: list[Template]
    writer: QueryWriter = field(default_factory=RuleQueryWriter)
    judge: Judge = field(default_factory=RuleJudge)
    max_rewrites: int = 2  # query rewrites after a reject_text verdict
    max_restarts: int = 20
    run_seed: int = 0
    meta: dict[str, Any] = field(default_factory=dict)  # copied into every record's meta (cache name, writer)
    sampler: Sampler = field(init=False, repr=False)
    specs: dict[str, ToolSpec] = field(init=False, repr=False)  # the toolset's tool specs by name

    def __post_init__(self) -> None:
        """The sampler over the index and the spec table of the toolset."""
        self.sampler = Sampler(self.index, self.max_restarts)
        self.specs = {t.name: t for t in self.toolset.tools}


def sample_from_state(data: dict[str, Any]) -> Sample:
    """The Sample a state holds (sources come back from JSON as lists)."""
    steps = [SampledStep(**{**s, "sources": {p: (src[0], src[1]) for p, src in s["sources"].items()}})
             for s in data["steps"]]
    return Sample(data["template"], steps, data["restarts"])


def trajectory_of(sample: Sample, draft: QueryDraft, ctx: CacheSynthesisContext, state: CacheState) -> Trajectory:
    """One user turn: the query, the chain's calls in order (dependent arguments prev_output at their concrete
    paths, stated ones self_create), and the assistant's reply telling the results in words."""
    position = {s.step: k for k, s in enumerate(sample.steps)}
    calls = []
    for k, step in enumerate(sample.steps):
        prov = {p: (ArgProvenance(tag=Tag.prev_output, turn=0, call=position[step.sources[p][0]],
                                  path=step.sources[p][1]) if p in step.sources else ArgProvenance(tag=Tag.self_create))
                for p in step.args}
        calls.append(ToolCall(call_id=f"call_0_{k}", name=step.function, args_exec=step.args, args_prov=prov,
                              result=step.response))
    reply = assistant_reply(calls, ctx.specs, random.Random(f"{state['seed']}:reply"))
    turn = group_calls(Turn(index=0, state="done", transition=-1, calls=calls, user_message=draft.query,
                            assistant_message=reply))
    return Trajectory(id=trajectory_id(ctx.toolset.name, state["seed"], state["index"]), toolset=ctx.toolset.name,
                      seed=state["seed"], c0=sample.c0(), turns=[turn])


Ctx = Runtime[CacheSynthesisContext]


def sample(state: CacheState, runtime: Ctx) -> dict[str, Any]:
    """Sample a chain of the slot's template from the cache; dropped if the template is abandoned."""
    ctx = runtime.context
    template = ctx.templates[state["index"] % len(ctx.templates)]
    try:
        drawn = ctx.sampler.sample(template, random.Random(f"{state['seed']}:cache:sample"))
    except TemplateAbandoned as exc:
        return {"template": template.name, "sample": None, "status": "dropped", "drop_reason": str(exc),
                "drop_kind": DropReason.TEMPLATE_ABANDONED.value}
    return {"template": template.name, "sample": asdict(drawn), "status": "running"}


def write_query(state: CacheState, runtime: Ctx) -> dict[str, Any]:
    """Write the user query with its echo (with the judge's findings after a text rejection)."""
    ctx = runtime.context
    rounds = state.get("query_rounds", 0)
    rng = random.Random(f"{state['seed']}:cache:query" + (f":{rounds}" if rounds else ""))
    verdict = Verdict.model_validate(state["verdict"]) if rounds and state.get("verdict") else None
    feedback = [f"{f.criterion}: {f.detail}" for f in verdict.reasons] if verdict is not None else []
    draft = ctx.writer.write(sample_from_state(state["sample"]), ctx.specs, rng, feedback=feedback)
    return {"draft": draft.model_dump(mode="json"), "query_rounds": rounds + 1}


def check(state: CacheState, runtime: Ctx) -> dict[str, Any]:
    """The echo check, the replay of every step through the cache executor, entity coherence across the joined
    responses and the code check."""
    ctx = runtime.context
    drawn, draft = sample_from_state(state["sample"]), QueryDraft.model_validate(state["draft"])
    problems = echo_problems(drawn, draft)
    if problems:
        return {"status": "dropped", "drop_reason": "echo mismatch: " + "; ".join(problems),
                "drop_kind": DropReason.ECHO_MISMATCH.value}
    traj = trajectory_of(drawn, draft, ctx, state)
    executor = ctx.toolset.executor_factory()
    executor.reset(traj.c0)
    for _, k, call in traj.calls():
        res = executor.execute(call)
        if not res.ok or res.value != call.result:
            return {"status": "dropped", "drop_reason": f"replay through the cache: call {k} ({call.name}) gave "
                                                        f"{res.error or 'a different response'}",
                    "drop_kind": DropReason.CACHE_REPLAY.value}
    problems = entity_contradictions(traj, ctx.specs)
    if problems:
        return {"status": "dropped", "drop_reason": "code check: incoherent cached responses: " + "; ".join(problems),
                "drop_kind": DropReason.CODE_CHECK.value}
    problems = code_check(traj, ctx.specs, leaks=False)  # leaks: the judge (rewritable)
    if problems:
        return {"status": "dropped", "drop_reason": "code check: " + "; ".join(problems),
                "drop_kind": DropReason.CODE_CHECK.value}
    return {"trajectory": traj.model_dump(mode="json")}


def judge(state: CacheState, runtime: Ctx) -> Command[Literal["write_query", "persist"]]:
    """Judge the trajectory: accept, rewrite the query, or drop."""
    ctx = runtime.context
    verdict = ctx.judge.judge(Trajectory.model_validate(state["trajectory"]), ctx.specs)
    update: dict[str, Any] = {"verdict": verdict.model_dump(mode="json")}
    step, reason = verdict.next_step(state.get("query_rounds", 1), ctx.max_rewrites)
    if step == "accept":
        return Command(goto="persist", update={**update, "status": "accepted"})
    if step == "rewrite":
        return Command(goto="write_query", update=update)
    return Command(goto="persist", update={**update, "status": "dropped", "drop_reason": reason,
                                           "drop_kind": DropReason.of_judge(verdict.decision).value})


def persist(state: CacheState, runtime: Ctx) -> dict[str, Any]:
    """The export record of an accepted slot."""
    ctx = runtime.context
    if state.get("status") != "accepted":
        return {"record": None}
    traj = Trajectory.model_validate(state["trajectory"])
    traj.judge = state.get("verdict")
    meta = {"index": state["index"], "run_seed": ctx.run_seed, "mode": "cache", "template": state["template"],
            "restarts": state["sample"]["restarts"], "echo": state["draft"]["echo"], "truncated": False,
            "query_rounds": state.get("query_rounds", 1),
            **ctx.meta}
    return {"record": to_record(traj, ctx.toolset, meta)}


def _after(node: str) -> Callable[[CacheState], str]:
    """The route out of `node`: persist if the slot was dropped there, else the next node."""
    return lambda s: "persist" if s.get("status") == "dropped" else node


@functools.cache
def compiled_cache_synthesis_graph() -> CompiledStateGraph:
    """The cache-mode graph, compiled once per process without a checkpointer."""
    builder = StateGraph(CacheState, context_schema=CacheSynthesisContext)
    for name, fn in (("sample", sample), ("write_query", write_query), ("check", check), ("judge", judge),
                     ("persist", persist)):
        builder.add_node(name, fn)
    builder.add_edge(START, "sample")
    builder.add_conditional_edges("sample", _after("write_query"), ["persist", "write_query"])
    builder.add_edge("write_query", "check")
    builder.add_conditional_edges("check", _after("judge"), ["persist", "judge"])
    builder.add_edge("persist", END)
    return builder.compile(name="cache_synthesis")


def cache_synthesis_graph(checkpointer: Any = None) -> CompiledStateGraph:
    """The cache-mode graph (compiled once per process), bound to `checkpointer` if given; invoke it with
    {"index": i, "seed": s} and `context=CacheSynthesisContext(...)`."""
    graph = compiled_cache_synthesis_graph()
    return graph if checkpointer is None else graph.copy({"checkpointer": checkpointer})
