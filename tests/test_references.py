"""References a reader can resolve (selectors), coherent calls (no-op writes and repeats refused) and
entity-coherent bindings."""
import random
import re

import pytest
from langgraph.runtime import Runtime

from helpers import call, request, spec
from sap.agents.messenger import RuleMessenger
from sap.agents.requests import _LATEST, _MINE_NOW, _WHERE_LATEST, found_reference
from sap.audit.checks import ORDINALS, ambiguous_reference
from sap.audit.dialogues import AuditCall, AuditDialogue
from sap.agents.planner import HistoryCall, RulePlanner, StatedValue
from sap.executors.python_object import PythonObjectExecutor
from sap.export.records import record_to_trajectory, to_record
from sap.fsm.build import RuleFSMBuilder
from sap.graphs.coherence import INCOHERENT, execute_coherently, noop_writes
from sap.graphs.synthesis import SynthesisContext, execute_call
from sap.model import ArgProvenance, Selector, Tag, Toolset, Trajectory, Turn
from sap.provenance.checks import code_check, states_selector
from sap.provenance.selectors import output_selector

STR = {"type": "string"}
LOOKUP = spec("get_user_details", "Look up a user.", {"user_id": STR})
CANCEL = spec("cancel_order", "Cancel an order.", {"order_id": STR})
ORDERS = {"user_id": "u1", "orders": [{"order_id": "#1", "status": "pending"},
                                      {"order_id": "#2", "status": "delivered"}]}


def _lookup(result=ORDERS, call_id="a"):
    return call("get_user_details", {"user_id": "u1"}, result=result, call_id=call_id)


def _bind(tool, tags, history, turn=1, seed=0, **kw):
    return RulePlanner().bind(request(tool, tags, turn=turn, history=history, seed=seed, **kw))


def _trajectory(history_turns, bound_call):
    turns = [Turn(index=k, state="s", transition=0, calls=calls) for k, calls in enumerate(history_turns)]
    turns.append(Turn(index=len(turns), state="s", transition=0, calls=[bound_call]))
    return Trajectory(id="t", toolset="demo", seed=1, c0={}, turns=turns)


def _toolset(*tools):
    return Toolset(name="demo", description="", tools=list(tools), executor_factory=lambda: None,
                   sample_config=lambda seed: {})


@pytest.mark.parametrize("seed", range(6))
def test_selector_round_trip_bound_stated_checked_and_exported(seed):
    lookup = _lookup()
    b = _bind(CANCEL, {"order_id": Tag.prev_output}, [HistoryCall(0, 0, lookup)], seed=seed)
    prov = b.args_prov["order_id"]
    other = {"#1": "delivered", "#2": "pending"}[b.args_exec["order_id"]]
    assert prov.selector == Selector(noun="order", field="status", value={"pending": "delivered",
                                                                           "delivered": "pending"}[other])
    cancel = call("cancel_order", b.args_exec, prov=b.args_prov, result={"ok": True}, call_id="b")
    traj = RuleMessenger().write(_trajectory([[lookup]], cancel).turns, {"get_user_details": LOOKUP,
                                                                           "cancel_order": CANCEL}, random.Random(0))
    traj = _trajectory([[lookup]], cancel).model_copy(update={"turns": traj})
    message = traj.turns[1].user_message
    assert re.search(rf"\bstatus(?: is)? {prov.selector.value}\b", message) and b.args_exec["order_id"] not in message
    assert code_check(traj) == []
    back = record_to_trajectory(to_record(traj, _toolset(LOOKUP, CANCEL), {}))
    assert back.turns[1].calls[0].args_prov["order_id"].selector == prov.selector
    traj.turns[1].user_message = "Cancel the order from the user details."
    assert code_check(traj) == [f"turn 1 call 0 (cancel_order) arg order_id: unresolvable reference: the user message "
                                f"states neither {{\"field\": \"status\", \"noun\": \"order\", \"value\": "
                                f"\"{prov.selector.value}\"}} nor {b.args_exec['order_id']!r}"]
    traj.turns[1].calls[0].args_prov["order_id"].selector = None
    assert "ambiguous reference" in code_check(traj)[0]


def test_an_element_without_a_distinct_field_is_named_by_position_or_by_value_in_the_same_turn():
    listing = {"file_names": ["a.txt", "b.txt", "c.txt"]}
    ls = call("ls", {}, result=listing, call_id="a")
    rm = spec("rm", "Delete a file.", {"file_name": STR})
    later = _bind(rm, {"file_name": Tag.prev_output}, [HistoryCall(0, 0, ls)], seed=1)
    pos = listing["file_names"].index(later.args_exec["file_name"]) + 1
    assert later.args_prov["file_name"].selector == Selector(noun="file name", position=pos)
    same = _bind(rm, {"file_name": Tag.prev_output}, [HistoryCall(1, 0, ls)], seed=1)
    assert same.args_prov["file_name"].selector == Selector(noun="file name", named=True)


def test_of_several_results_of_one_tool_only_the_most_recent_is_referred_to():
    first = call("get_order", {"order_id": "#1"}, result={"order_id": "#1", "status": "pending"}, call_id="a")
    second = call("get_order", {"order_id": "#2"}, result={"order_id": "#2", "status": "pending"}, call_id="b")
    history = [HistoryCall(0, 0, first), HistoryCall(1, 0, second)]
    for seed in range(5):
        b = _bind(CANCEL, {"order_id": Tag.prev_output}, history, turn=2, seed=seed)
        assert b.args_exec["order_id"] == "#2"
        assert b.args_prov["order_id"].selector == Selector(noun="result", latest=True)


def test_a_latest_reference_from_the_users_side_carries_a_recency_word_the_audit_reads():
    sel = Selector(noun="result", latest=True)
    for seed in range(20):
        words = found_reference("title", sel, "meeting issue", random.Random(seed))
        assert ORDINALS.search(words), words
        assert states_selector(words, sel, "meeting issue"), words
    assert not states_selector("use my title as it stands now", sel, "meeting issue")
    for phrase in _LATEST + _WHERE_LATEST + _MINE_NOW:  # every way a latest selector is said, read as which one
        assert ORDINALS.search(phrase) and states_selector(phrase, sel, "meeting issue"), phrase


TRIP = {"reservation_id": "R1", "flights": [
    {"flight_number": "HAT1", "origin": "SEA", "destination": "PHX", "date": "2024-05-16"},
    {"flight_number": "HAT2", "origin": "PHX", "destination": "LAS", "date": "2024-05-16"}]}
SEARCH = spec("search_direct_flight", "Search direct flights.", {"origin": STR, "date": STR})


@pytest.mark.parametrize("seed", range(6))
def test_a_value_at_several_places_of_a_listing_is_named_and_the_message_passes_the_audit(seed):
    trip = call("get_reservation_details", {"reservation_id": "R1"}, result=TRIP, call_id="a")
    b = _bind(SEARCH, {"origin": Tag.prev_output, "date": Tag.prev_output}, [HistoryCall(0, 0, trip)], seed=seed)
    assert b.args_prov["date"].selector == Selector(noun="flight", named=True)  # every leg flies that day
    if b.args_exec["origin"] == "PHX":  # the connection: destination of one leg, origin of the other
        assert b.args_prov["origin"].selector == Selector(noun="flight", named=True)
    search = call("search_direct_flight", b.args_exec, prov=b.args_prov, result=[], call_id="b")
    specs = {"get_reservation_details": spec("get_reservation_details", "Get a reservation.", {"reservation_id": STR}),
             "search_direct_flight": SEARCH}
    turns = RuleMessenger().write(_trajectory([[trip]], search).turns, specs, random.Random(seed))
    traj = _trajectory([[trip]], search).model_copy(update={"turns": turns})
    assert code_check(traj) == [], traj.turns[1].user_message
    dialogue = AuditDialogue("t", {t.index: t.user_message for t in traj.turns},
                             [AuditCall(t.index, c.name, c.args_exec, c.result,
                                        {n: {"tag": p.tag.value} for n, p in c.args_prov.items()})
                              for t in traj.turns for c in t.calls])
    assert ambiguous_reference(dialogue) == (2, []), traj.turns[1].user_message


def test_a_field_value_another_entry_holds_under_any_key_does_not_name_an_element():
    legs = {"flights": [{"flight_number": "HAT1", "origin": "MIA", "destination": "JFK", "cabin": "economy"},
                        {"flight_number": "HAT2", "origin": "JFK", "destination": "MIA", "cabin": "business"}]}
    assert output_selector(legs, "$.flights[0].flight_number", "HAT1", False) == \
        Selector(noun="flight", field="cabin", value="economy")  # not "origin MIA": the other flight lands there
    legs["flights"][1]["cabin"] = "economy"
    assert output_selector(legs, "$.flights[1].flight_number", "HAT2", False) == Selector(noun="flight", position=2)


def test_an_entry_of_a_list_named_listing_is_not_called_a_list():
    stocks = {"stock_list": ["AAPL", "GOOG", "MSFT"]}
    assert output_selector(stocks, "$.stock_list[1]", "GOOG", False) == Selector(noun="stock", position=2)
    watched = {"watchlist": ["ZETA", "AMZN"]}
    assert output_selector(watched, "$.watchlist[0]", "ZETA", False) == Selector(noun="entry", position=1)


def test_of_two_lookups_one_without_the_place_only_the_most_recent_is_referred_to():
    kettle = call("get_product_details", {"product_id": "p1"}, call_id="a",
                  result={"product_id": "p1", "variants": {"111": {"item_id": "111", "price": 10.5}}})
    lamp = call("get_product_details", {"product_id": "p2"}, call_id="b",
                result={"product_id": "p2", "variants": {"222": {"item_id": "222", "price": 20.5}}})
    buy = spec("buy_item", "Buy an item.", {"item_id": STR})
    for seed in range(5):
        b = _bind(buy, {"item_id": Tag.prev_output}, [HistoryCall(0, 0, kettle), HistoryCall(0, 1, lamp)], seed=seed)
        assert b.args_exec["item_id"] == "222"  # the kettle's variant is in no way "the latest lookup's"
        assert b.args_prov["item_id"].selector == Selector(noun="result", latest=True)
    older = ArgProvenance(tag=Tag.prev_output, turn=0, call=0, path='$.variants["111"].item_id')
    traj = _trajectory([[kettle, lamp]], call("buy_item", {"item_id": "111"}, prov={"item_id": older}))
    traj.turns[1].user_message = "Buy the item 111."
    assert any("a newer get_product_details result" in p for p in code_check(traj))


ORDER = {"order_id": "#W1", "items": [{"name": "Tea Kettle", "item_id": "111", "price": 10.5},
                                     {"name": "Desk Lamp", "item_id": "222", "price": 20.5},
                                     {"name": "Backpack", "item_id": "333", "price": 30.5}],
         "fulfillments": [{"tracking_id": ["9"], "item_ids": ["111", "222"]}]}
RETURN = spec("return_items", "Return items.", {"item_ids": {"type": "array", "items": STR}})


@pytest.mark.parametrize("seed", range(4))
def test_a_list_of_ids_of_listed_things_is_referred_to_by_their_names(seed):
    lookup = call("get_order_details", {"order_id": "#W1"}, result=ORDER, call_id="a")
    sel = Selector(noun="item", field="name", value=["Tea Kettle", "Desk Lamp"])
    assert output_selector(ORDER, "$.fulfillments[0].item_ids", ["111", "222"], False) == sel
    prov = ArgProvenance(tag=Tag.prev_output, turn=0, call=0, path="$.fulfillments[0].item_ids", selector=sel)
    ret = call("return_items", {"item_ids": ["111", "222"]}, prov={"item_ids": prov}, result={"ok": True}, call_id="b")
    specs = {"get_order_details": spec("get_order_details", "Get an order.", {"order_id": STR}), "return_items": RETURN}
    turns = RuleMessenger().write(_trajectory([[lookup]], ret).turns, specs, random.Random(seed))
    traj = _trajectory([[lookup]], ret).model_copy(update={"turns": turns})
    message = traj.turns[1].user_message
    assert "Tea Kettle" in message and "Desk Lamp" in message and "Backpack" not in message, message
    assert code_check(traj) == [], message
    dialogue = AuditDialogue("t", {t.index: t.user_message for t in traj.turns},
                             [AuditCall(t.index, c.name, c.args_exec, c.result,
                                        {n: {"tag": p.tag.value} for n, p in c.args_prov.items()})
                              for t in traj.turns for c in t.calls])
    assert ambiguous_reference(dialogue) == (1, []), message
    traj.turns[1].user_message = "Return the items of that order."
    assert any("unresolvable reference" in p for p in code_check(traj))


def test_a_parameter_stated_twice_is_referred_to_by_which_statement():
    stated = [StatedValue(0, "city", "Oslo"), StatedValue(1, "city", "Rome")]
    tool = spec("book", "Book.", {"city": STR})
    seen = set()
    for seed in range(12):
        b = RulePlanner().bind(request(tool, {"city": Tag.prev_user_msg}, turn=2, stated=stated, seed=seed))
        if b.args_prov["city"].turn in (0, 1) and not b.virtual:
            sel = b.args_prov["city"].selector
            seen.add((b.args_exec["city"], sel.latest, sel.position))
    assert seen == {("Rome", True, None), ("Oslo", False, 1)}


class Account:
    """A tiny account: an address to set, notes to add, and a read of both."""

    def _load_scenario(self, config):
        self.address = config.get("address", "1 Main St")
        self.notes = []

    def set_address(self, address: str):
        """Set the address."""
        self.address = address
        return {"address": self.address}

    def relocate(self, address: str):
        """Move to an address (a write whose name is no update verb)."""
        self.address = address
        return {"address": self.address}

    def add_note(self, text: str):
        """Add a note."""
        self.notes.append(text)
        return {"notes": list(self.notes)}

    def get_account(self):
        """Read the account."""
        return {"address": self.address, "notes": list(self.notes)}


SET, ADD, GET = (spec("set_address", "Set the address.", {"address": STR}), spec("add_note", "Add a note.", {"text": STR}),
                 spec("get_account", "Read the account."))


def _account():
    ex = PythonObjectExecutor([Account])
    ex.reset({"address": "1 Main St"})
    return ex


def test_a_write_that_changes_nothing_is_refused_and_one_that_changes_something_is_not():
    ex = _account()
    res, changed = execute_coherently(ex, SET, call("set_address", {"address": "1 Main St"}), [], [])
    assert not res.ok and res.error.startswith(INCOHERENT) and "changes nothing" in res.error and not changed
    res, changed = execute_coherently(ex, SET, call("set_address", {"address": "2 Side St"}), [], [])
    assert res.ok and changed


RELOCATE = spec("relocate", "Move to an address.", {"address": STR})


def test_a_write_of_an_fsm_action_tool_that_changes_nothing_is_refused_by_the_planner_loop_and_the_code_check():
    same = call("relocate", {"address": "1 Main St"}, call_id="m1")
    res, changed = execute_coherently(_account(), RELOCATE, same, [], [])
    assert res.ok and not changed  # not known as a write: a pure-looking call may change nothing
    res, changed = execute_coherently(_account(), RELOCATE, same, [], [], writes=["relocate"])
    assert not res.ok and res.error.startswith(INCOHERENT) and "changes nothing" in res.error
    moved = call("relocate", {"address": "2 Side St"}, call_id="m2")
    assert execute_coherently(_account(), RELOCATE, moved, [], [], writes=["relocate"])[0].ok
    specs = {"relocate": RELOCATE}
    problems = noop_writes(_account(), {"address": "1 Main St"}, [moved, same], specs, ["relocate"], check=False)
    assert problems == []  # moved away, then back: both change the state
    problems = noop_writes(_account(), {"address": "1 Main St"}, [same, moved], specs, ["relocate"], check=False)
    assert len(problems) == 1 and "m1 (relocate)" in problems[0]


def test_the_rule_fsm_lists_the_probed_action_tools_as_writes():
    ts = Toolset(name="acct", description="", tools=[ADD, GET],
                 executor_factory=lambda: PythonObjectExecutor([Account]), sample_config=lambda seed: {"address": "x"})
    assert RuleFSMBuilder(probe_seeds=1).build(ts).writes == ["add_note"]  # not the read


def test_a_repeated_identical_call_is_refused_until_the_state_changed_in_between():
    ex = _account()
    first = call("add_note", {"text": "hi"}, call_id="n1")
    res, changed = execute_coherently(ex, ADD, first, [], [])
    assert res.ok and changed
    again = call("add_note", {"text": "hi"}, call_id="n2")
    res, _ = execute_coherently(ex, ADD, again, [first.model_copy(update={"result": res.value})], ["n1"])
    assert not res.ok and "nothing changed since" in res.error
    assert ex.state()["Account"]["notes"] == ["hi"]  # refused before it ran
    moved = call("set_address", {"address": "2 Side St"}, call_id="s1")
    execute_coherently(ex, SET, moved, [], [])
    res, _ = execute_coherently(ex, ADD, again, [first, moved], ["n1", "s1"])
    assert res.ok


def test_a_repeated_read_must_observe_a_change():
    ex = _account()
    read = call("get_account", {}, call_id="r1")
    res, _ = execute_coherently(ex, GET.model_copy(update={"read_only": True}), read, [], [])
    read = read.model_copy(update={"result": res.value})
    note = call("note_elsewhere", {}, call_id="x")  # a change the read does not observe
    res, _ = execute_coherently(ex, GET, call("get_account", {}, call_id="r2"), [read, note], ["x"])
    assert not res.ok and "observes no change" in res.error


def test_execute_call_sends_a_refused_call_back_to_the_planner_and_at_the_cap_to_replan():
    ts = Toolset(name="acct", description="", tools=[SET, ADD, GET], executor_factory=lambda: PythonObjectExecutor([Account]),
                 sample_config=lambda seed: {"address": "1 Main St"})
    ctx = SynthesisContext(toolset=ts, max_attempts=2)
    pending = call("set_address", {"address": "1 Main St"}, call_id="call_0_0").model_dump(mode="json")
    state = {"index": 0, "seed": 1, "turns": [], "turn_pos": 0, "call_pos": 0, "attempts": 0, "pending": pending,
             "failed_args": [], "attempt_log": []}
    out = execute_call(state, Runtime(context=ctx))
    assert out.goto == "plan_call" and out.update["failed_args"] == [{"address": "1 Main St"}]
    out = execute_call({**state, "attempts": 1}, Runtime(context=ctx))
    assert out.goto == "replan"  # a patched c0 cannot make a no-op meaningful: no repair round


@pytest.mark.parametrize("seed", range(8))
def test_credentials_are_bound_from_one_account(seed):
    c0 = {"username": "ann", "password": "pw-ann", "tweets": {"1": {"id": 1, "username": "bob", "content": "x"}}}
    tweets = call("get_user_tweets", {}, result=[{"id": 2, "username": "bob"}, {"id": 3, "username": "cy"},
                                                 {"id": 4, "username": "ann"}], call_id="t")
    login = spec("authenticate", "Log in.", {"username": STR, "password": STR})
    b = _bind(login, {"username": Tag.prev_output, "password": Tag.initial_state}, [HistoryCall(0, 0, tweets)],
              seed=seed, c0=c0)
    assert (b.args_exec["username"], b.args_exec["password"]) == ("ann", "pw-ann")


@pytest.mark.parametrize("seed", range(8))
def test_a_read_binds_name_parts_and_zip_of_one_user(seed):
    c0 = {"users": {"u1": {"name": {"first_name": "Ann", "last_name": "Lee"}, "address": {"zip": "111"}},
                    "u2": {"name": {"first_name": "Bo", "last_name": "Kim"}, "address": {"zip": "222"}}}}
    find = spec("find_user", "Find a user.", {"first_name": STR, "last_name": STR, "zip": STR}).model_copy(
        update={"read_only": True})
    b = _bind(find, dict.fromkeys(("first_name", "last_name", "zip"), Tag.initial_state), [], seed=seed, c0=c0)
    assert (b.args_exec["first_name"], b.args_exec["last_name"], b.args_exec["zip"]) in {("Ann", "Lee", "111"),
                                                                                          ("Bo", "Kim", "222")}


@pytest.mark.parametrize("seed", range(8))
def test_an_item_is_not_exchanged_for_itself(seed):
    items = call("get_order", {}, result={"items": [{"item_id": "i1"}, {"item_id": "i2"}]}, call_id="o")
    exchange = spec("exchange", "Exchange an item.", {"item_id": STR, "new_item_id": STR})
    b = _bind(exchange, {"item_id": Tag.prev_output, "new_item_id": Tag.prev_output}, [HistoryCall(0, 0, items)],
              seed=seed)
    assert b.args_exec["item_id"] != b.args_exec["new_item_id"]


def test_a_variant_is_named_by_its_option_and_an_amount_as_money():
    """Variants told apart by an option ("the variant in white"), not by price; where only an amount tells two
    things apart it is said as money, and the code check still finds the selector in the words."""
    from sap.agents.requests import criterion

    product = {"variants": [{"item_id": "1", "options": {"color": "black"}, "price": 119.37},
                            {"item_id": "2", "options": {"color": "white"}, "price": 143.62}]}
    sel = output_selector(product, "$.variants[1].item_id", "2", False)
    assert (sel.field, sel.value) == ("color", "white")
    said = {criterion(sel, random.Random(s)) for s in range(30)}
    assert any(w.startswith("in white") for w in said) and all("white" in w for w in said), said
    methods = {"methods": [{"id": "g1", "balance": 254.0}, {"id": "g2", "balance": 80.5}]}
    sel = output_selector(methods, "$.methods[0].id", "g1", False)
    assert (sel.field, sel.value) == ("balance", 254.0)
    words = [criterion(sel, random.Random(s)) for s in range(20)]
    assert all("$254.00" in w for w in words), words
    assert all(states_selector(f"pay with the gift card {w}", sel, "g1") for w in words)


def test_a_field_a_later_result_shows_changed_names_nothing():
    """An order listed as pending and cancelled since is not "the order whose status is pending": the selector
    moves on to a field that still holds (or the position)."""
    listing = {"orders": [{"order_id": "#W1", "status": "pending", "total": 10.0},
                          {"order_id": "#W2", "status": "delivered", "total": 20.0}]}
    assert output_selector(listing, "$.orders[0].order_id", "#W1", False).field == "status"
    cancelled = {"order_id": "#W1", "status": "cancelled"}
    sel = output_selector(listing, "$.orders[0].order_id", "#W1", False, later=[cancelled])
    assert (sel.field, sel.value) == ("total", 10.0)
    other = {"order_id": "#W2", "status": "cancelled"}  # another order's change leaves #W1's status a fine name
    assert output_selector(listing, "$.orders[0].order_id", "#W1", False, later=[other]).field == "status"


def test_an_elements_own_id_listed_again_elsewhere_is_named_by_the_element_not_by_the_id():
    from sap.provenance.selectors import output_selector

    order = {"order_id": "#W1", "items": [{"item_id": "2621292571", "name": "Tea Kettle", "price": 35.96},
                                          {"item_id": "5282900252", "name": "Running Shoes", "price": 98.95}],
             "item_ids": ["2621292571", "5282900252"]}
    sel = output_selector(order, "$.items[1].item_id", "5282900252", same_turn=False)
    assert sel is not None and not sel.named and sel.field == "name" and sel.value == "Running Shoes"
    legs = {"flights": [{"flight": "HAT1", "to": "LAX"}, {"flight": "HAT2", "from": "LAX", "to": "SFO"}]}
    shared = output_selector(legs, "$.flights[0].to", "LAX", same_turn=False)
    assert shared is not None and shared.named  # a value two places hold is still named by itself


def test_an_element_a_field_names_in_one_result_only_needs_no_most_recent():
    from sap.provenance.selectors import output_selector

    first = {"items": [{"item_id": "1", "name": "Tea Kettle"}, {"item_id": "2", "name": "Desk Lamp"}]}
    second = {"items": [{"item_id": "3", "name": "Yoga Mat"}, {"item_id": "4", "name": "Running Shoes"}]}
    sel = output_selector(second, "$.items[1].item_id", "4", same_turn=False, earlier_same_tool=[first])
    assert sel is not None and sel.field == "name" and not sel.latest  # no other order has Running Shoes
    again = {"items": [{"item_id": "5", "name": "Mug"}, {"item_id": "4", "name": "Running Shoes"}]}
    sel = output_selector(second, "$.items[0].item_id", "3", same_turn=False, earlier_same_tool=[again, first])
    assert sel is not None and sel.field == "name" and not sel.latest
    both = {"items": [{"item_id": "9", "name": "Yoga Mat"}, {"item_id": "8", "name": "Cup"}]}
    sel = output_selector(second, "$.items[0].item_id", "3", same_turn=False, earlier_same_tool=[both])
    assert sel is not None and sel.latest  # another order has a Yoga Mat too: the most recent one is meant
