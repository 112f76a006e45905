"""The FSM drafting subgraph: draft -> verify (V_spec) -> draft again with the violations fed back, capped.

```
START -> draft -> verify -+-> END                       (no violations: state["fsm"] holds the FSM dump)
                          +-> draft                     (violations, fewer than max_rounds drafts so far)
                          +-> raise FSMVerificationError (violations after max_rounds drafts)
```
"""
from __future__ import annotations

from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from sap.agents.fsm_builder import FSMBuilder
from sap.fsm.verify import FSMVerificationError, Violation, length_range, verify_fsm
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


def fsm_graph(builder: FSMBuilder, toolset: Toolset, path_length: int | tuple[int, int], max_rounds: int = 3, *,
              checkpointer: Any = None):
    """Compile the drafting subgraph for `toolset`; invoke it with {"rounds": 0}.

    Each round calls `builder.build(toolset, feedback=...)`, where feedback is None on the first round and the
    previous round's violation strings after that, then checks the draft with `verify_fsm(..., path_length)`.
    A draft with no violations ends the graph with its dump in state["fsm"]. If the draft of round `max_rounds`
    still has violations, FSMVerificationError is raised, naming the toolset, the rounds and those violations.
    """
    if max_rounds < 1:
        raise ValueError(f"max_rounds must be at least 1, got {max_rounds}")
    length_range(path_length)  # reject a malformed length now rather than in the first verify
    specs = {t.name: t for t in toolset.tools}

    def draft(state: FSMDraftState) -> dict[str, Any]:
        fsm = builder.build(toolset, feedback=state.get("feedback"))
        return {"draft": fsm_dump(fsm), "rounds": state.get("rounds", 0) + 1}

    def verify(state: FSMDraftState) -> dict[str, Any]:
        violations = verify_fsm(FSM.model_validate(state["draft"]), specs, path_length)
        return {"violations": [{"rule": v.rule, "detail": v.detail} for v in violations],
                "feedback": [str(v) for v in violations] or None,
                "fsm": None if violations else state["draft"]}

    def route(state: FSMDraftState) -> str:
        if not state["violations"]:
            return END
        if state["rounds"] < max_rounds:
            return "draft"
        raise FSMVerificationError(toolset.name, state["rounds"], [Violation(**v) for v in state["violations"]])

    graph = StateGraph(FSMDraftState)
    graph.add_node("draft", draft)
    graph.add_node("verify", verify)
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "verify")
    graph.add_conditional_edges("verify", route, {END: END, "draft": "draft"})
    # two steps per round; the default recursion limit (25) would cut off more than 12 rounds
    return graph.compile(checkpointer=checkpointer, name="fsm_graph").with_config(recursion_limit=2 * max_rounds + 2)


def build_verified_fsm(builder: FSMBuilder, toolset: Toolset, path_length: int | tuple[int, int],
                       max_rounds: int = 3) -> FSM:
    """Draft and verify `toolset`'s FSM with the subgraph; the first draft that passes V_spec.

    Raises FSMVerificationError if none of `max_rounds` drafts passes.
    """
    final = fsm_graph(builder, toolset, path_length, max_rounds).invoke({"rounds": 0})
    return FSM.model_validate(final["fsm"])
