"""The assistant's replies in words: errors said as errors, results without raw structures or tool names."""
from __future__ import annotations

import random
import re

from sap.agents.messenger import RuleMessenger
from sap.agents.replies import assistant_reply, describe_result
from sap.model import ArgProvenance, Tag, ToolCall, ToolSpec, Turn
from sap.provenance.leaks import find_leaks

PARAMS = {"type": "object", "properties": {"order_id": {}, "payment_method_id": {}}, "required": []}
SPECS = {
    "get_order_details": ToolSpec(name="get_order_details", description="Get the status and details of an order.",
                                  parameters=PARAMS, read_only=True),
    "book_flight": ToolSpec(name="book_flight", description="Book a flight given the travel information.",
                            parameters=PARAMS),
    "ls": ToolSpec(name="ls", description="List the contents of the current directory.", parameters=PARAMS),
}
ORDER = {"order_id": "#W123", "status": "delivered", "user_id": "ana_silva_1",
         "address": {"address1": "1 Elm St", "address2": "", "city": "Austin", "state": "TX", "zip": "78701",
                     "country": "USA"},
         "items": [{"item_id": "11", "name": "Tea Kettle", "price": 35.96, "options": {"color": "red"}},
                   {"item_id": "12", "name": "Smart Watch", "price": 237.89, "options": {"size": "m"}},
                   {"item_id": "13", "name": "Desk Lamp", "price": 20.5, "options": {}},
                   {"item_id": "14", "name": "Backpack", "price": 48.0, "options": {}}],
         "payment_history": [{"payment_method_id": "paypal_1", "amount": 342.35}]}


def _call(name: str, result=None, ok: bool = True, error: str | None = None) -> ToolCall:
    return ToolCall(call_id="call_0_0", name=name, args_exec={"order_id": "#W123"},
                    args_prov={"order_id": ArgProvenance(tag=Tag.self_create)}, result=result, ok=ok, error=error)


def _clean(text: str) -> None:
    """No raw structure, placeholder, dump or internals in a reply."""
    for mark in ("{", "}", "[", "]", "item(s)", " done (", "_details", "None"):
        assert mark not in text, (mark, text)
    assert not re.search(r"(?<![A-Za-z])'|'(?![A-Za-z])", text), text  # a repr's quotes (an apostrophe is fine)
    assert not find_leaks(text, SPECS, {"order_id", "payment_method_id"}), text


def test_an_error_result_is_said_as_a_failure_with_a_next_step_never_as_done():
    for seed in range(8):
        for call in (_call("book_flight", {"booking_status": False, "error": "Insufficient funds on the card"}),
                     _call("book_flight", None, ok=False, error="Error: Insufficient funds on the card"),
                     _call("get_order_details", "Error: Order not found")):
            reply = assistant_reply([call], SPECS, random.Random(seed))
            assert re.search(r"couldn't|wasn't able", reply) and "done" not in reply.lower(), reply
            assert reply.rstrip().endswith("?"), reply  # what the user can do next
            _clean(reply)
    assert "insufficient funds" in assistant_reply([_call("book_flight", {"booking_status": False, "error":
                                                    "Insufficient funds on the card"})], SPECS, random.Random(0))


def test_a_nested_result_is_told_in_words_with_counts_and_named_elements():
    replies = {assistant_reply([_call("get_order_details", ORDER)], SPECS, random.Random(s)) for s in range(8)}
    assert len(replies) > 1  # wording varies with the rng
    for reply in replies:
        _clean(reply)
        assert "#W123" in reply and "delivered" in reply and "four items" in reply
        assert "Tea Kettle" in reply and "$237.89" in reply  # a named element and the most expensive one's price
        assert "1 Elm St, Austin, TX 78701, USA" in reply


def test_a_listing_names_a_few_entries_and_counts_the_rest_in_words():
    listing = {"current_directory_content": ["a.txt", "b.txt", "notes.md", "archive", "drafts"]}
    reply = assistant_reply([_call("ls", listing)], SPECS, random.Random(0))
    _clean(reply)
    assert "five entries" in reply and "a.txt, b.txt, notes.md and two more" in reply
    assert "ls" not in reply.split()


def test_a_compound_list_name_counts_entries_not_lists():
    reply = assistant_reply([_call("get_order_details", {"watchlist": ["ALPH", "GORI"]})], SPECS, random.Random(0))
    assert "two entries: ALPH and GORI" in reply and "watchlists" not in reply, reply


def test_lists_grouped_by_a_key_read_as_groups():
    sent = {"messages": {"USR005": ["Hey Sarah, are you ready?"], "USR007": ["Loved it", "See you"]}}
    reply = assistant_reply([_call("get_order_details", sent)], SPECS, random.Random(0))
    assert "USR005: Hey Sarah, are you ready?; USR007: Loved it and See you" in reply, reply
    assert "there is one" not in reply


def test_the_rule_messenger_replies_without_the_tool_name_or_a_dump():
    turn = Turn(index=0, state="s", transition=0, calls=[_call("get_order_details", ORDER)])
    written = RuleMessenger().write([turn], SPECS, random.Random(3))
    reply = written[0].assistant_message
    _clean(reply)
    assert "get_order_details" not in reply and "get order details" not in reply


def test_odd_shapes_are_told_in_words_without_failing():
    for result in ([[1, 2], [3]], {"rows": [[1, 2]], "count": 2}, {"a": {"b": {"c": []}}}, [None, True, 1.5],
                   {"items": [{"id": 1, "sub": [[{"q": 1}]]}]}, {"k": None}, 0):
        _clean(assistant_reply([_call("get_order_details", result)], SPECS, random.Random(0)))


LOCKS = ToolSpec(name="lockDoors", description="Locks the doors of the vehicle.", parameters=PARAMS)
MOVE = ToolSpec(name="mv", description="Move or rename a file into an existing folder or to a new name.",
                parameters=PARAMS)


def test_plural_fields_agree_with_their_verb():
    call = ToolCall(call_id="call_0_0", name="lockDoors", args_exec={}, args_prov={},
                    result={"lockStatus": "locked", "remainingUnlockedDoors": 0, "warnings": "low fuel"})
    for seed in range(10):
        reply = assistant_reply([call], {"lockDoors": LOCKS}, random.Random(seed))
        assert "the number of remaining unlocked doors is 0" in reply, reply
        assert "the warnings are low fuel" in reply and "the remaining unlocked doors is" not in reply, reply


def test_a_write_is_acknowledged_without_the_docstring_or_its_alternatives():
    with_facts = ToolCall(call_id="call_0_0", name="lockDoors", args_exec={}, args_prov={},
                          result={"lockStatus": "locked"})
    bare = ToolCall(call_id="call_0_0", name="mv", args_exec={"order_id": "a.txt"},
                    args_prov={"order_id": ArgProvenance(tag=Tag.self_create)}, result={})
    for seed in range(10):
        said = assistant_reply([with_facts], {"lockDoors": LOCKS}, random.Random(seed))
        assert "locked the doors of the vehicle" not in said and "lock status is locked" in said, said
        moved = assistant_reply([bare], {"mv": MOVE}, random.Random(seed))
        assert "moved the file into an existing folder" in moved and " or " not in moved, moved


def test_yes_no_fields_read_as_states_and_numbered_fields_as_ordinals():
    diff = describe_result({"diff_lines": "", "file_name1": "a.txt", "file_name2": "b.txt", "identical": True}, "diff")
    assert "first file name is a.txt" in diff and "second file name is b.txt" in diff and "they are identical" in diff
    assert "identical: yes" not in diff and "file name 1" not in diff
    wc = describe_result({"file_name": "a.txt", "number_of_chars": 96, "appended": False}, "wc")
    assert "the number of chars is 96" in wc and "it was not appended" in wc and "number of number" not in wc
    assert describe_result({"is_locked": True}, "lockDoors") == "It is locked."


def test_a_stock_order_counts_shares_and_a_notice_is_its_own_sentence():
    order = describe_result({"id": 17514, "order_type": "Buy", "symbol": "NVDA", "price": 208.51, "amount": 4,
                             "status": "Cancelled"}, "get_order_details")
    assert order.startswith("Order 17514 is cancelled") and "four shares" in order and "$4.00" not in order
    notice = describe_result({"notification": "No significant price changes in the selected stocks."}, "notify")
    assert notice == "No significant price changes in the selected stocks."
    assert describe_result({"status": False}, "trading_get_login_status") != "It is not status."


def test_a_ticket_is_named_as_a_ticket_and_its_author_as_created_by():
    text = describe_result({"id": 1, "title": "Roadmap issue", "status": "Open", "priority": 2,
                            "created_by": "Liam Tanaka"}, "get_ticket")
    assert text.startswith("Roadmap issue (ticket 1) is open") and "created by Liam Tanaka" in text
    assert "the created by" not in text and "result 1" not in text


def test_a_verb_field_reads_as_a_clause():
    assert describe_result({"expires_in": 2, "scope": "write"}, "authenticate_travel").startswith("It expires in 2")


def test_a_search_reply_gives_what_was_found_not_what_was_asked():
    """A read's result that repeats its own arguments (a hotel search's dates and guests) is answered with what it
    found (the hotels), not with the request read back; with nothing else found, the echo is still said."""
    spec = ToolSpec(name="search_hotels", description="Search hotels in a location for dates.", read_only=True,
                    parameters={"type": "object", "properties": {"check_in": {}, "check_out": {}, "guests": {}},
                                "required": []})
    args = {"check_in": "2025-05-29", "check_out": "2025-05-31", "guests": 2}
    result = {**args, "city": "Cape Town", "nights": 2,
              "hotels": [{"hotel_id": "H1", "name": "Park Hotel", "price": 90.0},
                         {"hotel_id": "H2", "name": "Plaza Residences", "price": 120.0}]}
    call = ToolCall(call_id="call_0_0", name="search_hotels", args_exec=args, result=result, ok=True,
                    args_prov={k: ArgProvenance(tag=Tag.self_create) for k in args})
    text = assistant_reply([call], {"search_hotels": spec}, random.Random(0))
    assert "Park Hotel" in text and "Plaza Residences" in text, text
    assert "2025-05-29" not in text and "guests" not in text, text
    echo_only = call.model_copy(update={"result": {**args}})
    assert "2025-05-29" in assistant_reply([echo_only], {"search_hotels": spec}, random.Random(0))


def test_a_placed_stock_order_counts_shares_and_says_its_state_in_lower_case():
    """place_order's result names no symbol (its arguments do): its amount is still shares, not dollars; a one-word
    status or type is said in lower case mid-sentence."""
    spec = ToolSpec(name="place_order", description="Place an order.", parameters={
        "type": "object", "properties": {"order_type": {}, "symbol": {}, "price": {}, "amount": {}}, "required": []})
    args = {"order_type": "Buy", "symbol": "GOOG", "price": 884, "amount": 9}
    call = ToolCall(call_id="call_0_0", name="place_order", args_exec=args, ok=True,
                    args_prov={k: ArgProvenance(tag=Tag.self_create) for k in args},
                    result={"order_id": 75568, "order_type": "Buy", "status": "Pending", "price": 884.0, "amount": 9})
    text = assistant_reply([call], {"place_order": spec}, random.Random(0))
    assert "nine shares" in text and "$9.00" not in text, text
    assert "is pending" in text and "Pending" not in text and "Buy" not in text, text


PROFILE = {"user_id": "ana_silva_1", "first_name": "Ana", "last_name": "Silva", "email": "ana@example.com",
           "address1": "1 Elm St", "city": "Austin", "state": "TX", "zip": "78701",
           "orders": [{"order_id": "#W123", "status": "pending"}], "payment_methods": {"paypal_1": {}, "gift_1": {}}}
WRITES = {
    "cancel_pending_order": ToolSpec(name="cancel_pending_order", description="Cancel a pending order.",
                                     parameters=PARAMS, read_only=False),
    "modify_pending_order_payment": ToolSpec(name="modify_pending_order_payment", parameters=PARAMS, read_only=False,
                                             description="Modify the payment method of a pending order."),
    "get_user_details": ToolSpec(name="get_user_details", description="Get the details of a user.",
                                 parameters=PARAMS, read_only=True),
    "press_brake_pedal": ToolSpec(name="press_brake_pedal", description="Press the brake pedal.", parameters=PARAMS,
                                  read_only=False),
}


def _write(name: str, args: dict, result) -> ToolCall:
    return ToolCall(call_id="call_0_1", name=name, args_exec=args,
                    args_prov={p: ArgProvenance(tag=Tag.self_create) for p in args}, result=result)


def test_a_goal_turn_reports_the_goal_not_the_profile_read_on_the_way():
    lookup = _write("get_user_details", {}, PROFILE)
    cancel = _write("cancel_pending_order", {"order_id": "#W123", "reason": "ordered by mistake"},
                    {**ORDER, "status": "cancelled", "cancel_reason": "ordered by mistake"})
    specs = {**SPECS, **WRITES}
    for seed in range(6):
        goal = assistant_reply([lookup, cancel], specs, random.Random(seed), prerequisites=[0])
        assert "ana@example.com" not in goal and "Ana Silva" not in goal, goal  # the lookup is not dumped
        assert "Ana" in goal and "account" in goal, goal  # the account found is acknowledged once
        assert "cancelled" in goal and "ordered by mistake" in goal, goal
        every = assistant_reply([lookup, cancel], specs, random.Random(seed))  # no goal: each call is told
        assert "ana@example.com" in every, every
    brake = _write("press_brake_pedal", {"order_id": "#W123"}, {"brakePedalStatus": "pressed"})
    told = assistant_reply([brake, cancel], specs, random.Random(0), prerequisites=[0])
    assert "pressed the brake pedal" in told and "brake pedal status" not in told, told  # a preparing write: a clause
    failed = _write("get_user_details", {}, None).model_copy(update={"ok": False, "error": "User not found"})
    failure = assistant_reply([failed, cancel], specs, random.Random(0), prerequisites=[0])
    assert re.search(r"couldn't|wasn't able", failure), failure  # a failed prerequisite is reported


def test_a_write_reply_says_what_the_write_set_not_the_whole_object():
    cancelled = describe_result({**ORDER, "status": "cancelled", "cancel_reason": "no longer needed"},
                                "cancel_pending_order", {"order_id": "#W123", "reason": "no longer needed"})
    assert "no longer needed" in cancelled and "Tea Kettle" not in cancelled and "Austin" not in cancelled, cancelled
    paid = describe_result({**ORDER, "status": "pending", "payment_history": [
        {"payment_method_id": "paypal_1", "amount": 342.35}, {"payment_method_id": "gift_1", "amount": 342.35}]},
        "modify_pending_order_payment", {"order_id": "#W123", "payment_method_id": "gift_1"})
    assert "gift_1" in paid and "Tea Kettle" not in paid, paid  # the history holding the new method is what changed
    moved = describe_result(ORDER, "modify_pending_order_address", {"order_id": "#W123", "address1": "1 Elm St",
                                                                    "city": "Austin"})
    assert "1 Elm St" in moved and "Tea Kettle" not in moved, moved
    read = describe_result(ORDER, "get_order_details")
    assert "Tea Kettle" in read and "Austin" in read, read  # a read still tells the object


def test_a_single_value_names_what_was_asked_and_connections_read_as_connections():
    status = ToolCall(call_id="call_0_0", name="get_flight_status", args_exec={"flight_number": "HAT029",
                                                                                "date": "2024-05-25"},
                      args_prov={}, result="available")
    reply = assistant_reply([status], {}, random.Random(0))
    assert "flight status for HAT029 on 2024-05-25 is available" in reply, reply
    trips = describe_result([[{"flight_number": "HAT1", "status": "available"}, {"flight_number": "HAT2",
                                                                                  "status": "available"}]],
                            "search_onestop_flight")
    assert "then" in trips and trips.lower().count("there ") == 1, trips  # not a list inside a list
    assert "login status is active" in describe_result({"status": True}, "get_login_status")  # a read's one state


def test_a_prerequisite_the_user_refers_to_later_is_reported():
    specs = {"find": ToolSpec(name="find", description="Find files in the current directory.", read_only=True,
                              parameters={"type": "object", "properties": {}, "required": []}),
             "tail": ToolSpec(name="tail", description="Show the last lines of a file.", read_only=True,
                              parameters={"type": "object", "properties": {"file_name": {"type": "string"}},
                                          "required": ["file_name"]})}
    found = ToolCall(call_id="call_0_0", name="find", args_exec={}, args_prov={},
                     result={"matches": ["./notes.txt", "./todo.md"]})
    last = ToolCall(call_id="call_0_1", name="tail", args_exec={"file_name": "notes.txt"},
                    args_prov={"file_name": ArgProvenance(tag=Tag.self_create)}, result={"last_lines": "a"})
    later = ToolCall(call_id="call_1_0", name="tail", args_exec={"file_name": "todo.md"}, result={"last_lines": "b"},
                     args_prov={"file_name": ArgProvenance(tag=Tag.prev_output, turn=0, call=0, path="$.matches[1]")})
    turns = [Turn(index=0, state="s", transition=0, calls=[found, last], prerequisites=[0]),
             Turn(index=1, state="s", transition=0, calls=[later])]
    told = RuleMessenger().write(turns, specs, random.Random(0))[0].assistant_message
    assert "todo.md" in told, told  # the next turn refers to the second match: the user must have seen it
    alone = RuleMessenger().write(turns[:1], specs, random.Random(0))[0].assistant_message
    assert "todo.md" not in alone, alone  # nobody refers to it: the lookup is not told


def test_a_two_word_status_is_a_state_not_a_message_of_its_own():
    told = describe_result({"id": 3, "title": "Budget question", "status": "In Progress", "priority": 2}, "get_ticket")
    assert "is in progress" in told and "In Progress." not in told, told
    assert describe_result({"status": "Navigating to 456 Oakwood Avenue"}, "set_navigation") == \
        "Navigating to 456 Oakwood Avenue."


def test_replies_to_two_lookups_say_which_is_which():
    look = [ToolCall(call_id=f"call_0_{i}", name="get_stock_info", args_exec={"symbol": s}, args_prov={},
                     result={"price": p, "percent_change": 0.1}) for i, (s, p) in enumerate([("TSLA", 654.23),
                                                                                          ("AAPL", 245.14)])]
    for seed in range(6):
        reply = assistant_reply(look, {}, random.Random(seed))
        assert re.search(r"for TSLA, the price is \$654\.23", reply, re.I), reply
        assert re.search(r"for AAPL, the price is \$245\.14", reply, re.I), reply
        assert "found: For" not in reply and "checked: For" not in reply, reply


def test_an_account_is_acknowledged_once_per_dialogue():
    profile = ToolSpec(name="get_user_details", description="Get the details of a user.", read_only=True,
                       parameters={"type": "object", "properties": {}, "required": []})
    cancel = ToolSpec(name="cancel_pending_order", description="Cancel a pending order.", read_only=False,
                      parameters={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": []})
    specs = {"get_user_details": profile, "cancel_pending_order": cancel}

    def turn(index: int) -> Turn:
        look = ToolCall(call_id=f"call_{index}_0", name="get_user_details", args_exec={}, args_prov={},
                        result=PROFILE)
        write = ToolCall(call_id=f"call_{index}_1", name="cancel_pending_order", args_exec={"order_id": "#W1"},
                         args_prov={"order_id": ArgProvenance(tag=Tag.self_create)}, result={"status": "cancelled"})
        return Turn(index=index, state="s", transition=0, calls=[look, write], prerequisites=[0])

    replies = [t.assistant_message for t in RuleMessenger().write([turn(0), turn(1)], specs, random.Random(0))]
    assert "account" in replies[0] and "account" not in replies[1], replies  # found once, not found again


def test_a_requested_action_is_something_the_thing_has_and_a_refund_is_said():
    """"Order #W1 has a return requested" (not "is return requested"); the returned items by what they are, not
    "there is one item ID: 1"; the refund the result reports beside what the write set."""
    result = {"order_id": "#W1", "status": "return requested", "item_ids": ["8983261521"],
              "payment_method_id": "paypal_5", "refund_amount": 20.5}
    text = describe_result(result, "return_delivered_order_items",
                           {"order_id": "#W1", "item_ids": ["8983261521"], "payment_method_id": "paypal_5"})
    assert text.startswith("Order #W1 has a return requested;"), text
    assert "the item is 8983261521" in text and "item ID" not in text, text
    assert "$20.50" in text, text
    two = describe_result({**result, "status": "exchange requested", "item_ids": ["1", "2"]}, "exchange_items",
                          {"order_id": "#W1", "item_ids": ["1", "2"]})
    assert "has an exchange requested" in two and "the items are 1 and 2" in two, two
    assert describe_result({"order_id": "#W1", "status": "in progress"}, "get_order").startswith("Order #W1 is in progress")


def test_a_move_says_what_went_where():
    spec = ToolSpec(name="mv", description="Move or rename a file into an existing folder or to a new name.",
                    parameters={"type": "object", "properties": {"file_name": {}, "destination": {}}, "required": []})
    call = ToolCall(call_id="call_0_0", name="mv", args_exec={"file_name": "a.cfg", "destination": "b.txt"},
                    args_prov={"file_name": ArgProvenance(tag=Tag.self_create),
                               "destination": ArgProvenance(tag=Tag.self_create)},
                    result={"file_name": "b.txt", "source": "a.cfg", "path": "/u/b.txt"}, ok=True)
    text = assistant_reply([call], {"mv": spec}, random.Random(0))
    assert text.endswith("I moved a.cfg to /u/b.txt."), text


def test_a_field_a_later_turn_points_at_is_in_the_reply():
    """A reservation whose flights a later turn refers to ("the flight that costs $151.00") states its flights even
    where more salient fields would have filled the reply; the messenger reads what later turns refer to."""
    from sap.agents.messenger import referred_keys

    result = {"reservation_id": "X1", "origin": "BOS", "destination": "PHX", "created_at": "2024-05-01",
              "total_price": 591.0, "baggage_fee": 0.0, "insurance_cost": 30.0, "travel_date": "2024-05-05",
              "flights": [{"flight_number": "HAT182", "price": 197.0}, {"flight_number": "HAT161", "price": 151.0}]}
    assert "HAT161" not in describe_result(result, "get_reservation_details")
    kept = describe_result(result, "get_reservation_details", keep={"flights"})
    assert "HAT161 ($151.00)" in kept, kept
    first = ToolCall(call_id="call_0_0", name="get_order_details", args_exec={"order_id": "X1"},
                     args_prov={"order_id": ArgProvenance(tag=Tag.self_create)}, result=result, ok=True)
    later = ToolCall(call_id="call_1_0", name="get_order_details", args_exec={"order_id": "HAT161"},
                     args_prov={"order_id": ArgProvenance(tag=Tag.prev_output, turn=0, call=0,
                                                          path="$.flights[1].flight_number")}, result={}, ok=True)
    turns = [Turn(index=0, state="s", transition=0, calls=[first]), Turn(index=1, state="s", transition=0, calls=[later])]
    assert referred_keys(turns) == {(0, 0): {"flights"}}


def test_variants_are_named_by_their_options_and_a_return_by_what_it_returns():
    """A product's variants read with their options, so "the white one" later points at something the user saw;
    a fulfillment with nothing to name it is counted, not labelled "fulfillment"; a return's reply says the
    returned item, not the whole order's items again."""
    product = {"product_id": "1", "name": "Wireless Earbuds", "variants": [
        {"item_id": "3958983548", "options": {"color": "black", "battery life": "8 hours"}, "price": 119.37},
        {"item_id": "9934421283", "options": {"color": "white", "battery life": "10 hours"}, "price": 143.62}]}
    text = describe_result(product, "get_product_details")
    assert "item 9934421283 (white, 10 hours, $143.62)" in text, text
    order = {"order_id": "#W1", "status": "delivered", "fulfillments": [{"tracking_id": ["1"], "item_ids": ["7"]}]}
    assert describe_result(order, "get_order_details") == "Order #W1 is delivered; there is one fulfillment."
    returned = {"order_id": "#W1", "status": "return requested", "return_items": ["1151293680"],
                "items": [{"name": "E-Reader", "item_id": "1151293680", "price": 244.95},
                          {"name": "Bookshelf", "item_id": "2", "price": 461.49}]}
    text = describe_result(returned, "return_delivered_order_items",
                           {"order_id": "#W1", "item_ids": ["1151293680"], "payment_method_id": "paypal_1"})
    assert text == "Order #W1 has a return requested; the return item is 1151293680.", text


def test_a_move_up_says_no_punctuation_value():
    """`cd("..")` answers nothing; its reply says the task, never "(folder ..)"."""
    spec = ToolSpec(name="cd", description="Change the current working directory to the specified folder.",
                    parameters={"type": "object", "properties": {"folder": {}}, "required": ["folder"]})
    call = ToolCall(call_id="call_0_0", name="cd", args_exec={"folder": ".."},
                    args_prov={"folder": ArgProvenance(tag=Tag.self_create)}, result={}, ok=True)
    text = assistant_reply([call], {"cd": spec}, random.Random(0))
    assert ".." not in text and "changed the current working directory" in text, text


def test_an_amount_in_another_currency_is_said_in_it_not_in_dollars():
    converted = {"amount": 3.0, "from_currency": "USD", "to_currency": "EUR", "rate": 0.9366, "converted_amount": 2.81}
    text = describe_result(converted, "convert_currency")
    assert "2.81 EUR" in text and "$2.81" not in text
    assert "$" in describe_result({"order_id": "#W1", "total": 12.5}, "get_order_details")  # dollars otherwise


def test_a_text_of_several_lines_is_shown_as_it_is_and_a_text_message_as_a_message():
    status = {"content": "On branch main\nChanges to be committed:\n\tmodified: a.txt"}  # MCP structured content
    reply = assistant_reply([_call("get_order_details", status)], SPECS, random.Random(0))
    assert reply == "Here's what I got for #W123:\nOn branch main\nChanges to be committed:\n\tmodified: a.txt"
    listing = {"content": "[FILE] budget.txt   49 B\n[FILE] notes.txt   3 B\n[DIR] old\n\nTotal: 2 files"}
    assert describe_result(listing, "ls") == \
        "There are two files: budget.txt and notes.txt, and one directory: old."  # its tags are its kinds
    tree = '[{"name": "a.txt", "type": "file"}, {"name": "old", "type": "directory", "children": []}]'
    assert describe_result(tree, "ls") == "There is one file: a.txt, and one directory: old."  # JSON sent as text
    assert describe_result("[]", "ls") == ""  # said as empty by the reply
    long = "\n".join(f"line {i}" for i in range(20))
    assert describe_result(long, "ls").endswith("line 11\n(and 8 more lines)")
    for seed in range(6):
        wrote = assistant_reply([_call("book_flight", {"content": "Successfully wrote to /w/a.txt"})], SPECS,
                                random.Random(seed))
        assert wrote.endswith("Successfully wrote to /w/a.txt.") and "content" not in wrote, wrote
    assert describe_result("Unstaged changes:\n", "ls") == "Unstaged changes: none."


SAVED_PROFILE = {"user_id": "ana_silva_1", "name": "Ana Silva", "email": "ana@example.org", "zip": "78701",
           "address1": "1 Elm St", "address2": "", "city": "Austin", "state": "TX", "country": "USA",
           "orders": ["#W1", "#W2"], "payment_methods": [{"payment_method_id": "paypal_1", "source": "paypal"},
                                                         {"payment_method_id": "card_2", "source": "credit_card"}]}


def test_a_read_answers_the_fields_the_user_asked_about():
    asked = "Walk me through the payment methods I've saved."
    for seed in range(6):
        reply = assistant_reply([_call("get_order_details", SAVED_PROFILE)], SPECS, random.Random(seed), asked=asked)
        assert "paypal_1" in reply and "card_2" in reply, reply
        assert "ana@example.org" not in reply and "Austin" not in reply and "#W1" not in reply, reply
        kept = assistant_reply([_call("get_order_details", SAVED_PROFILE)], SPECS, random.Random(seed), asked=asked,
                               referred={0: {"orders"}})  # a later turn points at an order: still shown
        assert "#W1" in kept and "paypal_1" in kept, kept
    # the zip the user gave is no question about it; a message naming no field leaves the usual summary
    said = assistant_reply([_call("get_order_details", SAVED_PROFILE)], SPECS, random.Random(0),
                           asked="I'm Ana Silva, my zip code is 78701: pull up my profile.")
    assert "ana@example.org" in said or "Austin" in said, said


def test_media_content_blocks_are_said_as_what_they_are_not_as_entries():
    resource = {"content": [{"type": "resource", "resource": {"uri": "file:///w/budget.txt", "mimeType": "text/plain",
                                                              "blob": "YnVkZ2V0OiBhbHBoYQo="}}]}
    assert describe_result(resource, "read_media_file") == "I read /w/budget.txt: a text/plain file of 15 bytes."
    image = {"content": [{"type": "image", "mimeType": "image/png", "data": "A" * 4096}]}
    assert describe_result(image, "read_media_file") == "I read an image/png image of 3.0 KB."


def test_a_small_result_says_what_was_asked_first_and_keeps_the_rest():
    conversion = {"amount": 8.0, "from_currency": "USD", "to_currency": "EUR", "rate": 0.92, "converted_amount": 7.33}
    reply = assistant_reply([_call("get_order_details", conversion)], SPECS, random.Random(0),
                            asked="See what 8.0 USD gets me in EUR at today's rate.")
    assert reply.index("rate") < reply.index("7.33 EUR"), reply  # the rate asked for is not all it says
    flight = {"flight_id": "FL1", "airline": "Korean Air", "date": "2026-08-31", "departure_time": "09:15",
              "arrival_time": "16:35", "price": 527.0, "seats_left": 2, "duration_minutes": 440}
    seats = assistant_reply([_call("get_order_details", flight)], SPECS, random.Random(0),
                            asked="See how many seats are open on that flight.")
    assert "there are 2 seats left" in seats and "Korean Air" not in seats, seats


def test_a_forecast_asked_for_on_a_date_gives_the_weather_not_only_the_date():
    """"tell me whether the weather will be decent in Chicago on the date you found": the message names the date,
    which the call was given; the reply still gives the forecast (it said only "That's Chicago (location ...)")."""
    forecast = {"location_id": "LOC1", "city": "Chicago", "date": "2026-01-15", "condition": "snow", "high_c": -2,
                "low_c": -9, "precipitation_chance": 80}
    weather = ToolCall(call_id="c1", name="get_order_details", args_exec={"location_id": "LOC1", "date": "2026-01-15"},
                       args_prov={}, result=forecast)
    for seed in range(10):
        for asked in ("Tell me whether the weather will be decent in Chicago on the date you found.",
                      "Friends in another city invited me. Fetch the forecast on 2026-01-15 for LOC1."):
            reply = assistant_reply([weather], SPECS, random.Random(seed), asked=asked)
            assert "snow" in reply and "80" in reply, reply  # the city names the place; it answers nothing


def test_a_read_that_found_nothing_says_what_is_empty():
    """BFCL's {"booking_history": {}} was "That came back empty."; it is the booking history that is empty."""
    empty = ToolCall(call_id="c1", name="get_order_details", args_exec={}, args_prov={},
                     result={"booking_history": {}})
    said = {assistant_reply([empty], SPECS, random.Random(seed)) for seed in range(10)}
    assert said and all("booking history" in s for s in said), said


def test_a_write_whose_result_only_names_who_says_what_was_done():
    """A login's result is the account it found: "I authenticated you: Ethan Patel (user ethan_patel_6628).", not
    "That's taken care of. That's Ethan Patel (...)"."""
    from sap.toolsets import load_toolset

    specs = {t.name: t for t in load_toolset("store").tools}
    login = ToolCall(call_id="c1", name="login_by_email", args_exec={"email": "e@x.org"}, args_prov={},
                     result={"user_id": "ethan_patel_6628", "first_name": "Ethan", "last_name": "Patel"})
    said = {assistant_reply([login], specs, random.Random(seed)) for seed in range(10)}
    assert said == {"I authenticated you: Ethan Patel (user ethan_patel_6628)."}, said


def test_an_elements_counts_are_said_with_what_they_count():
    """tau2 airline's search results listed "flight HAT048 (3, 20, 13, available)": the seats per cabin as bare
    numbers. Numbers are said with their keys; a variant's word options stay as they were."""
    flights = [{"flight_number": "HAT048", "status": "available",
                "available_seats": {"basic_economy": 3, "economy": 20, "business": 13}},
               {"flight_number": "HAT153", "status": "available",
                "available_seats": {"basic_economy": 2, "economy": 14, "business": 12}}]
    text = describe_result(flights, "search_direct_flight")
    assert "basic economy 3, economy 20, business 13" in text and "(3, 20, 13" not in text
    item = {"item_id": "1", "name": "Lamp", "options": {"color": "white", "battery": "10 hours"}, "price": 3.5}
    assert "Lamp (white, 10 hours, $3.50)" in describe_result([item, {**item, "item_id": "2", "name": "Desk"}],
                                                             "list_items")
    boots = {"name": "Hiking Boots", "options": {"size": "12", "material": "synthetic", "waterproof": "no"},
             "price": 241.96}  # tau2 retail: "Hiking Boots (12, synthetic, no, $241.96)" before
    text = describe_result([boots, {**boots, "name": "Helmet"}], "get_order_details")
    assert "Hiking Boots (size 12, synthetic, waterproof no, $241.96)" in text


def test_a_field_is_asked_for_by_its_own_words_not_by_any_word_of_a_listing():
    """`payment_history` is named by "payment history", not by "payment" beside "content" (replies' own singular
    turned history, content, log, data and info alike into "entry")."""
    from sap.agents.replies import asked_fields

    result = {"payment_history": [{"amount": 5}], "email": "a@b.c", "dob": "1990-01-01", "membership": "gold",
              "address": "1 Main St", "phone": "555", "notes": "n", "payment_methods": ["card"]}
    assert "payment_history" not in asked_fields(result, "Show me the payment content I have on file")
    assert asked_fields(result, "Go over my payment history") == {"payment_history"}


def test_a_refund_is_not_told_as_the_payment_beside_it():
    """A cancelled order's payment history listed "payment method paypal_6365066 ($347.30) and one more": the
    refund had the payment's label. An element's kind (`transaction_type`) is part of its label."""
    history = [{"transaction_type": "payment", "amount": 347.3, "payment_method_id": "paypal_6365066"},
               {"transaction_type": "refund", "amount": 347.3, "payment_method_id": "paypal_6365066"}]
    text = describe_result({"order_id": "#W1", "status": "cancelled", "payment_history": history}, "get_order")
    assert "(refund, $347.30)" in text and "one more" not in text


def _read(name: str, args: dict, result: dict) -> str:
    """The reply to one successful read of `name`."""
    call = ToolCall(call_id="call_0_0", name=name, args_exec=args, args_prov={}, result=result, ok=True)
    spec = ToolSpec(name=name, description="Get it.", parameters={"type": "object", "properties": {}},
                    read_only=True)
    return assistant_reply([call], {name: spec}, random.Random(0))


def test_things_are_named_as_people_name_them_not_by_system_ids():
    flight = {"flight_id": "FL51893", "flight_number": "KE2245", "seats_left": 23, "price": 87.0}
    said = _read("get_flight_details", {"flight_id": "FL51893"}, flight)
    assert "KE2245" in said and "FL51893" not in said  # a flight by its number
    asked = assistant_reply([ToolCall(call_id="call_0_0", name="get_flight_details", args_exec={}, args_prov={},
                                      result={**flight, "airline": "KE", "date": "2025-05-01", "departure_time": "9:05",
                                              "arrival_time": "10:10", "duration_minutes": 65}, ok=True)],
                            {}, random.Random(0), asked="Tell me more about the flight from the results.")
    assert "the price is $87.00" in asked  # "the flight" names the flight: its number is not all that was asked
    routes = {"origin_location_id": "LOC1766", "city": "London",
              "routes": [{"destination_location_id": "LOC4911", "city": "Amsterdam"},
                         {"destination_location_id": "LOC2", "city": "Seoul"}]}
    said = _read("get_flight_routes", {"origin_location_id": "LOC1766"}, routes)
    assert said.endswith("London has two routes: Amsterdam and Seoul.") and "LOC" not in said  # a place by its city
    profile = {"name": "Yusuf Brown", "home_location_id": "LOC5543", "wallet_balance": 5231.0}
    assert "Yusuf Brown" in (said := _read("get_traveler_profile", {}, profile)) and "home location" not in said
    booking = {"booking_id": "BK1", "hotel_name": "Park Hotel", "status": "confirmed"}
    assert "ooking BK1 (Park Hotel) is confirmed." in _read("get_booking", {"booking_id": "BK1"}, booking)


def test_a_search_reply_is_not_led_by_the_place_it_was_asked_about():
    args = {"origin_location_id": "LOC1766", "destination_location_id": "LOC4911", "date": "2025-05-01"}
    found = dict(args, flights=[{"flight_id": "FL1", "flight_number": "KE2245", "price": 87.0},
                                {"flight_id": "FL2", "flight_number": "AF1985", "price": 86.0}])
    said = _read("search_flights", args, found)
    assert "LOC1766" not in said and "origin location" not in said.lower()
    assert "two flights: flight KE2245 ($87.00) and flight AF1985 ($86.00)" in said


def test_an_update_says_the_new_value_not_the_state_it_left_as_it_was():
    spec = ToolSpec(name="modify_pending_order_address", description="Modify the shipping address of a pending order.",
                    parameters={"type": "object", "properties": {}}, read_only=False)
    args = {"order_id": "#W1", "address1": "8260 Oak Street", "city": "Boise", "state": "ID", "zip": "83791"}
    result = {"order_id": "#W1", "status": "pending", "address": {**{k: v for k, v in args.items() if k != "order_id"},
                                                                  "country": "USA"}}
    call = ToolCall(call_id="call_0_0", name=spec.name, args_exec=args, args_prov={}, result=result, ok=True)
    said = assistant_reply([call], {spec.name: spec}, random.Random(0))
    assert said.endswith("The address of order #W1 is now 8260 Oak Street, Boise, ID 83791, USA.")
    assert "pending" not in said  # the order was pending before and after: not what the user asked about
    user = ToolCall(call_id="call_0_0", name="modify_user_address", args_exec={**args, "order_id": None,
                                                                                "user_id": "ana_1"}, args_prov={},
                    result={"user_id": "ana_1", "name": {"first_name": "Ana", "last_name": "Li"},
                            "address": result["address"]}, ok=True)
    said = assistant_reply([user], {"modify_user_address": spec.model_copy(update={"name": "modify_user_address"})},
                           random.Random(0))
    assert said.endswith("Your address is now 8260 Oak Street, Boise, ID 83791, USA."), said  # the user's own
    cancel = ToolSpec(name="cancel_pending_order", description="Cancel a pending order.",
                      parameters={"type": "object", "properties": {}}, read_only=False)
    done = ToolCall(call_id="call_0_0", name=cancel.name, args_exec={"order_id": "#W1"}, args_prov={},
                    result={"order_id": "#W1", "status": "cancelled"}, ok=True)
    assert "rder #W1 is cancelled" in assistant_reply([done], {cancel.name: cancel}, random.Random(0))


def test_a_status_that_is_a_message_is_said_as_one_and_the_same_finding_once():
    spec = ToolSpec(name="withdraw_funds", description="Withdraw funds from the account.",
                    parameters={"type": "object", "properties": {}}, read_only=False)
    call = ToolCall(call_id="call_0_0", name=spec.name, args_exec={"amount": 11.0}, args_prov={}, ok=True,
                    result={"status": "Withdrawal successful", "new_balance": 31989.0})
    said = assistant_reply([call], {spec.name: spec}, random.Random(0))
    assert "Withdrawal successful." in said and "the status is" not in said.lower()
    empty = [ToolCall(call_id=f"call_0_{i}", name="filter_stocks_by_price", args_exec={}, args_prov={},
                      ok=True, result={"filtered_stocks": []}) for i in range(2)]
    read = ToolSpec(name="filter_stocks_by_price", description="Filter stocks by price.",
                    parameters={"type": "object", "properties": {}}, read_only=True)
    assert assistant_reply(empty, {read.name: read}, random.Random(0)).count("no filtered stocks") == 1


def test_a_write_is_said_without_the_docstrings_qualifiers():
    touch = ToolSpec(name="touch", description="Create a new file of any extension in the current directory.",
                     parameters={"type": "object", "properties": {}})
    call = ToolCall(call_id="call_0_0", name="touch", args_exec={"file_name": "v2.txt"}, args_prov={}, result=None)
    said = assistant_reply([call], {"touch": touch}, random.Random(0))
    assert "created a new file (file name v2.txt)" in said and "any extension" not in said, said


def test_a_value_a_later_turn_points_at_is_said_in_words_where_the_thing_has_them():
    booking = {"booking_id": "BK1", "hotel_id": "HTL5", "hotel_name": "Garden Hotel", "room_id": "HTL5-DLX",
               "room_type": "Deluxe King", "check_in": "2026-03-08", "check_out": "2026-03-10", "guests": 2,
               "price_per_night": 127.0, "total_price": 254.0}
    call = ToolCall(call_id="call_0_0", name="get_booking", args_exec={"booking_id": "BK1"}, args_prov={},
                    result=booking, ok=True)
    spec = ToolSpec(name="get_booking", description="Get a booking.", parameters={"type": "object", "properties": {}},
                    read_only=True)
    said = assistant_reply([call], {"get_booking": spec}, random.Random(0), referred={0: {"room_id"}})
    assert "the room type is deluxe king" in said.lower() and "HTL5-DLX" not in said, said



def test_the_customers_own_account_is_told_as_yours():
    profile = {"user_id": "raj_1", "name": {"first_name": "Raj", "last_name": "Khan"}, "email": "raj@example.com",
               "orders": ["#W1", "#W2"]}
    call = ToolCall(call_id="call_0_0", name="get_user_details", args_exec={"user_id": "raj_1"}, args_prov={},
                    result=profile, ok=True)
    spec = ToolSpec(name="get_user_details", description="Get the details of a user.",
                    parameters={"type": "object", "properties": {}}, read_only=True)
    said = assistant_reply([call], {spec.name: spec}, random.Random(1))
    assert "your email is raj@example.com" in said.lower() and "Raj Khan (user raj_1)" not in said, said
    later = assistant_reply([call], {spec.name: spec}, random.Random(1), referred={0: {"user_id"}})
    assert "your user ID is raj_1" in later.lower().replace("id", "ID"), later  # a later turn points at it


def test_a_result_a_later_turn_points_at_still_gives_its_answer():
    found = {"location_id": "CDG", "city": "Paris", "check_in": "2025-04-08", "check_out": "2025-04-14", "nights": 6,
             "guests": 1, "hotels": [{"hotel_id": "H1", "name": "Royal Inn Paris", "price_per_night": 123.0},
                                     {"hotel_id": "H2", "name": "Grand Hotel Paris", "price_per_night": 256.0}]}
    args = {"location_id": "CDG", "check_in": "2025-04-08", "check_out": "2025-04-14", "guests": 1}
    call = ToolCall(call_id="call_0_0", name="search_hotels", args_exec=args, args_prov={}, result=found, ok=True)
    spec = ToolSpec(name="search_hotels", description="Search hotels.", parameters={"type": "object",
                                                                                    "properties": {}}, read_only=True)
    pointed = {0: {"check_in", "check_out", "guests"}}
    said = assistant_reply([call], {spec.name: spec}, random.Random(0), referred=pointed,
                           asked="See which hotels in Paris have rooms between the check-in date from one of your "
                                 "earlier replies and the check-out date for 1 guest.")
    assert "Royal Inn Paris" in said and "2025-04-14" in said, said  # the hotels found, and the dates pointed at
