"""Arrays of whole objects (tau2 airline's booking): each item built from an object of an earlier result, each field
with its own provenance; the record round-trips through `sap validate` and a tampered item field is rejected."""
from __future__ import annotations

import json
import random

import pytest

from sap.agents.planner import HistoryCall, RulePlanner
from sap.executors.base import end_state_hash
from sap.export.records import record_to_trajectory, to_record
from sap.model import ArgProvenance, Tag, ToolCall, Trajectory, Turn
from sap.provenance.checks import code_check
from sap.provenance.policy import recap
from sap.toolsets.tau2_bench import INSTALL_HINT, Tau2Unavailable, booking_total, load_tau2_toolset
from sap.validate import validate_record
from helpers import request

try:
    AIRLINE = load_tau2_toolset("tau2/airline")
except Tau2Unavailable:
    AIRLINE = None
needs_tau2 = pytest.mark.skipif(AIRLINE is None, reason=f"tau2-bench is not installed: {INSTALL_HINT}")
SEARCH = {"origin": "JFK", "destination": "SFO", "date": "2024-05-20"}
FIXED = {"flight_type": "one_way", "cabin": "economy", "total_baggages": 0, "nonfree_baggages": 0, "insurance": "no"}


def _run(ex, call_id: str, name: str, args: dict, prov: dict) -> ToolCall:
    res = ex.execute(ToolCall(call_id=call_id, name=name, args_exec=args, args_prov=prov))
    assert res.ok, res.error
    return ToolCall(call_id=call_id, name=name, args_exec=args, args_prov=prov, result=res.value)


def _booking_record() -> dict:
    """A booking whose flights, passengers and payment method the rule planner took from a flight search and the
    user's profile, confirmed after the assistant's recap, as an exported record."""
    c0 = AIRLINE.sample_config(0)
    (uid,) = c0["users"]
    ex = AIRLINE.executor_factory()
    ex.reset(c0)
    profile = _run(ex, "call_0_0", "get_user_details", {"user_id": uid},
                   {"user_id": ArgProvenance(tag=Tag.initial_state, path=f"$.users.{uid}.user_id")})
    search = _run(ex, "call_0_1", "search_direct_flight", SEARCH, {k: ArgProvenance(tag=Tag.self_create) for k in SEARCH})
    search = search.model_copy(update={"group": 1})  # one call at a time (the policy)
    spec = AIRLINE.tool("book_reservation")
    req = request(spec, {p: Tag.prev_output for p in ("flights", "passengers", "payment_methods")}, turn=2,
                  history=[HistoryCall(0, 0, profile), HistoryCall(0, 1, search)], c0=c0, seed=0)
    binding = RulePlanner().bind(req)
    items = {k: p for k, p in binding.args_prov.items() if "[" in k}
    args = {"user_id": uid, **{k: binding.args_exec[k] for k in ("flights", "passengers", "payment_methods")},
            "origin": "JFK", "destination": "SFO", **FIXED}
    args["payment_methods"] = [{**args["payment_methods"][0], "amount": booking_total(args, [search.result])}]
    prov = {"user_id": ArgProvenance(tag=Tag.prev_output, turn=0, call=0, path="$.user_id"),
            **{k: ArgProvenance(tag=Tag.self_create) for k in ("origin", "destination", *FIXED)},
            **items, "payment_methods[0].amount": ArgProvenance(tag=Tag.self_create)}
    book = _run(ex, "call_2_0", "book_reservation", args, prov)
    hash_ = end_state_hash(ex)
    said = " ".join(str(v) for p in ("flights", "passengers", "payment_methods") for item in args[p] for v in item.values())
    turns = [Turn(index=0, state="s", transition=0, calls=[profile, search],
                  user_message=f"I'm {uid}. Are there direct flights from JFK to SFO on 2024-05-20?",
                  assistant_message="There is one direct flight."),
             Turn(index=1, state="s", transition=0,
                  user_message=f"Please book it one_way from JFK to SFO in economy with 0 bags, 0 paid, insurance no: "
                               f"{said}.",
                  assistant_message=recap(book, spec, random.Random(0))),
             Turn(index=2, state="s", transition=0, calls=[book], user_message="Yes, I confirm.",
                  assistant_message="Your reservation is booked.")]
    traj = Trajectory(id="booking", toolset="tau2/airline", seed=0, c0=c0, turns=turns)
    return to_record(traj, AIRLINE, {"end_state_hash": hash_})


@needs_tau2
def test_planner_builds_each_item_from_one_object_of_an_earlier_result():
    record = _booking_record()
    args = {p["name"]: p["args"] for p in record["provenance"]}["book_reservation"]
    flight = args["flights[0].flight_number"]
    assert flight["tag"] == "prev_output" and flight["source"]["path"].startswith("$[")  # a hit of the search
    assert (flight["source"]["turn"], flight["source"]["call"]) == (0, 1)
    assert args["flights[0].date"]["tag"] == "prev_user_msg"  # the date the user asked the search for
    assert args["payment_methods[0].payment_id"]["source"]["path"].startswith("$.payment_methods.")
    names = [k for k in args if k.startswith("passengers[0].")]
    assert sorted(names) == ["passengers[0].dob", "passengers[0].first_name", "passengers[0].last_name"]
    paths = {args[k]["source"]["path"].rsplit(".", 1)[0] for k in names}
    assert len(paths) == 1  # one passenger object: first name, last name and birth date of the same person


@needs_tau2
def test_item_provenance_round_trips_through_validate_and_a_tampered_field_is_rejected():
    record = _booking_record()
    assert validate_record(record, AIRLINE) == []
    traj = record_to_trajectory(record)
    assert code_check(traj) == []

    wrong_path = json.loads(json.dumps(record))
    booking = next(p for p in wrong_path["provenance"] if p["name"] == "book_reservation")
    booking["args"]["flights[0].flight_number"]["source"]["path"] = "$[0].origin"
    problems = [p.detail for p in validate_record(wrong_path, AIRLINE)]
    assert any("flights[0].flight_number" in p and "differs" in p for p in problems), problems

    missing = json.loads(json.dumps(record))
    booking = next(p for p in missing["provenance"] if p["name"] == "book_reservation")
    del booking["args"]["passengers[0].dob"]
    problems = [p.detail for p in validate_record(missing, AIRLINE)]
    assert any("item fields without provenance ['passengers[0].dob']" in p for p in problems), problems
