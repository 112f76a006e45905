"""V_spec verification of FSMs (sap.fsm.verify) and the draft -> verify -> redraft subgraph (sap.graphs.fsm_graph)."""
from __future__ import annotations

import json
import pickle

import pytest
from helpers import spec
from langgraph.checkpoint.memory import InMemorySaver

from sap.fsm.build import RuleFSMBuilder
from sap.fsm.verify import (
    RULES,
    FSMVerificationError,
    Violation,
    length_range,
    verify_fsm,
)
from sap.graphs.fsm_graph import FSMDraftContext, build_verified_fsm, fsm_graph
from sap.model import FSM, FSMState, StateType, Tag, Toolset, Transition
from sap.toolsets import load_toolset

SPECS = {s.name: s for s in (
    spec("search", required={"query": {"type": "string"}}, optional={"limit": {"type": "integer"}}),
    spec("book", required={"item_id": {"type": "string"}, "date": {"type": "string"}}),
    spec("ping"),
)}
TINY = Toolset(name="tiny", description="a test toolset", tools=list(SPECS.values()),
               executor_factory=lambda: None, sample_config=lambda seed: {})


def edge(src: str, dst: str, tags: dict[str, dict[str, Tag]], action: list[str] | None = None) -> Transition:
    """A transition calling `action` (default: the tools named in `tags`, in order)."""
    return Transition(**{"from": src, "to": dst}, action=action if action is not None else list(tags),
                      provenance_tag=tags)


def good_fsm() -> FSM:
    """start -> found -> done with a loop on found and a way back from done: walks of every length >= 2."""
    return FSM(
        states=[FSMState(id="start", type=StateType.INITIAL), FSMState(id="found", type=StateType.FOUND),
                FSMState(id="done", type=StateType.ACTION_COMPLETED)],
        initial="start", finals=["done"],
        transitions=[
            edge("start", "found", {"search": {"query": Tag.self_create}}),
            edge("found", "found", {"search": {"query": Tag.prev_user_msg}}),
            edge("found", "done", {"search": {"query": Tag.initial_state},
                                   "book": {"item_id": Tag.prev_output, "date": Tag.self_create}}),
            edge("done", "found", {"search": {"query": Tag.self_create}}),
        ],
        producers={"book": {"item_id": ["search"]}})


def broken(**changes) -> FSM:
    """good_fsm() with some fields replaced."""
    return good_fsm().model_copy(update=changes)


def with_edges(*extra: Transition, states: list[FSMState] | None = None, **changes) -> FSM:
    """good_fsm() with extra transitions (and extra states)."""
    fsm = good_fsm()
    return fsm.model_copy(update={"transitions": fsm.transitions + list(extra),
                                  "states": fsm.states + list(states or []), **changes})


def rules_of(violations: list[Violation]) -> set[str]:
    return {v.rule for v in violations}


# --- verify_fsm: one broken FSM per rule ------------------------------------------------------------------------

def test_correct_fsm_has_no_violations():
    assert verify_fsm(good_fsm(), SPECS, (3, 8)) == []
    assert verify_fsm(good_fsm(), SPECS, 2) == []


def _retag_first(tags: dict[str, dict[str, Tag]]) -> FSM:
    fsm = good_fsm()
    first = fsm.transitions[0].model_copy(update={"provenance_tag": tags})
    return fsm.model_copy(update={"transitions": [first] + fsm.transitions[1:]})


def _drop_book_tag() -> FSM:
    fsm = good_fsm()
    pair = fsm.transitions[2]
    pair = pair.model_copy(update={"provenance_tag": {**pair.provenance_tag, "book": {"item_id": Tag.prev_output}}})
    return fsm.model_copy(update={"transitions": fsm.transitions[:2] + [pair] + fsm.transitions[3:]})


BROKEN = {
    "edge to a missing state": (
        with_edges(edge("found", "ghost", {"search": {"query": Tag.self_create}})),
        "transition_endpoints", ["transition 4", "'ghost'", "target"]),
    "edge from a missing state": (
        with_edges(edge("limbo", "done", {"ping": {}})),
        "transition_endpoints", ["transition 4", "'limbo'", "source"]),
    "missing initial state": (
        broken(initial="nowhere"), "transition_endpoints", ["initial state 'nowhere'"]),
    "missing final state": (
        broken(finals=["done", "ghost"]), "transition_endpoints", ["final state 'ghost'"]),
    "unreachable state": (
        with_edges(edge("orphan", "done", {"ping": {}}), states=[FSMState(id="orphan", type=StateType.NORMAL)]),
        "reachability", ["state 'orphan' is not reachable from 'start'"]),
    "non-final dead end": (
        with_edges(edge("found", "stuck", {"ping": {}}), states=[FSMState(id="stuck", type=StateType.ERROR)]),
        "dead_end", ["'stuck'"]),
    "no final state at all": (
        broken(finals=[]), "final_reachable", ["no final state"]),
    "unknown tool": (
        with_edges(edge("found", "done", {}, action=["teleport"])), "unknown_tool", ["'teleport'", "transition 4"]),
    "untagged required argument": (
        _drop_book_tag(), "missing_tag", ["transition 2", "'date'", "'book'"]),
    "untagged argument of a lone tool": (
        _retag_first({"search": {}}), "missing_tag", ["transition 0", "'query'", "'search'"]),
    "prev_output out of the initial state": (
        _retag_first({"search": {"query": Tag.prev_output}}), "initial_dependency", ["prev_output", "'query'"]),
    "prev_user_msg out of the initial state": (
        _retag_first({"search": {"query": Tag.prev_user_msg}}), "initial_dependency", ["prev_user_msg", "'query'"]),
    "two states with one id": (
        broken(states=good_fsm().states + [FSMState(id="found", type=StateType.SEARCHING)]),
        "duplicate_state", ["'found'", "2 states"]),
    "a condition outside the language": (
        with_edges(edge("found", "done", {"ping": {}}).model_copy(update={"condition": "if it rains"})),
        "condition", ["transition 4", "'if it rains'", "unknown term"]),
    "confirmed out of a state that asks nothing": (
        with_edges(edge("found", "done", {"ping": {}}).model_copy(update={"condition": "confirmed"})),
        "condition", ["transition 4", "FOUND", "never be taken"]),
    "a negative weight": (
        with_edges(edge("found", "done", {"ping": {}}).model_copy(update={"weight": -1.0})),
        "probability", ["transition 4", "weight -1.0"]),
    "a state whose out-edges all weigh nothing": (
        broken(transitions=[t.model_copy(update={"probability": 0.0}) if t.source == "found" else t
                            for t in good_fsm().transitions]),
        "probability", ["state 'found'", "cannot choose"]),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_each_broken_fsm_is_rejected_by_exactly_its_rule(case):
    fsm, rule, fragments = BROKEN[case]
    violations = verify_fsm(fsm, SPECS, (3, 8))
    assert violations, case
    assert rules_of(violations) == {rule}
    text = " | ".join(str(v) for v in violations)
    for fragment in fragments:
        assert fragment in text


def test_final_unreachable_by_any_path_is_named():
    # done is a final state but nothing leads to it (and it has an edge of its own, so it is no dead end)
    fsm = FSM(states=[FSMState(id="start", type=StateType.INITIAL), FSMState(id="loop", type=StateType.NORMAL),
                      FSMState(id="done", type=StateType.COMPLETED)],
              initial="start", finals=["done"],
              transitions=[edge("start", "loop", {"ping": {}}), edge("loop", "start", {"ping": {}}),
                           edge("done", "start", {"ping": {}})])
    violations = verify_fsm(fsm, SPECS, 3)
    assert [v.rule for v in violations] == ["reachability", "final_reachable"]
    assert "state 'done' is not reachable from 'start'" in str(violations[0])


def test_path_length_rule_on_a_length_the_fsm_cannot_make():
    violations = verify_fsm(good_fsm(), SPECS, 1)  # the shortest walk to done takes 2 turns
    assert [v.rule for v in violations] == ["path_length"]
    assert "exactly 1 transition " in violations[0].detail
    assert verify_fsm(good_fsm(), SPECS, (0, 1))[0].rule == "path_length"


def _odd_cycle_fsm() -> FSM:
    """start -> a -> b -> end, with b -> a: walks to `end` have 3, 5, 7, ... transitions."""
    return FSM(states=[FSMState(id=s, type=StateType.NORMAL) for s in ("start", "a", "b", "end")],
               initial="start", finals=["end"],
               transitions=[edge("start", "a", {"ping": {}}), edge("a", "b", {"ping": {}}),
                            edge("b", "a", {"ping": {}}), edge("b", "end", {"ping": {}})])


@pytest.mark.parametrize("length, ok", [
    (3, True), (4, False), (5, True), ((4, 4), False), ((4, 5), True), ((0, 2), False), ((6, 6), False),
    (10**6, False), (10**6 + 1, True), ((10**6, 10**6 + 1), True),
])
def test_path_length_uses_cycles_exactly(length, ok):
    rules = [v.rule for v in verify_fsm(_odd_cycle_fsm(), SPECS, length)]
    assert rules == ([] if ok else ["path_length"])


def test_zero_length_path_needs_a_final_initial_state():
    fsm = _odd_cycle_fsm()
    assert [v.rule for v in verify_fsm(fsm, SPECS, 0)] == ["path_length"]
    assert verify_fsm(fsm.model_copy(update={"finals": ["end", "start"]}), SPECS, 0) == []


def test_all_violations_are_returned_in_rule_order_and_deterministically():
    fsm = FSM(states=[FSMState(id="start", type=StateType.INITIAL), FSMState(id="island", type=StateType.NORMAL),
                      FSMState(id="done", type=StateType.COMPLETED)],
              initial="start", finals=["done", "ghost"],
              transitions=[edge("start", "done", {"search": {"query": Tag.prev_output}}),
                           edge("done", "void", {"ping": {}}),
                           edge("start", "done", {"book": {}}),
                           edge("start", "done", {}, action=["warp"])])
    violations = verify_fsm(fsm, SPECS, 2)
    assert [v.rule for v in violations] == [
        "transition_endpoints", "transition_endpoints", "reachability", "dead_end", "path_length",
        "unknown_tool", "missing_tag", "missing_tag", "initial_dependency"]
    assert [v.rule for v in violations] == sorted((v.rule for v in violations), key=RULES.index)
    assert verify_fsm(fsm, SPECS, 2) == violations
    assert verify_fsm(FSM.model_validate(fsm.model_dump(by_alias=True)), SPECS, 2) == violations


def test_violation_is_frozen_and_prints_its_rule():
    v = Violation("reachability", "state 'x' is not reachable from 'start'")
    assert str(v) == "[reachability] state 'x' is not reachable from 'start'"
    with pytest.raises(AttributeError):
        v.rule = "other"  # type: ignore[misc]
    assert v == Violation("reachability", "state 'x' is not reachable from 'start'")


@pytest.mark.parametrize("bad", [-1, (5, 3), (-1, 2), "3", (1, 2, 3), (1.0, 2), True])
def test_malformed_path_length_is_a_value_error(bad):
    with pytest.raises(ValueError):
        length_range(bad)
    with pytest.raises(ValueError):
        verify_fsm(good_fsm(), SPECS, bad)


# --- the rule builder's FSMs ------------------------------------------------------------------------------------

_BUILT: dict[str, tuple[FSM, Toolset]] = {}


@pytest.mark.parametrize("name", ["store", "travel", "filesystem"])
def test_rule_builder_fsms_pass_v_spec(name):
    if name not in _BUILT:
        toolset = load_toolset(name)
        _BUILT[name] = RuleFSMBuilder().build(toolset), toolset
    fsm, toolset = _BUILT[name]
    assert verify_fsm(fsm, {t.name: t for t in toolset.tools}, (3, 8)) == []


# --- the subgraph -----------------------------------------------------------------------------------------------

class ScriptedBuilder:
    """Returns the FSMs of `script` in turn (the last one from then on) and records the feedback it was given."""

    def __init__(self, *script: FSM, fix_on_feedback: FSM | None = None) -> None:
        self.script = list(script)
        self.fix_on_feedback = fix_on_feedback
        self.feedback: list[list[str] | None] = []

    def build(self, toolset: Toolset, feedback: list[str] | None = None) -> FSM:
        assert toolset is TINY
        self.feedback.append(list(feedback) if feedback is not None else None)
        if feedback and self.fix_on_feedback is not None:
            return self.fix_on_feedback
        return self.script[min(len(self.feedback), len(self.script)) - 1]

    def cache_key(self) -> str:
        return "scripted"


DEAD_END = BROKEN["non-final dead end"][0]


def test_subgraph_redrafts_with_the_violations_as_feedback():
    builder = ScriptedBuilder(DEAD_END, fix_on_feedback=good_fsm())
    fsm = build_verified_fsm(builder, TINY, (3, 8))
    assert fsm == good_fsm()
    assert len(builder.feedback) == 2
    assert builder.feedback[0] is None
    assert builder.feedback[1] == [str(v) for v in verify_fsm(DEAD_END, SPECS, (3, 8))]
    assert builder.feedback[1] == ["[dead_end] non-final state 'stuck' has no out-edge"]


def test_subgraph_stops_after_one_draft_when_it_passes():
    builder = ScriptedBuilder(good_fsm())
    assert build_verified_fsm(builder, TINY, 2) == good_fsm()
    assert builder.feedback == [None]


@pytest.mark.parametrize("max_rounds", [1, 3, 4])
def test_subgraph_raises_at_the_cap_naming_every_violation(max_rounds):
    unknown = BROKEN["unknown tool"][0]
    always = unknown.model_copy(update={"finals": ["done", "ghost"]})  # two rules broken
    builder = ScriptedBuilder(DEAD_END, always)
    with pytest.raises(FSMVerificationError) as info:
        build_verified_fsm(builder, TINY, (3, 8), max_rounds=max_rounds)
    assert len(builder.feedback) == max_rounds  # one draft per round, no more
    err = info.value
    last = verify_fsm(always if max_rounds > 1 else DEAD_END, SPECS, (3, 8))
    assert err.toolset == "tiny" and err.rounds == max_rounds and err.violations == last
    message = str(err)
    assert "'tiny'" in message and f"after {max_rounds} round" in message
    for v in last:
        assert str(v) in message
    if max_rounds > 1:
        assert rules_of(err.violations) == {"transition_endpoints", "unknown_tool"}
        # every redraft was told what was wrong with the draft before it
        assert builder.feedback[1] == [str(v) for v in verify_fsm(DEAD_END, SPECS, (3, 8))]
        assert all(fb == [str(v) for v in last] for fb in builder.feedback[2:])
    restored = pickle.loads(pickle.dumps(err))
    assert str(restored) == message and restored.violations == err.violations


def test_default_cap_is_three_drafts():
    builder = ScriptedBuilder(DEAD_END)
    with pytest.raises(FSMVerificationError, match=r"after 3 rounds[\s\S]*\[dead_end\]"):
        build_verified_fsm(builder, TINY, (3, 8))
    assert len(builder.feedback) == 3


def test_many_rounds_fit_in_the_recursion_limit():
    builder = ScriptedBuilder(*([DEAD_END] * 19), good_fsm())
    assert build_verified_fsm(builder, TINY, (3, 8), max_rounds=20) == good_fsm()
    assert len(builder.feedback) == 20


def test_subgraph_state_is_plain_json_and_checkpoints():
    graph = fsm_graph(checkpointer=InMemorySaver())
    ctx = FSMDraftContext(ScriptedBuilder(DEAD_END, good_fsm()), TINY, (3, 8))
    config = {"configurable": {"thread_id": "t"}}
    final = graph.invoke({"rounds": 0}, {**config, **ctx.run_config()}, context=ctx)
    assert final["rounds"] == 2 and final["violations"] == [] and final["feedback"] is None
    saved = graph.get_state(config).values
    assert json.loads(json.dumps(saved)) == saved
    assert FSM.model_validate(saved["fsm"]) == good_fsm()
    assert set(graph.get_graph().nodes) >= {"draft", "verify"}


def test_bad_subgraph_arguments():
    with pytest.raises(ValueError):
        FSMDraftContext(ScriptedBuilder(good_fsm()), TINY, (3, 8), max_rounds=0)
    with pytest.raises(ValueError):
        FSMDraftContext(ScriptedBuilder(good_fsm()), TINY, (8, 3))
