"""Must-mention dispatch and the rule messenger's honesty about where values came from."""
from __future__ import annotations

import random
import re

from sap.agents.messenger import RuleMessenger, must_mention
from sap.model import ArgProvenance, Tag, ToolCall, ToolSpec, Turn
from sap.provenance.checks import mentions
from sap.text import describe_value
from sap.toolsets import load_toolset

from helpers import call, needs_bfcl

SPEC = ToolSpec(name="book_room", description="Book a hotel room. More text.",
                parameters={"type": "object", "properties": {}, "required": []})


def _call() -> ToolCall:
    return ToolCall(call_id="call_1_0", name="book_room",
                    args_exec={"guest": "Ana Silva", "hotel_id": "H-77", "check_in": "2026-03-02",
                               "room_id": "R-9", "nights": 3},
                    args_prov={"guest": ArgProvenance(tag=Tag.self_create),
                               "hotel_id": ArgProvenance(tag=Tag.prev_output, turn=0, call=0, path="$.hotels[0].hotel_id"),
                               "check_in": ArgProvenance(tag=Tag.prev_user_msg, turn=0),
                               "room_id": ArgProvenance(tag=Tag.fallback, path="$.rooms[1].room_id",
                                                        fallback_from=Tag.prev_output),
                               "nights": ArgProvenance(tag=Tag.initial_state, path="$.stay.nights")})


def test_must_mention_marks_each_value_by_source():
    got = [(m.param, m.label(), m.verbatim) for m in must_mention(_call())]
    assert got == [("guest", "[NEW]", True), ("hotel_id", "[FROM_HISTORY]", False), ("check_in", "[FROM_HISTORY]", False),
                   ("room_id", "[FALLBACK from prev_output]", True), ("nights", "[FROM_CONFIG]", True)]


def test_rule_messenger_states_new_and_config_values_and_only_refers_to_history():
    first = Turn(index=0, state="s", transition=0, calls=[ToolCall(
        call_id="call_0_0", name="book_room", args_exec={}, args_prov={}, result={"hotels": [{"hotel_id": "H-77"}]})])
    second = Turn(index=1, state="s", transition=0, calls=[_call()])
    written = RuleMessenger().write([first, second], {"book_room": SPEC}, random.Random(1),
                                    virtual=[{"turn": 0, "param": "check_in", "value": "2026-03-02", "used_at": 1}])
    message = written[1].user_message
    for value in ("Ana Silva", "R-9", 3):
        assert mentions(message, value)
    for value in ("H-77", "2026-03-02"):
        assert not mentions(message, value)
    assert "book a hotel room" in message.lower()
    assert mentions(written[0].user_message, "2026-03-02")  # the virtual-history value is stated at its anchor
    assert "book_room" not in message


def test_turns_without_calls_keep_their_messages():
    turn = Turn(index=0, state="s", transition=0, user_message="Hi", assistant_message="Which hotel?")
    assert RuleMessenger().write([turn], {}, random.Random(0)) == [turn]


def test_object_values_are_described_in_words_not_raw_json():
    value = [{"first_name": "Noah", "last_name": "Kim", "dob": "1990-04-05"}]
    text = describe_value(value)
    assert text == 'first name "Noah", last name "Kim", dob "1990-04-05"'
    assert "{" not in text and mentions(f"Add the passenger {text} please.", value)


def test_a_value_stated_ahead_is_said_as_the_plan_it_belongs_to():
    """A virtual-history value is announced with the using call's own phrase, its other slots left vague ("Later
    on I'll also want you to move a file to archive.txt."), never "the destination should be x further on" where
    the tool has such a phrase; the value is said verbatim, as the closure check needs; secrets, flags and numbers
    are never announced (`announceable`)."""
    import re

    from sap.provenance.generate import announceable
    from sap.toolsets import load_toolset

    specs = {t.name: t for t in load_toolset("filesystem").tools}
    ls = ToolCall(call_id="call_0_0", name="ls", args_exec={}, args_prov={}, result={"current_directory_content": []})
    mv = ToolCall(call_id="call_1_0", name="mv", args_exec={"source": "a.txt", "destination": "archive.txt"},
                  args_prov={"source": ArgProvenance(tag=Tag.self_create),
                             "destination": ArgProvenance(tag=Tag.prev_user_msg, turn=0)})
    turns = [Turn(index=0, state="s", transition=0, calls=[ls]), Turn(index=1, state="s", transition=1, calls=[mv])]
    virtual = [{"turn": 0, "param": "destination", "value": "archive.txt", "used_at": 1}]
    for seed in range(12):
        first = RuleMessenger().write(turns, specs, random.Random(seed), virtual)[0].user_message
        assert mentions(first, "archive.txt"), first
        assert not re.search(r"further on|for later|will end up being|in mind as", first), first
        assert "a.txt" not in first and "{" not in first, first
    assert not announceable("password", {"type": "string"})
    assert not announceable("unlock", {"type": "boolean"}) and not announceable("speed", {"type": "number"})
    assert announceable("destination", {"type": "string"})


def test_a_lead_in_never_repeats_a_word_the_request_opens_with():
    from sap.agents.composer import compose_message

    for seed in range(20000):  # "As a next step, the next step is to ...", "Also, could you also ..."
        text = compose_message(["tell me the symbol Nvidia trades under"], [], False, [], random.Random(seed))
        opening = text[:text.lower().index("tell me")]  # the lead-in and the opener, not a tail ("my next meeting")
        assert len(re.findall(r"(?i)\bnext\b", opening)) <= 1 and len(re.findall(r"(?i)\balso\b", opening)) <= 1, text


def test_a_first_message_greets_once_and_asks_for_help_once():
    """A greeting is not put before an intro that greets itself ("Hi, I could use some help. Hello, I could use a
    hand with a trip.") or that asks for help already."""
    from sap.agents.composer import compose_message
    from sap.provenance.phrasebook import phrase_book
    from sap.toolsets import load_toolset

    intros = phrase_book({t.name: t for t in load_toolset("travel").tools}).intros
    greet = re.compile(r"(?i)\b(?:hi|hello|hey|hiya|howdy|greetings|good (?:morning|afternoon|evening))\b")
    for seed in range(3000):
        text = compose_message(["find me a hotel"], [], True, intros, random.Random(seed))
        assert len(greet.findall(text)) <= 1, text
        sentences = re.split(r"(?<=[.!?])\s+", text)
        opening = " ".join(sentences[:next(i for i, t in enumerate(sentences) if "find me" in t.lower())])
        # greeting and intro (the request's frame may ask for help, a closer thank for it)
        assert len(re.findall(r"(?i)\b(?:help|hand)\b", opening)) <= 1, text


def test_a_lead_in_keeps_the_case_of_ok_and_i():
    from sap.agents.composer import compose_message

    for seed in range(200):
        message = compose_message(["OK, pull up my messages"], [], False, [], random.Random(seed))
        assert "oK" not in message, message


def test_words_joined_phrases_say_twice_are_said_once_outside_quotes():
    from sap.agents.composer import unstuttered

    assert unstuttered('Put the card number on file on file and just just send "please please me".') == \
        'Put the card number on file and just send "please please me".'


def test_a_message_says_please_once_and_no_word_twice_in_a_row():
    """Two joined requests each with a "please" (and a reference ending in "earlier on" before "on the date") read
    as one person writes: the first "please" stays, later ones go with their commas, a sentence they opened keeps
    its capital; quoted text is the user's own."""
    from sap.agents.composer import unstuttered

    assert unstuttered("Find it please. Then, please list my orders, then log me out please, I'm done.") == \
        "Find it please. Then, list my orders, then log me out, I'm done."
    assert unstuttered("Book it please. Please cancel the other one.") == "Book it please. Cancel the other one."
    assert unstuttered('Echo "please please me" please, for the date you found earlier on on file.') == \
        'Echo "please please me" please, for the date you found earlier on file.'
    assert unstuttered("OK, so so you know, fly me there on on the first date.") == \
        "OK, so you know, fly me there on the first date."
    assert unstuttered('Book a economy seat, a one-way trip, for a user, "a apple".') == \
        'Book an economy seat, a one-way trip, for a user, "a apple".'  # a value after "a" takes "an" as people say


def test_a_request_ending_in_a_clause_takes_no_tail_and_please_is_said_once():
    """"cancel order 1, I placed it by mistake" is never followed by "for me" or "if you can"; an opener with a
    politeness word of its own drops the phrase's "please" ("Will you possibly please ...")."""
    from sap.agents.composer import opened

    for seed in range(300):
        text = opened("cancel order 1, I placed it by mistake", random.Random(seed))
        assert re.search(r"by mistake[?.]$", text), text
        polite = opened("please cancel order 1", random.Random(seed))
        assert len(re.findall(r"\bplease\b", polite, re.I)) <= 1, polite


@needs_bfcl
def test_a_count_of_one_is_said_with_a_singular_noun():
    """TradingBot: "I'd love to pick up 1 shares of the stock ..." - a phrase's "{amount} shares" with one share."""
    specs = {t.name: t for t in load_toolset("bfcl/TradingBot").tools}
    order = call("place_order", {"order_type": "Buy", "symbol": "AAPL", "price": 214.9, "amount": 1},
                 result={"order_id": 1, "status": "Pending"})
    texts = [RuleMessenger().write([Turn(index=0, state="done", transition=0, calls=[order])], specs,
                                   random.Random(seed))[0].user_message for seed in range(40)]
    assert not any(re.search(r"\b1 shares\b", t) for t in texts), [t for t in texts if "1 shares" in t]
    assert any(re.search(r"\b1 share\b", t) for t in texts)


def test_a_place_id_from_an_earlier_result_is_named_by_its_city_and_other_ids_are_not():
    """A location id that a route of an earlier result holds beside its city is "Berlin", as people name places,
    not "the destination from the route with city Berlin"; an object with two ids (a hotel in a city) is not
    named by the city, which would say the place, not the hotel; the code check still finds the selector."""
    from sap.model import Selector
    from sap.provenance.selectors import place_name

    routes = {"origin_location_id": "LOC1", "city": "Seoul",
              "routes": [{"destination_location_id": "LOC2", "city": "Rome", "dates": ["2026-01-02"]},
                         {"destination_location_id": "LOC3", "city": "Berlin", "dates": ["2026-01-02"]}]}
    by_city = Selector(noun="route", field="city", value="Berlin")
    assert place_name(routes, "$.routes[1].destination_location_id", by_city) == "Berlin"
    assert place_name(routes, "$.origin_location_id", None) == "Seoul"
    assert place_name(routes, "$.routes[1].destination_location_id", Selector(noun="route", position=2)) is None
    assert place_name(routes, "$.routes[1].destination_location_id", by_city.model_copy(update={"latest": True})) is None
    hotel = {"hotel_id": "H1", "location_id": "LOC2", "city": "Rome"}
    assert place_name(hotel, "$.location_id", None) is None
    nested = {"flights": [{"flight_id": "F1", "destination_location_id": "LOC3", "origin": {"city": "Seoul"}}]}
    assert place_name(nested, "$.flights[0].destination_location_id", None) is None
    # an earlier search found another place: the city says which search's place is meant, not "the latest"
    from sap.provenance.selectors import output_selector
    london = {"locations": [{"location_id": "L7", "city": "London"}]}
    barcelona = {"locations": [{"location_id": "L5", "city": "Barcelona"}]}
    sel = output_selector(london, "$.locations[0].location_id", "L7", True, earlier_same_tool=[barcelona])
    assert sel == Selector(noun="location", field="city", value="London") and not sel.latest
    also = {"locations": [{"location_id": "L9", "city": "Paris"}], "nearby": "London"}  # holds the city too
    assert output_selector(london, "$.locations[0].location_id", "L7", True, earlier_same_tool=[also]).latest

    spec = ToolSpec(name="get_weather", description="Get the weather forecast for a location on a date.",
                    parameters={"type": "object", "properties": {"location_id": {"type": "string"},
                                                                 "date": {"type": "string"}},
                                "required": ["location_id", "date"]})
    first = Turn(index=0, state="s", transition=0, calls=[call("get_weather", {}, result=routes)])
    weather = call("get_weather", {"location_id": "LOC3", "date": "2026-01-02"},
                   prov={"location_id": ArgProvenance(tag=Tag.prev_output, turn=0, call=0,
                                                      path="$.routes[1].destination_location_id", selector=by_city),
                         "date": ArgProvenance(tag=Tag.self_create)})
    second = Turn(index=1, state="s", transition=0, calls=[weather])
    for seed in range(10):
        message = RuleMessenger().write([first, second], {"get_weather": spec}, random.Random(seed))[1].user_message
        assert "Berlin" in message and "LOC3" not in message, message
        assert not re.search(r"route|city|location", message), message



def test_values_stated_ahead_never_read_as_a_promise_and_take_a_lead_once():
    """A note of a value for a later step is no promise to give one ("... set to alice in a bit" read as the MissParam
    announcement the rewrite refuses), and two notes in one message do not open alike ("Before I forget, ...
    Before I forget, ...")."""
    import random as _random

    from sap.agents.composer import _AHEAD, compose_message
    from sap.provenance.withheld import announces

    assert not [note for note in _AHEAD if announces(note.format(n="username", v="alice"))]
    notes = ["Before I forget, the username should be alice later.", "Before I forget, the password is x1, in case "
             "it comes up."]
    for seed in range(20):
        said = compose_message(["List my files"], notes, False, [], _random.Random(seed))
        assert said.count("Before I forget") == 1 and "The password is x1" in said, said
