"""tau2-bench toolsets: tool conversion, c0 sampling, the executor against tau2's own environment, synthesis with
the rule agents replaying to the recorded database hash, and the install hint when tau2 is missing."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sap.api import synthesize
from sap.toolsets.tau2_bench import INSTALL_HINT, Tau2Unavailable, load_tau2_toolset
from sap.validate import validate_file, validate_record
from helpers import call

try:
    RETAIL = load_tau2_toolset("tau2/retail")
    AIRLINE = load_tau2_toolset("tau2/airline")
except Tau2Unavailable:
    RETAIL = AIRLINE = None
needs_tau2 = pytest.mark.skipif(RETAIL is None, reason=f"tau2-bench is not installed: {INSTALL_HINT}")
ROOT = Path(__file__).resolve().parent.parent


def _order(c0: dict, status: str) -> str:
    return next(oid for oid, o in c0["orders"].items() if o["status"] == status)


@needs_tau2
def test_tools_convert_with_refs_inlined_and_write_tools_not_read_only():
    assert len(RETAIL.tools) == 15 and len(AIRLINE.tools) == 14
    for spec in RETAIL.tools + AIRLINE.tools:
        assert "$ref" not in json.dumps(spec.parameters) and "$defs" not in spec.parameters
    flights = AIRLINE.tool("book_reservation").properties["flights"]
    assert set(flights["items"]["properties"]) == {"flight_number", "date"}
    assert RETAIL.tool("cancel_pending_order").read_only is False
    assert RETAIL.tool("get_order_details").read_only is True
    assert "policy" in RETAIL.extra["docs"].lower() and RETAIL.extra["docs"] != AIRLINE.extra["docs"]


@needs_tau2
def test_c0_is_a_seeded_user_with_their_own_records():
    a, b = RETAIL.sample_config(3), RETAIL.sample_config(3)
    assert a == b
    (uid, user), = a["users"].items()
    assert set(a["orders"]) == set(user["orders"])
    assert {o["status"] for o in a["orders"].values()} >= {"pending", "delivered"}
    for seed in range(20):  # three orders a tool can still act on: an action consumes its order
        orders = RETAIL.sample_config(seed)["orders"].values()
        assert sum(o["status"] in ("pending", "delivered") for o in orders) >= 3
    assert len({next(iter(RETAIL.sample_config(s)["users"])) for s in range(10)}) > 5
    c0 = AIRLINE.sample_config(0)
    (user,) = c0["users"].values()
    assert set(c0["reservations"]) <= set(user["reservations"]) and c0["reservations"]


@needs_tau2
def test_write_call_matches_tau2_environment_hash_and_a_fresh_reset_is_clean():
    from tau2.data_model.message import ToolCall as Tau2Call
    from tau2.domains.retail.environment import get_environment

    c0 = RETAIL.sample_config(1)
    pending = _order(c0, "pending")
    ex = RETAIL.executor_factory()
    ex.reset(c0)
    clean = ex.state_hash()
    res = ex.execute(call("cancel_pending_order", {"order_id": pending, "reason": "ordered by mistake"}))
    assert res.ok and res.value["status"] == "cancelled"
    assert set(ex.state()["orders"]) == {pending}

    env = get_environment()  # tau2's own path: db.json loaded by tau2, the call made by its orchestrator's method
    msg = env.get_response(Tau2Call(id="1", name="cancel_pending_order",
                                    arguments={"order_id": pending, "reason": "ordered by mistake"}))
    assert not msg.error
    assert ex.state_hash() == env.get_db_hash() != clean

    again = RETAIL.executor_factory()
    again.reset(c0)
    assert again.state_hash() == clean and again.state() == {}


@needs_tau2
def test_failed_calls_are_error_results_and_change_nothing():
    c0 = RETAIL.sample_config(2)
    ex = RETAIL.executor_factory()
    ex.reset(c0)
    before = ex.state_hash()
    delivered = _order(c0, "delivered")
    res = ex.execute(call("cancel_pending_order", {"order_id": delivered, "reason": "ordered by mistake"}))
    assert not res.ok and res.error == "Error: Non-pending order cannot be cancelled"
    bad = ex.execute(call("cancel_pending_order", {"order_id": _order(c0, "pending")}))
    assert not bad.ok and "reason" in bad.error
    assert not ex.execute(call("no_such_tool", {})).ok
    assert ex.state_hash() == before and ex.state() == {}


@needs_tau2
def test_c0_records_reach_the_database_and_bad_c0_is_named():
    c0 = RETAIL.sample_config(4)
    oid = _order(c0, "delivered")
    c0["orders"][oid]["status"] = "pending"  # what a repair patch does
    ex = RETAIL.executor_factory()
    ex.reset(c0)
    assert ex.execute(call("get_order_details", {"order_id": oid})).value["status"] == "pending"
    assert ex.execute(call("cancel_pending_order", {"order_id": oid, "reason": "no longer needed"})).ok
    with pytest.raises(ValueError, match="unknown collection"):
        ex.reset({"customers": {}})


@needs_tau2
@pytest.mark.parametrize("toolset", ["tau2/retail", "tau2/airline"])
def test_rule_agents_synthesize_records_that_replay_to_the_recorded_hash(toolset):
    ts = RETAIL if toolset == "tau2/retail" else AIRLINE
    summary = synthesize(ts, 5, seed=7)
    assert summary.accepted == 5
    assert all(len(r["provenance"]) >= 2 and r["meta"]["end_state_hash"] for r in summary.records)
    assert all(validate_record(r, ts) == [] for r in summary.records)
    tampered = json.loads(json.dumps(summary.records[0]))
    tampered["meta"]["end_state_hash"] = "0" * 64
    problems = validate_record(tampered, ts)
    assert len(problems) == 1 and "end_state_hash" in problems[0].detail


@needs_tau2
def test_cli_validate_checks_tau2_records(tmp_path):
    out = tmp_path / "r.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    made = subprocess.run([sys.executable, "-m", "sap.cli", "synthesize", "--toolset", "tau2/airline", "-n", "3",
                           "-o", str(out), "--db", f"sqlite:///{tmp_path / 'r.db'}"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert made.returncode == 0, made.stderr
    count, problems = validate_file(out)
    assert count == 3 and problems == []


def test_missing_tau2_lists_toolsets_and_names_the_install_command(tmp_path):
    shadow = tmp_path / "shadow" / "tau2"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'tau2'\", name='tau2')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), str(ROOT)])}
    listed = subprocess.run([sys.executable, "-m", "sap.cli", "toolsets", "--json"], capture_output=True, text=True,
                            env=env, timeout=60)
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["store"]["tools"] == 18 and rows["tau2/retail"]["tools"] is None
    assert INSTALL_HINT in rows["tau2/airline"]["description"]
    run = subprocess.run([sys.executable, "-m", "sap.cli", "synthesize", "--toolset", "tau2/retail", "-n", "1",
                          "-o", str(tmp_path / "x.jsonl")], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and INSTALL_HINT in run.stderr


@needs_tau2
def test_a_payment_change_can_take_any_of_the_customers_own_methods():
    """modify_pending_order_payment's new method: one of the customer's (c0's profile copy or a fetched profile),
    not only one an order was already paid with (that one is the current method, which tau2 refuses)."""
    from sap.provenance.fields import candidates

    spec = {t.name: t for t in RETAIL.tools}["modify_pending_order_payment"]
    schema = spec.properties["payment_method_id"]
    for seed in range(12):
        c0 = RETAIL.sample_config(seed)
        (user,) = c0["users"].values()
        found = {c.value for c in candidates("payment_method_id", schema, c0, spec.aliases("payment_method_id"))}
        assert set(user["payment_methods"]) <= found, (seed, sorted(found))
    profile = {"user_id": "u", "payment_methods": {"gift_card_1": {"id": "gift_card_1", "source": "gift_card"}}}
    assert {c.value for c in candidates("payment_method_id", schema, profile, spec.aliases("payment_method_id"))} \
        == {"gift_card_1"}
