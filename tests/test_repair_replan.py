"""Repair (c0 patches replayed before they are kept, at most three rounds) and path re-planning, by rule and
through real HTTP to a scripted OpenAI-compatible server."""
from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

import sap.graphs.synthesis as synthesis
from sap.agents.llm_common import LLMRole
from sap.agents.repair import (
    LLMRepairer,
    RuleRepairer,
    apply_patch,
    op_problem,
    repair_call,
)
from sap.agents.replanner import (
    LLMReplanner,
    ReplanRequest,
    RuleReplanner,
    allowed_edges,
    avoided,
    path_problems,
)
from sap.api import synthesize
from sap.fsm.build import RuleFSMBuilder
from sap.graphs.fsm_graph import build_verified_fsm
from sap.graphs.synthesis import SynthesisContext, synthesis_graph
from sap.llm import LLMClient, ModelConfig
from sap.model import FSM, FSMState, StateType, Tag, ToolCall, Transition, Turn
from sap.testing.role_model import role_model
from sap.testing.scripted_llm import Reply, ScriptedLLMServer
from sap.toolsets import load_toolset
from sap.validate import validate_record

BALANCE = 1.0


def _role(server: ScriptedLLMServer, role: str) -> LLMRole:
    return LLMRole(LLMClient(), ModelConfig(model="openai/scripted", api_base=server.api_base, timeout=5,
                                            backoff_base=0.01), role)


def _fed_back(server: ScriptedLLMServer, k: int) -> str:
    return server.requests[k]["messages"][-1]["content"]


@pytest.fixture(scope="module")
def travel():
    return load_toolset("travel")


@pytest.fixture(scope="module")
def poor_travel(travel):
    """Travel with a wallet too small for any booking."""
    def sample(seed: int) -> dict:
        c0 = travel.sample_config(seed)
        c0["traveler"]["wallet_balance"] = BALANCE
        return c0
    return replace(travel, sample_config=sample)


def _call(call_id: str, name: str, **args) -> ToolCall:
    return ToolCall(call_id=call_id, name=name, args_exec=args, args_prov={})


def _executed(toolset, c0: dict, calls: list[ToolCall]) -> list[ToolCall]:
    ex = toolset.executor_factory()
    ex.reset(c0)
    out = []
    for c in calls:
        res = ex.execute(c)
        out.append(c.model_copy(update={"result": res.value if res.ok else None, "ok": res.ok, "error": res.error}))
    return out


def _booking_case(toolset, *earlier: str) -> tuple[dict, list[ToolCall], ToolCall, str]:
    """c0 with a wallet of 1.0, committed lookups (`earlier` tools with no arguments, then the flight's details),
    and the book_flight call that fails on the balance, with its error."""
    c0 = toolset.sample_config(3)
    flight = c0["flights"][0]["flight_id"]
    calls = [_call(f"call_{i}_0", name) for i, name in enumerate(earlier)]
    calls.append(_call(f"call_{len(earlier)}_0", "get_flight_details", flight_id=flight))
    committed = _executed(toolset, c0, calls)
    book = _call(f"call_{len(calls)}_0", "book_flight", flight_id=flight, passenger_name="Ann Lee", seat_class="economy")
    error = _executed(toolset, c0, committed + [book])[-1].error
    assert error.startswith(f"wallet balance {BALANCE} is less than the price")
    return c0, committed, book, error


def _configs(c0: dict):
    return lambda patch: apply_patch(c0, patch)


def test_rule_repair_raises_the_balance_and_the_failing_call_succeeds(poor_travel):
    c0, committed, book, error = _booking_case(poor_travel)
    price = c0["flights"][0]["cabins"]["economy"]["price"]
    repaired, log = repair_call(RuleRepairer(), poor_travel, _configs(c0), [], book, error, committed)
    assert repaired is not None
    assert repaired.patch == [{"path": "$.traveler.wallet_balance", "value": float(price)}]
    assert repaired.result.ok and repaired.result.value["booking_type"] == "flight"
    assert repaired.c0["traveler"]["wallet_balance"] == price and c0["traveler"]["wallet_balance"] == BALANCE
    assert [e["outcome"] for e in log] == ["ok"]


def test_a_patch_that_changes_an_earlier_result_is_rejected(poor_travel):
    c0, committed, book, error = _booking_case(poor_travel, "get_traveler_profile")  # the profile shows the wallet
    repaired, log = repair_call(RuleRepairer(), poor_travel, _configs(c0), [], book, error, committed)
    assert repaired is None
    assert log[0]["patch"][0]["path"] == "$.traveler.wallet_balance"
    assert log[0]["outcome"].startswith("rejected: replay of call call_0_0 (get_traveler_profile)")


def test_patches_are_checked_against_c0(travel):
    c0 = travel.sample_config(3)
    assert op_problem(c0, {"path": "$.traveler.wallet_balance", "value": 10.0}) is None
    n = len(c0["bookings"])
    assert op_problem(c0, {"path": f"$.bookings[{n}]", "value": {"booking_id": "X"}}) is None  # appends a record
    assert "does not exist" in op_problem(c0, {"path": f"$.bookings[{n + 1}]", "value": {}})
    assert "string" in op_problem(c0, {"path": "$.traveler.wallet_balance", "value": "lots"})
    assert "not found" in op_problem(c0, {"path": "$.nope.x", "value": 1})


def test_llm_repair_uses_the_answer_after_invalid_ones_are_fed_back(poor_travel):
    c0, committed, book, error = _booking_case(poor_travel)
    wallet = "$.traveler.wallet_balance"
    with ScriptedLLMServer(responder=role_model) as server:
        server.push(Reply(json.dumps({"patch": [{"path": "$.traveler.wallet", "value": 5000.0}], "reason": "r"})),
                    Reply(json.dumps({"patch": [{"path": wallet, "value": "plenty"}], "reason": "r"})),
                    Reply(json.dumps({"patch": [{"path": wallet, "value": 5000.0}], "reason": "top up"})))
        repaired, log = repair_call(LLMRepairer(_role(server, "repair")), poor_travel, _configs(c0), [], book, error,
                                    committed)
    assert "patch[0].path" in _fed_back(server, 1) and "patch[0].value" in _fed_back(server, 2)
    assert "Code's suggestion: " in server.requests[0]["messages"][1]["content"]
    assert repaired.patch == [{"path": wallet, "value": 5000.0}]  # the model's value, not the rule's price
    assert repaired.result.value["wallet_balance"] < 5000.0 and log[0]["outcome"] == "ok"


def test_repair_stops_after_three_rounds(poor_travel):
    c0, committed, book, error = _booking_case(poor_travel)
    useless = [{"path": "$.traveler.currency", "value": v} for v in ("EUR", "GBP", "JPY", "CHF")]
    with ScriptedLLMServer(responder=role_model) as server:
        server.push(*(Reply(json.dumps({"patch": [op], "reason": "r"})) for op in useless))
        repaired, log = repair_call(LLMRepairer(_role(server, "repair")), poor_travel, _configs(c0), [], book, error,
                                    committed)
    assert repaired is None and len(server.requests) == 3
    assert [e["round"] for e in log] == [1, 2, 3]
    assert all(e["outcome"].startswith("still failing: wallet balance") for e in log)
    assert "$.traveler.currency" in server.requests[2]["messages"][1]["content"]  # earlier rounds are shown


def test_synthesis_repairs_a_short_balance_and_exports_the_patched_c0(poor_travel):
    """Seed 10: four of its six records are repaired, four bookings against one without repairs (seed 2, used before,
    had none once travel's flight searches found flights: which slots book depends on the walk)."""
    summary = synthesize(poor_travel, 6, seed=10)
    patched = [r for r in summary.records if r["meta"].get("c0_patch")]
    assert patched
    for record in summary.records:
        assert validate_record(record, poor_travel) == []  # every call replays on the exported (patched) c0
    for record in patched:
        for op in record["meta"]["c0_patch"]:
            if op["path"] == "$.traveler.wallet_balance":
                assert record["initial_config"]["traveler"]["wallet_balance"] == op["value"] > BALANCE
    assert synthesize(poor_travel, 6, seed=10).records == summary.records  # the rule repair is deterministic
    unrepaired = synthesize(poor_travel, 6, seed=10, max_repairs=0)
    assert not any(r["meta"].get("c0_patch") for r in unrepaired.records)

    def bookings(s):
        return sum(p["name"] in ("book_flight", "book_hotel") for r in s.records for p in r["provenance"])
    assert bookings(summary) > bookings(unrepaired)


@pytest.fixture(scope="module")
def store_fsm():
    return build_verified_fsm(RuleFSMBuilder(), load_toolset("store"), (3, 8))


def _replan_request(fsm, blacklist: set[str], kept: int = 1, seed: int = 0) -> ReplanRequest:
    first = next(i for i in fsm.out_edges(fsm.initial) if fsm.transitions[i].action == ["login_by_email"])
    turns = [Turn(index=0, state=fsm.transitions[first].target, transition=first)][:kept]
    return ReplanRequest(fsm, [first, 0, 0], turns, frozenset(blacklist), 3, 8, random.Random(seed))


def _used_tools(fsm, path: list[int]) -> set[str]:
    return {tool for i in path for tool in fsm.transitions[i].action}


@pytest.mark.parametrize("seed", range(5))
def test_rule_replanner_avoids_the_blacklist(store_fsm, seed):
    blacklist = {"get_user_details", "get_order_details"}
    req = _replan_request(store_fsm, blacklist, seed=seed)
    path = RuleReplanner().replan(req)
    assert path[0] == req.path[0]
    assert not _used_tools(store_fsm, path[1:]) & blacklist
    walk_limits = replace(req, max_turns=req.max_turns + 2)  # the walk may run two turns past max to reach a final
    assert path_problems(walk_limits, list(range(len(store_fsm.transitions))), path[1:]) == []


def test_a_refused_state_is_avoided_for_every_tool_that_needs_it():
    """After "only pending orders allow this action" the re-planned path avoids every tool acting on a pending order
    (none is left), not the other order tools; a tool one of whose attempts failed for another reason (it may have
    held the one delivered order), or whose error names the tool itself, widens nothing."""
    specs = {t.name: t for t in load_toolset("store").tools}
    refused = avoided({"modify_pending_order_payment": [
        "order '#W3' is 'delivered'; only pending orders allow this action",
        "order '#W4' is 'cancelled'; only pending orders allow this action"]}, specs)
    assert refused == {"modify_pending_order_payment", "cancel_pending_order", "modify_pending_order_address",
                       "modify_pending_order_items"}
    assert avoided({"return_delivered_order_items": ["item(s) ['2'] are not in order '#W7'",
                                                     "order '#W4' is 'cancelled'; only delivered orders allow this action"],
                    "get_product_details": ["incoherent call: it repeats call call_0_0 (get_product_details) and "
                                            "observes no change"]}, specs) == {"return_delivered_order_items",
                                                                              "get_product_details"}


def test_llm_replanner_uses_the_answer_after_a_gap_is_fed_back(store_fsm):
    blacklist = {"get_user_details"}
    req = _replan_request(store_fsm, blacklist)
    listed = allowed_edges(req)
    first = next(i for i in listed if store_fsm.transitions[i].source == req.start)
    gap = next(i for i in listed if store_fsm.transitions[i].source != store_fsm.transitions[first].target)
    with ScriptedLLMServer(responder=role_model) as server:
        server.push(Reply(json.dumps({"transitions": [first, gap]})))
        path = LLMReplanner(_role(server, "replanner")).replan(req)
    assert len(server.requests) == 2
    assert f"transitions[1]: {gap} starts at" in _fed_back(server, 1)
    assert path == req.path[:1] + json.loads(role_model(server.requests[1]))["transitions"]
    assert not _used_tools(store_fsm, path[1:]) & blacklist
    assert "get_user_details" not in server.requests[0]["messages"][1]["content"].split("Transitions you may use:")[1]


def test_llm_replanner_makes_no_call_when_no_path_avoids_the_blacklist(store_fsm):
    everything = _used_tools(store_fsm, list(range(len(store_fsm.transitions))))
    with ScriptedLLMServer(responder=role_model) as server:
        assert LLMReplanner(_role(server, "replanner")).replan(_replan_request(store_fsm, everything)) is None
    assert server.requests == []


class _Fixed:
    """An FSM builder that returns a given FSM."""

    def __init__(self, fsm: FSM) -> None:
        self.fsm = fsm

    def build(self, toolset, feedback=None) -> FSM:
        return self.fsm

    def cache_key(self) -> str:
        return f"fixed:{self.fsm.model_dump_json()}"


def test_a_patch_made_for_a_turn_that_is_cut_off_is_dropped(poor_travel, monkeypatch):
    """Turn 1 books (after a balance repair), then moves the flight booking's dates, which cannot work."""
    monkeypatch.setattr(synthesis, "_FSM_CACHE", {})
    details = {"flight_id": Tag.initial_state}
    book = {"flight_id": Tag.prev_output, "passenger_name": Tag.initial_state, "seat_class": Tag.self_create}
    move = {"booking_id": Tag.prev_output, "check_in": Tag.self_create, "check_out": Tag.self_create}
    fsm = FSM(states=[FSMState(id="start", type=StateType.INITIAL), FSMState(id="found", type=StateType.FOUND),
                      FSMState(id="end", type=StateType.COMPLETED)], initial="start", finals=["end"],
              transitions=[Transition(**{"from": "start", "to": "found"}, action=["get_flight_details"],
                                      provenance_tag={"get_flight_details": details}),
                           Transition(**{"from": "found", "to": "end"}, action=["book_flight", "modify_booking_dates"],
                                      provenance_tag={"book_flight": book, "modify_booking_dates": move})],
              producers={"book_flight": {"flight_id": ["get_flight_details"]},
                         "modify_booking_dates": {"booking_id": ["book_flight"]}})
    ctx = SynthesisContext(toolset=poor_travel, fsm_builder=_Fixed(fsm), min_turns=2, max_turns=2, min_keep_turns=1)
    # seed 3: a flight the wallet cannot pay (at seed 4 the travel world of flight-number ids picks a full cabin,
    # whose repair cannot replay the details read before it; 19 of seeds 0-29 fit)
    out = synthesis_graph().invoke({"index": 0, "seed": 3}, context=ctx)
    assert [(e["tool"], e["outcome"]) for e in out["repair_log"]] == [("book_flight", "ok")]
    assert [t["index"] for t in out["turns"]] == [0]  # a flight booking has no stay dates to move: turn 1 is cut
    assert out["c0_patch"] == [] and ctx.c0(out) is ctx.initial_config(3)
