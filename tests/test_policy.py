"""Toolset policies: each rule passes and fails on hand-made dialogues with a message naming it, a malformed policy
is refused naming file, rule and field, the walk and the confirmation exchange enforce the rules, and synthesized
tau2 records follow every rule of their domain."""
from __future__ import annotations

import random

import pytest

from sap.audit import audit_records
from sap.fsm.policy_walk import policy_actions
from sap.graphs.confirm import confirm_writes
from sap.model import ArgProvenance, Tag, Trajectory, Turn
from sap.provenance.checks import CONFIRM_QUESTIONS, answers_recap, code_check
from sap.provenance.policy import (
    PolicyError,
    load_policy_file,
    module_policy,
    policy_check,
    policy_from_data,
    recap,
    recap_details,
    violations,
)
from sap.toolsets.modules import module_from_path, toolset_from_module
from helpers import call, spec

SPECS = {s.name: s for s in [
    spec("login", "Log the user in.", {"email": {"type": "string"}}),
    spec("get_order", "Get an order.", {"order_id": {"type": "string"}}),
    spec("get_booking", "Get a booking.", {"booking_id": {"type": "string"}}),
    spec("cancel_order", "Cancel an order.", {"order_id": {"type": "string"}}),
    spec("refund", "Refund a booking.", {"amount": {"type": "number"}}),
    spec("transfer", "Transfer to a human agent.", {"summary": {"type": "string"}}),
]}
for name in ("cancel_order", "refund"):
    SPECS[name] = SPECS[name].model_copy(update={"read_only": False})
for name in ("login", "get_order", "get_booking", "transfer"):
    SPECS[name] = SPECS[name].model_copy(update={"read_only": True})
HANDOFF = "You are being transferred."
RULES = {"must_precede": [{"first": ["login"], "before": "*"}], "confirm_before": {"tools": "writes"},
         "terminal": {"tools": ["transfer"], "message": HANDOFF}, "one_at_a_time": True,
         "value_rules": [{"tool": "refund", "param": "amount", "per_unit": [100, 50], "unit_tool": "get_booking",
                          "unit_path": "$.passengers"}]}
POLICY = policy_from_data(RULES, "test").resolved(list(SPECS.values()))
ORDER = {"order_id": "#W1", "status": "pending"}
BOOKING = {"booking_id": "B1", "passengers": [{"name": "A"}, {"name": "B"}]}


def _traj(*turns: tuple[str, list, str]) -> Trajectory:
    """A dialogue of (user message, calls, assistant message) turns, each call its own parallel group."""
    made = []
    for i, (user, calls, reply) in enumerate(turns):
        calls = [c.model_copy(update={"group": g}) for g, c in enumerate(calls)]
        made.append(Turn(index=i, state="s", transition=0, calls=calls, user_message=user, assistant_message=reply))
    return Trajectory(id="t", toolset="test", seed=1, c0={}, turns=made)


def _login():
    return call("login", {"email": "a@b.c"}, result="u1")


def _compliant() -> Trajectory:
    cancel = call("cancel_order", {"order_id": "#W1"}, result={"status": "cancelled"})
    return _traj(("I am a@b.c, please cancel order #W1.", [_login(), call("get_order", {"order_id": "#W1"},
                                                                          result=ORDER)],
                  recap(cancel, SPECS["cancel_order"], random.Random(0))),
                 ("Yes, please go ahead.", [cancel], "Done."),
                 ("Booking B1 was cancelled by you, I want 200 back.",
                  [call("get_booking", {"booking_id": "B1"}, result=BOOKING)],
                  recap(call("refund", {"amount": 200}), SPECS["refund"], random.Random(1))),
                 ("Yes.", [call("refund", {"amount": 200}, result="ok"),
                           call("transfer", {"summary": "refund done"}, result="Transfer successful")], HANDOFF))


def test_a_compliant_dialogue_passes_every_rule():
    assert violations(_compliant(), POLICY) == []


def _rules(traj: Trajectory) -> set[str]:
    return {p.split(":")[0] for p in violations(traj, POLICY)}


def test_acting_before_the_required_call_breaks_must_precede():
    traj = _compliant()
    traj.turns[0].calls.reverse()
    problems = violations(traj, POLICY)
    assert _rules(traj) == {"policy must_precede"}
    assert "turn 0 call 0 (get_order)" in problems[0] and "login" in problems[0]


def test_a_write_without_the_users_yes_to_a_recap_breaks_confirm_before():
    traj = _compliant()
    traj.turns[1].user_message = "Cancel it now and tell me about 3 other orders?"
    assert _rules(traj) == {"policy confirm_before"}
    traj = _compliant()
    traj.turns[0].assistant_message = f"I will cancel an order. {CONFIRM_QUESTIONS[0]}"  # the details are missing
    assert "recap" in violations(traj, POLICY)[0]
    merged = _compliant()  # the write in the request's own turn, no exchange before it
    merged.turns[0].calls.append(merged.turns[1].calls[0])
    assert "not the first call" in " ".join(violations(merged, POLICY))


def test_anything_after_the_terminal_call_breaks_terminal():
    traj = _compliant()
    traj.turns[3].calls.reverse()
    assert _rules(traj) >= {"policy terminal"}
    traj = _compliant()
    traj.turns[3].assistant_message = "Anything else?"
    assert violations(traj, POLICY) == [
        f"policy terminal: turn 3 call 1 (transfer): the assistant's last message is not {HANDOFF!r}"]


def test_two_calls_in_one_group_break_one_at_a_time():
    traj = _compliant()
    traj.turns[0].calls[1].group = 0
    assert violations(traj, POLICY) == ["policy one_at_a_time: turn 0 makes 2 calls in 1 parallel groups"]


def test_an_amount_off_the_per_passenger_rates_breaks_the_value_rule():
    traj = _compliant()
    traj.turns[3].calls[0].args_exec["amount"] = 150
    traj.turns[2].assistant_message = recap(traj.turns[3].calls[0], SPECS["refund"], random.Random(2))
    problems = violations(traj, POLICY)
    assert problems == ["policy value_rules: turn 3 call 0 (refund) amount=150, allowed [100, 200]"]


def test_the_policy_check_adds_policy_violations_to_the_code_check():
    traj = _compliant()
    traj.turns[0].calls.reverse()
    assert not any(p.startswith("policy") for p in code_check(traj)) and policy_check(traj, None) == code_check(traj)
    assert any(p.startswith("policy must_precede") for p in policy_check(traj, POLICY))


def test_star_and_writes_expand_to_tool_names():
    assert POLICY.must_precede[0].before == ["get_order", "get_booking", "cancel_order", "refund"]
    assert POLICY.confirmed() == {"cancel_order", "refund"}


@pytest.mark.parametrize(("text", "rule", "field"), [
    ('[[must_precede]]\nfirst = "login"\n', "must_precede[0]", "first"),
    ('[[must_precede]]\nfirst = ["login"]\nafter = ["x"]\n', "must_precede[0]", "after"),
    ('[terminal]\ntools = []\n', "terminal", "tools"),
    ('[[value_rules]]\ntool = "refund"\nparam = "amount"\nunit_tool = "get_booking"\nunit_path = "$.p"\n',
     "value_rules[0]", "per_unit"),
    ('one_at_a_time = "sometimes"\n', "one_at_a_time", None),
])
def test_a_malformed_policy_file_is_refused_naming_file_rule_and_field(tmp_path, text, rule, field):
    path = tmp_path / "shop.policy.toml"
    path.write_text(text)
    with pytest.raises(PolicyError) as err:
        load_policy_file(path)
    assert err.value.file == str(path) and err.value.rule == rule and err.value.field == field
    assert str(err.value).startswith(f"{path}: rule {rule!r}")


def test_a_policy_naming_an_unknown_tool_or_unreadable_toml_is_refused(tmp_path):
    path = tmp_path / "p.policy.toml"
    path.write_text('[confirm_before]\ntools = ["cancel_ordr"]\n')
    with pytest.raises(PolicyError, match=r"p.policy.toml: rule 'confirm_before' field 'tools': unknown tool "
                                          r"'cancel_ordr'"):
        load_policy_file(path).resolved(list(SPECS.values()))
    path.write_text("one_at_a_time = \n")
    with pytest.raises(PolicyError, match="p.policy.toml: cannot read policy"):
        load_policy_file(path)


DOMAIN = '''
NAME = "shop"
class Shop:
    def login(self, email: str) -> str:
        """Log the user in."""
        return "u1"
    def cancel_order(self, order_id: str) -> str:
        """Cancel an order."""
        return "cancelled"
TOOL_CLASS = Shop
def sample_config(seed):
    return {}
'''


def test_a_domain_module_declares_its_policy_as_POLICY_or_a_toml_file_beside_it(tmp_path):
    module_file = tmp_path / "shop.py"
    module_file.write_text(DOMAIN + 'POLICY = {"must_precede": [{"first": ["login"]}], "one_at_a_time": True}\n')
    ts = toolset_from_module(module_from_path(module_file))
    assert ts.extra["policy"].must_precede[0].before == ["cancel_order"] and ts.extra["policy"].one_at_a_time
    module_file.write_text(DOMAIN)
    (tmp_path / "shop.policy.toml").write_text('[terminal]\ntools = ["cancel_order"]\n')
    assert toolset_from_module(module_from_path(module_file)).extra["policy"].terminal.tools == ["cancel_order"]
    (tmp_path / "shop.policy.toml").write_text('[terminal]\ntools = ["shutdown"]\n')
    with pytest.raises(PolicyError, match=r"shop.policy.toml: rule 'terminal' field 'tools': unknown tool"):
        toolset_from_module(module_from_path(module_file))
    (tmp_path / "shop.policy.toml").unlink()
    assert module_policy(module_from_path(module_file)) is None


def test_the_walk_inserts_required_calls_first_and_ends_at_a_terminal_call():
    rng = random.Random(0)
    turns = policy_actions(POLICY, [["get_order"], ["cancel_order", "transfer", "get_order"], ["get_booking"]], rng,
                           min_turns=2)
    assert turns == [(0, ["login", "get_order"]), (1, ["cancel_order", "transfer"])]
    once = policy_from_data({"must_precede": [{"first": ["login"], "once": True}]}, "t").resolved(list(SPECS.values()))
    assert policy_actions(once, [["get_order"], ["login"], ["login", "get_booking"]], rng, min_turns=2) == [
        (0, ["login", "get_order"]), (2, ["get_booking"])]  # authenticated once: later logins are left out
    short = policy_actions(POLICY, [["transfer"], ["get_order"], ["get_booking"]], rng, min_turns=3)
    assert short == [(1, ["login", "get_order"]), (2, ["get_booking"])]  # too early a transfer is left out


def test_confirmation_exchanges_split_turns_before_each_write_and_follow_provenance():
    order = call("get_order", {"order_id": "#W1"}, result=ORDER)
    cancel = call("cancel_order", {"order_id": "#W1"}, result={"status": "cancelled"},
                  prov={"order_id": ArgProvenance(tag=Tag.prev_output, turn=1, call=1, path="$.order_id")})
    traj = _traj(("Hi, I am a@b.c.", [_login()], "Hello."),
                 ("Check booking B1 and cancel order #W1.", [call("get_booking", {"booking_id": "B1"}, result=BOOKING), order,
                                               cancel], "Cancelled."))
    out = confirm_writes(traj, POLICY, SPECS)
    assert [t.user_message for t in out.turns][:2] == ["Hi, I am a@b.c.", "Check booking B1 and cancel order #W1."]
    assert [[c.name for c in t.calls] for t in out.turns] == [["login"], ["get_booking", "get_order"],
                                                              ["cancel_order"]]
    asked = out.turns[1].assistant_message  # the recap: the action and its values in words, then a question
    assert "order #W1" in asked and "order_id" not in asked and answers_recap(out, 2)
    assert out.turns[2].assistant_message == "Cancelled." and out.turns[2].user_message.startswith("Yes")
    moved = out.turns[2].calls[0].args_prov["order_id"]
    assert (moved.turn, moved.call) == (1, 1) and out.turns[2].index == 2
    assert policy_check(out, POLICY) == []


@pytest.fixture(scope="module")
def tau2_records():
    tau2 = pytest.importorskip("sap.toolsets.tau2_bench")
    try:
        toolsets = [tau2.load_tau2_toolset(n) for n in tau2.TOOLSET_NAMES]
    except tau2.Tau2Unavailable:
        pytest.skip("tau2-bench is not installed")
    from sap.api import synthesize

    return {ts.name: (ts, synthesize(ts, 4, seed=3).records) for ts in toolsets}


def test_synthesized_tau2_records_follow_every_rule_of_their_domain(tau2_records):
    from sap.export.records import record_to_trajectory
    from sap.validate import validate_record

    for name, (ts, records) in tau2_records.items():
        assert len(records) == 4, name
        policy = ts.extra["policy"]
        for record in records:
            traj = record_to_trajectory(record)
            assert violations(traj, policy) == [], (name, record["id"])
            assert validate_record(record, ts) == []
            assert traj.calls()[0][2].name in (policy.must_precede[0].first if name == "tau2/retail"
                                               else [c.name for _, _, c in traj.calls()])
        writes = [(t, c) for r in records for t, _, c in record_to_trajectory(r).calls() if c.name in policy.confirmed()]
        assert writes, f"{name}: no write to confirm"
        report = audit_records(records)
        assert report.looked["policy_violation"] == len(records) and report.findings["policy_violation"] == []


def test_audit_reports_a_tau2_record_that_breaks_its_policy(tau2_records):
    ts, records = tau2_records["tau2/retail"]
    broken = [dict(r) for r in records[:2]]
    messages = list(broken[0]["messages"])
    user_turns = [i for i, m in enumerate(messages) if m["role"] == "user"]
    first_call = next(i for i, m in enumerate(messages) if m.get("tool_calls"))
    del messages[first_call:first_call + 2]  # the authentication call and its result
    broken[0]["messages"] = messages
    assert user_turns
    report = audit_records(broken)
    assert [f.where for f in report.findings["policy_violation"]] == [broken[0]["id"]]
    assert "must_precede" in report.findings["policy_violation"][0].detail


def test_a_recap_states_values_as_a_person_does_every_one_verbatim():
    args = {"order_id": "#W7381650", "address1": "4454 River Road", "address2": "Suite 725", "city": "Jacksonville",
            "state": "FL", "country": "USA", "zip": "32244"}
    said = recap_details(args)
    assert said == "order #W7381650; address 4454 River Road, Suite 725, Jacksonville, FL 32244, USA"
    said = recap_details({"order_id": "#W1", "item_ids": ["11", "12"], "payment_method_id": "paypal_1",
                          "reason": "no longer needed"})
    assert said == 'order #W1; items 11 and 12; payment method paypal_1; reason "no longer needed"'
    assert "address 1" not in recap_details({**args, "address2": ""}) and "ID" not in said
