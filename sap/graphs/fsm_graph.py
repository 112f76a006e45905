"""The FSM drafting subgraph: draft -> verify (V_spec) -> draft again with the violations fed back, capped.

```
START -> draft -> verify -+-> END                       (no violations: state["fsm"] holds the FSM dump)
                          +-> draft                     (violations, fewer than max_rounds drafts so far)
                          +-> raise FSMVerificationError (violations after max_rounds drafts)
```
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from sap.agents.llm_fsm_builder import LLMFSMBuilder
from sap.fsm.build import FSMBuilder
from sap.fsm.verify import FSMVerificationError, Violation, length_range, verify_fsm
from sap.llm import LLMRoleError
from sap.model import FSM, Toolset


class FSMDraftState(TypedDict, total=False):
    """Progress of one FSM build: plain JSON in last-value channels, so that it checkpoints."""

    rounds: int  # drafts made so far
    feedback: list[str] | None  # the previous draft's violations as text, handed to the next draft
    draft: dict[str, Any] | None  # the latest draft, as an FSM JSON dump
    violations: list[dict[str, str]]  # the latest draft's violations: {"rule": ..., "detail": ...}
    fsm: dict[str, Any] | None  # the verified FSM as a JSON dump, once a draft passes


def fsm_dump(fsm: FSM) -> dict[str, Any]:
    """The FSM as plain JSON (transitions keyed "from"/"to"), which FSM.model_validate reads back."""
    return fsm.model_dump(mode="json", by_alias=True)


@dataclass(frozen=True)
class FSMDraftContext:
    """The drafting graph's runtime context: the builder, the toolset, the path lengths V_spec checks and the cap
    on drafts."""

    builder: FSMBuilder
    toolset: Toolset
    path_length: int | tuple[int, int]
    max_rounds: int = 3

    def __post_init__(self) -> None:
        """Reject a cap below one draft or a malformed length now rather than in the first verify."""
        if self.max_rounds < 1:
            raise ValueError(f"max_rounds must be at least 1, got {self.max_rounds}")
        length_range(self.path_length)

    def run_config(self) -> dict[str, Any]:
        """The invoke config: two steps per round, so the default recursion limit (25) would cut off more than
        12 rounds."""
        return {"recursion_limit": 2 * self.max_rounds + 2}


Ctx = Runtime[FSMDraftContext]


def draft(state: FSMDraftState, runtime: Ctx) -> dict[str, Any]:
    """Ask the builder for a draft, with the previous draft's violations as feedback."""
    ctx = runtime.context
    fsm = ctx.builder.build(ctx.toolset, feedback=state.get("feedback"))
    return {"draft": fsm_dump(fsm), "rounds": state.get("rounds", 0) + 1}


def verify(state: FSMDraftState, runtime: Ctx) -> dict[str, Any]:
    """Check the draft against V_spec; a passing draft becomes state["fsm"]."""
    ctx = runtime.context
    violations = verify_fsm(FSM.model_validate(state["draft"]), {t.name: t for t in ctx.toolset.tools},
                            ctx.path_length)
    return {"violations": [{"rule": v.rule, "detail": v.detail} for v in violations],
            "feedback": [str(v) for v in violations] or None,
            "fsm": None if violations else state["draft"]}


def route(state: FSMDraftState, runtime: Ctx) -> str:
    """END on a passing draft, another draft below the cap, else FSMVerificationError."""
    if not state["violations"]:
        return END
    if state["rounds"] < runtime.context.max_rounds:
        return "draft"
    raise FSMVerificationError(runtime.context.toolset.name, state["rounds"],
                               [Violation(**v) for v in state["violations"]])


@functools.cache
def compiled_fsm_graph() -> CompiledStateGraph:
    """The drafting graph, compiled once per process without a checkpointer."""
    graph = StateGraph(FSMDraftState, context_schema=FSMDraftContext)
    graph.add_node("draft", draft)
    graph.add_node("verify", verify)
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "verify")
    graph.add_conditional_edges("verify", route, {END: END, "draft": "draft"})
    return graph.compile(name="fsm_graph")


def fsm_graph(checkpointer: Any = None) -> CompiledStateGraph:
    """The drafting subgraph (compiled once per process), bound to `checkpointer` if given; invoke it with
    {"rounds": 0}, `ctx.run_config()` and `context=ctx` (an FSMDraftContext).

    Each round calls `builder.build(toolset, feedback=...)`, where feedback is None on the first round and the
    previous round's violation strings after that, then checks the draft with `verify_fsm(..., path_length)`.
    A draft with no violations ends the graph with its dump in state["fsm"]. If the draft of round `max_rounds`
    still has violations, FSMVerificationError is raised, naming the toolset, the rounds and those violations.
    """
    graph = compiled_fsm_graph()
    return graph if checkpointer is None else graph.copy({"checkpointer": checkpointer})


def build_verified_fsm(builder: FSMBuilder, toolset: Toolset, path_length: int | tuple[int, int],
                       max_rounds: int = 3) -> FSM:
    """Draft and verify `toolset`'s FSM with the subgraph; the first draft that passes V_spec.

    Raises FSMVerificationError if none of `max_rounds` drafts passes.
    """
    ctx = FSMDraftContext(builder, toolset, path_length, max_rounds)
    final = fsm_graph().invoke({"rounds": 0}, ctx.run_config(), context=ctx)
    return FSM.model_validate(final["fsm"])


def verified_fsm(builder: FSMBuilder, toolset: Toolset, path_length: int | tuple[int, int],
                 max_rounds: int = 3) -> tuple[FSM, dict[str, Any] | None]:
    """The builder's V_spec-verified FSM and None; for an LLM builder with `fallback="rule"` that has no verified
    draft at the cap (or no valid answer at all), the rule FSM and a note saying why it stands in."""
    try:
        return build_verified_fsm(builder, toolset, path_length, max_rounds), None
    except (FSMVerificationError, LLMRoleError) as exc:
        if not isinstance(builder, LLMFSMBuilder) or builder.fallback != "rule" or (
                isinstance(exc, LLMRoleError) and exc.kind != "invalid"):
            raise
        fsm = build_verified_fsm(builder.rule, toolset, path_length, max_rounds)
        reason = str(exc).splitlines()[0] + (f" first: {exc.violations[0]}" if isinstance(
            exc, FSMVerificationError) and exc.violations else "")
        return fsm, {"builder": builder.cache_key(), "used": builder.rule.cache_key(), "reason": reason}

