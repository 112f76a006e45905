"""The rule FSM as SAP builds it: tau2's policy phases (authentication, confirmation before writes) in the FSM itself,
transition conditions the walk evaluates (and refuses when unknown), and critical transitions."""
from __future__ import annotations

import random

import pytest
from helpers import spec

from sap.agents.replanner import ReplanRequest, path_problems
from sap.fsm.build import RuleFSMBuilder
from sap.fsm.conditions import ConditionError, parse
from sap.fsm.policy_walk import policy_actions
from sap.fsm.verify import verify_fsm
from sap.fsm.walk import NoPathError, sample_path
from sap.model import FSM, FSMState, StateType, Tag, ToolCall, Transition, Turn
from sap.toolsets import load_toolset
from sap.toolsets.tau2_bench import INSTALL_HINT, Tau2Unavailable

try:
    RETAIL, AIRLINE = load_toolset("tau2/retail"), load_toolset("tau2/airline")
except Tau2Unavailable:
    RETAIL = AIRLINE = None
needs_tau2 = pytest.mark.skipif(RETAIL is None, reason=f"tau2-bench is not installed: {INSTALL_HINT}")


def _types(fsm: FSM) -> dict[str, StateType]:
    return {s.id: s.type for s in fsm.states}


@needs_tau2
@pytest.mark.parametrize("name", ["tau2/retail", "tau2/airline"])
def test_tau2_rule_fsm_shows_authentication_and_confirmation_phases(name):
    ts = RETAIL if name == "tau2/retail" else AIRLINE
    fsm = RuleFSMBuilder().build(ts)
    types = _types(fsm)
    policy = ts.extra["policy"]
    auth = set(policy.must_precede[0].first)
    assert StateType.AUTH_COMPLETED in types.values() and StateType.ACTION_REQUIRED in types.values()
    assert verify_fsm(fsm, {t.name: t for t in ts.tools}, (3, 8)) == []
    writes = set(policy.confirmed())
    for t in fsm.transitions:
        if types[t.target] == StateType.AUTH_COMPLETED and types[t.source] != StateType.AUTH_COMPLETED:
            assert set(t.action) <= auth, t  # only authentication opens the authenticated phase
        if writes & set(t.action):  # a write runs only out of its own confirmation state, opened by the user's yes
            assert t.source == f"confirm_{t.action[0]}" and types[t.source] == StateType.ACTION_REQUIRED
            assert parse(t.condition).confirmed and t.is_critical
        if types[t.target] == StateType.ACTION_REQUIRED:  # the request: no call, the assistant recaps
            assert t.action == [] and types[t.source] not in (StateType.INITIAL, StateType.ACTION_REQUIRED)


@needs_tau2
def test_200_retail_walks_never_write_before_authentication_or_without_a_confirmation_turn():
    """The walk alone keeps both rules (phases and conditions); then the policy pass synthesis runs on a walk
    (`policy_actions`) inserts no call into any of them. In a record, the request turn (no call) is written back by
    `graphs.confirm.confirm_writes` as the recap exchange (tests/test_policy.py checks synthesized records)."""
    fsm = RuleFSMBuilder().build(RETAIL)
    types = _types(fsm)
    policy = RETAIL.extra["policy"]
    auth, writes = set(policy.must_precede[0].first), set(fsm.writes)
    written = 0
    for seed in range(200):
        path = sample_path(fsm, random.Random(seed), 3, 8)
        seen: set[str] = set()
        for k, e in enumerate(path):
            t = fsm.transitions[e]
            for tool in set(t.action) & writes:
                assert seen & auth, (seed, k, tool)
                before = fsm.transitions[path[k - 1]]
                assert k > 0 and before.action == [] and before.target == f"confirm_{tool}", (seed, k)
                assert types[before.target] == StateType.ACTION_REQUIRED
                written += 1
            seen.update(t.action)
        actions = [fsm.transitions[e].action for e in path]
        kept = policy_actions(policy, actions, random.Random(seed), 3)
        assert [a for _, a in kept] == [a for a in actions if a][:len(kept)], seed  # nothing inserted or reordered
    assert written >= 200  # the walks do write: on average at least once each


def _tiny(condition: str, first_type: StateType = StateType.INITIAL) -> FSM:
    """start -(ping)-> mid -(book, `condition`)-> done, and mid -(search)-> done."""
    return FSM(states=[FSMState(id="start", type=first_type), FSMState(id="mid", type=StateType.NORMAL),
                       FSMState(id="done", type=StateType.COMPLETED)],
               initial="start", finals=["done"],
               transitions=[Transition(**{"from": "start", "to": "mid"}, action=["ping"]),
                            Transition(**{"from": "mid", "to": "done"}, action=["book"], condition=condition),
                            Transition(**{"from": "mid", "to": "done"}, action=["search"])])


@pytest.mark.parametrize("condition, book_allowed", [
    ("", True), ("after:ping", True), ("after:search|ping", True), ("after:search", False),
    ("not after:ping", False), ("not after:search", True), ("after:ping and not after:search", True),
    ("confirmed", False), ("user asks to book", True),
])
def test_the_walk_takes_an_edge_only_when_its_condition_holds(condition, book_allowed):
    fsm = _tiny(condition)
    last = {fsm.transitions[sample_path(fsm, random.Random(s), 2, 2)[-1]].action[0] for s in range(40)}
    assert last == ({"book", "search"} if book_allowed else {"search"})


def test_confirmed_holds_only_out_of_an_action_required_state():
    fsm = FSM(states=[FSMState(id="start", type=StateType.INITIAL), FSMState(id="ask", type=StateType.ACTION_REQUIRED),
                      FSMState(id="done", type=StateType.ACTION_COMPLETED)],
              initial="start", finals=["done"],
              transitions=[Transition(**{"from": "start", "to": "ask"}, action=[]),
                           Transition(**{"from": "ask", "to": "done"}, action=["book"], condition="confirmed")])
    assert sample_path(fsm, random.Random(0), 2, 2) == [0, 1]
    assert verify_fsm(fsm, {"book": spec("book")}, 2) == []
    only = _tiny("confirmed")
    only = only.model_copy(update={"transitions": only.transitions[:2]})  # mid's one way out needs a yes
    with pytest.raises(NoPathError):
        sample_path(only, random.Random(0), 2, 2, tries=5)
    assert [v.rule for v in verify_fsm(only, {"book": spec("book"), "ping": spec("ping")}, 2)] == ["condition"]


def test_an_unknown_condition_is_an_error_naming_the_transition():
    fsm = _tiny("when the moon is full")
    with pytest.raises(ConditionError, match=r"transition 1 \('mid' -> 'done', book\).*'when the moon is full'"):
        sample_path(fsm, random.Random(0), 2, 2)
    with pytest.raises(ConditionError, match="empty tool"):
        parse("after:a||b")


def test_critical_marks_authentication_and_changes_that_cannot_be_taken_back():
    store = RuleFSMBuilder().build(load_toolset("store"))
    for t in store.transitions:
        irreversible = {"cancel_pending_order", "return_delivered_order_items", "exchange_delivered_order_items",
                        "checkout"} & set(t.action)
        assert t.is_critical == bool(irreversible or {"login_by_email", "login_by_name_zip"} & set(t.action)), t
    share = sum(t.is_critical for t in store.transitions) / len(store.transitions)
    assert 0.1 < share < 0.5  # was 0.7 when every action and login edge counted


def test_a_replanned_path_through_an_edge_whose_condition_fails_is_refused():
    fsm = _tiny("after:search").model_copy(update={"writes": ["ping"]})
    req = ReplanRequest(fsm, [0, 2], [], frozenset(), 2, 2, random.Random(0))
    assert path_problems(req, [0, 1, 2], [0, 2]) == []
    assert path_problems(req, [0, 1, 2], [0, 1]) == [
        "transitions[1]: 1 needs 'after:search', which does not hold after ['ping']"]


@needs_tau2
def test_a_replacement_is_found_where_alternatives_are_listed():
    """new_item_ids replaces item_ids: only the product's variants feed it, not the order lookups that find the
    order and its items (an item of the order is no variant to exchange for)."""
    fsm = RuleFSMBuilder().build(RETAIL)
    for tool in ("exchange_delivered_order_items", "modify_pending_order_items"):
        assert fsm.producers[tool]["new_item_ids"] == ["get_product_details"]
        assert "get_order_details" in fsm.producers[tool]["item_ids"]


@needs_tau2
def test_the_hand_off_is_walked_and_always_last():
    """transfer_to_human_agents (a terminal tool of both policies) is reached by plain walks, in a small share as in
    tau2's tasks, and nothing follows it."""
    for ts in (RETAIL, AIRLINE):
        fsm = RuleFSMBuilder().build(ts)
        walks = [[t for i in sample_path(fsm, random.Random(seed), 3, 8) for t in fsm.transitions[i].action]
                 for seed in range(500)]
        handed = [w for w in walks if "transfer_to_human_agents" in w]
        assert 0 < len(handed) < 150, (ts.name, len(handed))
        assert all(w[-1] == "transfer_to_human_agents" and w.count("transfer_to_human_agents") == 1 for w in handed)


def test_a_replanned_path_that_would_change_nothing_and_use_no_result_is_refused():
    fsm = _tiny("")  # ping, book and search: none of them a write, no argument from an earlier output
    req = ReplanRequest(fsm, [0, 2], [], frozenset(), 2, 2, random.Random(0))
    assert path_problems(req, [0, 1, 2], [0, 2]) == [
        "transitions: with the kept turns the dialogue would change nothing and use no earlier result (the judge "
        "rejects that): take a transition that changes something or works on a result"]
    booking = fsm.model_copy(update={"writes": ["book"]})
    assert path_problems(ReplanRequest(booking, [0, 1], [], frozenset(), 2, 2, random.Random(0)),
                         [0, 1, 2], [0, 1]) == []
    kept = Turn(index=0, state="mid", transition=0, calls=[ToolCall(
        call_id="call_0_0", name="book", args_exec={}, args_prov={}, result={}, ok=True)])
    done = ReplanRequest(booking, [0, 2], [kept], frozenset(), 2, 2, random.Random(0))
    assert path_problems(done, [0, 1, 2], [2]) == []  # a kept write: the rest may be reads
