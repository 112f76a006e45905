"""User-stated values come from the domain and from seeded format-aware generators, identically for one seed."""
from __future__ import annotations

import datetime as dt
import random

from sap.agents.planner import PlanRequest, RulePlanner
from sap.model import Tag, ToolSpec
from sap.provenance.generate import c0_values, described_examples, generate, is_word_pair, reference_date
from sap.provenance.places import US_PLACES

PARAMS = {"email": {"type": "string"}, "full_name": {"type": "string"}, "phone": {"type": "string"},
          "date_of_birth": {"type": "string"}, "travel_date": {"type": "string"}, "address": {"type": "string"},
          "city": {"type": "string"}, "symbol": {"type": "string"}, "summary": {"type": "string"}}
C0 = {"orders": [{"order_date": "2024-05-15", "city": "Lisbon"}]}


def values(seed: int) -> dict[str, object]:
    """One value per parameter from one seeded RNG."""
    rng = random.Random(seed)
    return {name: generate(name, schema, rng) for name, schema in PARAMS.items()}


def test_faker_values_are_identical_for_one_seed_and_differ_for_another():
    assert values(7) == values(7)
    assert values(7) != values(8)


def test_values_have_their_format_and_no_word_pairs():
    got = values(3)
    assert "@" in got["email"] and " " in got["full_name"] and got["phone"].startswith("+1-")
    assert got["symbol"].isupper() and not any(is_word_pair(v) for v in got.values())


def test_dates_lie_on_the_right_side_of_the_scenario_date():
    for seed in range(20):
        rng = random.Random(seed)
        birth = dt.date.fromisoformat(generate("date_of_birth", {"type": "string"}, rng, C0))
        travel = dt.date.fromisoformat(generate("travel_date", {"type": "string"}, rng, C0))
        assert birth < dt.date(2024, 5, 15) - dt.timedelta(days=18 * 365) and travel > dt.date(2024, 5, 15)
    assert reference_date(C0) == dt.date(2024, 5, 15)


def test_the_domain_comes_first_enum_examples_and_c0():
    rng = random.Random(0)
    assert generate("cabin", {"type": "string", "enum": ["economy", "business"]}, rng) in ("economy", "business")
    schema = {"type": "string", "description": "The airport code, e.g. 'SFO' or 'JFK'."}
    assert described_examples(schema) == ["SFO", "JFK"] and generate("airport", schema, rng) in ("SFO", "JFK")
    assert c0_values("city", C0) == ["Lisbon"] and generate("city", {"type": "string"}, rng, C0) == "Lisbon"
    assert generate("file_name", {"type": "string"}, rng, {"file_name": "a.txt"}) != "a.txt"  # names a new thing


def test_word_pairs_are_recognised():
    assert is_word_pair("archive_report") and is_word_pair("budget_notes.txt")
    assert not is_word_pair("quarterly report") and not is_word_pair("AAPL")


def luhn_ok(number: str) -> bool:
    """The Luhn checksum of a card number (every second digit from the right doubled)."""
    digits = [int(c) for c in reversed(number)]
    return sum(d if i % 2 == 0 else (2 * d - 9 if d > 4 else 2 * d) for i, d in enumerate(digits)) % 10 == 0


CARD = {"card_number": {"type": "string", "description": "The credit card number"},
        "expiration_date": {"type": "string", "description": "The expiration date of the credit card in the format MM/YYYY"},
        "card_verification_number": {"type": "integer", "description": "The card verification number"},
        "client_secret": {"type": "string"}, "refresh_token": {"type": "string"}, "username": {"type": "string"},
        "passport_number": {"type": "string"},
        "lastModifiedAfter": {"type": "string", "description": "Return in the format of YYYY-MM-DDTHH:MM:SS."},
        "travel_from": {"type": "string", "description": "The location the travel is from"},
        "destination": {"type": "string", "description": "The destination in the format of street, city, state."}}


def card_values(seed: int, c0: object = None) -> dict[str, object]:
    """One value per card/credential parameter from one seeded RNG."""
    rng = random.Random(seed)
    return {name: generate(name, schema, rng, c0, reuse_existing=False) for name, schema in CARD.items()}


def test_card_numbers_are_luhn_valid_and_the_checker_rejects_a_changed_digit():
    for seed in range(30):
        number = card_values(seed)["card_number"]
        assert number.isdigit() and 13 <= len(number) <= 19 and luhn_ok(number)
    assert not luhn_ok(number[:-1] + str((int(number[-1]) + 1) % 10))


def test_credentials_dates_and_codes_have_their_declared_formats_and_repeat_for_a_seed():
    got = card_values(5, C0)
    assert got == card_values(5, C0) and got != card_values(6, C0)
    month, year = got["expiration_date"].split("/")
    assert 1 <= int(month) <= 12 and dt.date(int(year), int(month), 28) > dt.date(2024, 5, 15)  # ahead of c0's now
    assert 100 <= got["card_verification_number"] <= 999
    assert dt.datetime.strptime(got["lastModifiedAfter"], "%Y-%m-%dT%H:%M:%S") <= dt.datetime(2024, 5, 16)
    assert got["passport_number"].startswith("US") and got["passport_number"][2:].isdigit()
    assert " " not in got["username"] and got["client_secret"].isalnum() and len(got["refresh_token"]) == 32
    assert got["destination"].count(",") == 2
    assert not any(is_word_pair(v) for v in got.values())


def test_airport_codes_come_from_c0_first():
    c0 = {"bookings": [{"travel_from": "SFO", "travel_to": "BOS"}], "name": "Ann"}
    codes = {generate("travel_to", CARD["travel_from"], random.Random(s), c0, reuse_existing=False) for s in range(20)}
    assert codes == {"SFO", "BOS"}
    assert generate("travel_from", CARD["travel_from"], random.Random(0)).isupper()  # no c0: a major airport


ADDRESS_SPEC = ToolSpec(name="modify_user_address", description="Change the user's address.", read_only=False,
                        parameters={"type": "object", "required": ["user_id", "address1", "address2", "city", "state",
                                                                   "country", "zip"],
                                    "properties": {k: {"type": "string"} for k in
                                                   ["user_id", "address1", "address2", "city", "state", "country",
                                                    "zip"]}})
ADDRESS_C0 = {"users": {f"u{i}": {"user_id": f"u{i}", "address": {
    "address1": f"{i} Elm Street", "address2": "", "city": city, "state": state, "country": "USA", "zip": zip_code}}
    for i, (city, state, zip_code) in enumerate([("Columbus", "OH", "43215"), ("Pittsburgh", "PA", "15213")])}}


def _address_binding(tags: dict[str, Tag], seed: int) -> dict[str, object]:
    req = PlanRequest(spec=ADDRESS_SPEC, tags=tags, turn=0, index=0, history=[], stated=[], c0=ADDRESS_C0,
                      rng=random.Random(seed))
    return RulePlanner().bind(req).args_exec


def test_an_address_is_one_place_however_its_parts_are_sourced():
    """A new address's city, state and ZIP code belong together, and parts never mix two known addresses or a
    known street with a new city (the audit's Columbus, OH with a Pennsylvania ZIP)."""
    known = [u["address"] for u in ADDRESS_C0["users"].values()]
    prefixes = {(city, state): prefix for city, state, prefix in US_PLACES}
    mixed = {"address1": Tag.initial_state, "address2": Tag.initial_state, "city": Tag.self_create,
             "state": Tag.initial_state, "zip": Tag.initial_state, "country": Tag.self_create}
    for seed in range(30):
        for tags in ({}, mixed):
            args = _address_binding({"user_id": Tag.initial_state, **tags}, seed)
            parts = {k: args[k] for k in ("address1", "city", "state", "zip")}
            from_c0 = any(all(a[k] == v for k, v in parts.items()) for a in known)
            new = prefixes.get((args["city"], args["state"]), "-") == args["zip"][:3]
            assert from_c0 or new, args
            assert args["country"] == "USA"  # c0's way of writing it, not a random country


def test_new_file_names_and_texts_read_like_real_ones():
    from sap.provenance.generate import _FILE_TOPICS

    for seed in range(30):
        rng = random.Random(seed)
        name = generate("file_name", {"type": "string"}, rng)
        stem, ext = name.rsplit(".", 1)
        assert ext in ("txt", "md", "csv", "log") and any(t in stem for t in _FILE_TOPICS), name
        assert not is_word_pair(name), name
        text = generate("content", {"type": "string"}, rng)
        assert "\n" not in text and 3 <= len(text.split()) <= 12, text


def test_address_parts_read_from_an_earlier_result_bring_the_rest_of_that_address():
    """A street read from an order's address takes that address's city, state and ZIP code too (from the same
    result, as prev_output at their own paths), never a new city beside the old street."""
    from sap.agents.planner import HistoryCall
    from sap.model import ToolCall
    from sap.provenance.jsonpath import resolve

    order = {"order_id": "#W1", "address": {"address1": "181 Elm Street", "address2": "Suite 178",
                                            "city": "Washington", "state": "DC", "country": "USA", "zip": "20030"}}
    lookup = ToolCall(call_id="call_0_0", name="get_order_details", args_exec={"order_id": "#W1"}, args_prov={},
                      result=order)
    tags = {"user_id": Tag.initial_state, "address1": Tag.prev_output, "address2": Tag.prev_output,
            "city": Tag.self_create, "state": Tag.self_create, "zip": Tag.self_create, "country": Tag.self_create}
    for seed in range(10):
        req = PlanRequest(spec=ADDRESS_SPEC, tags=tags, turn=1, index=0, history=[HistoryCall(0, 0, lookup)],
                          stated=[], c0=ADDRESS_C0, rng=random.Random(seed))
        binding = RulePlanner().bind(req)
        parts = ("address1", "address2", "city", "state", "zip", "country")
        assert {k: binding.args_exec[k] for k in parts} == order["address"], binding.args_exec
        for k in parts:
            prov = binding.args_prov[k]
            assert prov.tag == Tag.prev_output and (prov.turn, prov.call) == (0, 0), (k, prov)
            assert resolve(order, prov.path) == order["address"][k]


def test_searches_use_words_the_catalog_holds_and_dates_of_birth_are_not_the_calendar():
    """A search's words come from c0's names, so it finds something; a passenger born in 1951 does not put
    flight searches in 1951; a number comes at the grain people give it."""
    from sap.provenance.generate import calendar

    c0 = {"products": [{"name": "Office Chair"}, {"name": "Water Bottle"}], "users": [{"dob": "1951-04-02"}],
          "flights": [{"date": "2024-05-16"}, {"date": "2024-05-28"}]}
    words = {generate("query", {"type": "string"}, random.Random(s), c0, reuse_existing=False) for s in range(20)}
    assert words == {"chair", "bottle"}
    assert calendar(c0) == (dt.date(2024, 5, 16), dt.date(2024, 5, 28))
    speeds = [generate("speed", {"type": "number"}, random.Random(s)) for s in range(20)]
    assert all(25 <= v <= 75 and v == int(v) for v in speeds), speeds
