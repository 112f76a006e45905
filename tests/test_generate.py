"""Fresh-value generators: closed choices named in a description are honoured like enums; examples are not;
arithmetic expressions for expression parameters."""
from __future__ import annotations

import random

from sap.provenance.generate import described_choices, generate

REASON = {"type": "string", "description": "The reason, which should be either 'no longer needed' or "
                                           "'ordered by mistake'."}


def test_closed_choice_in_the_description_is_generated_like_an_enum():
    rng = random.Random(0)
    values = {generate("reason", REASON, rng) for _ in range(30)}
    assert values == {"no longer needed", "ordered by mistake"}
    assert described_choices({"type": "string", "description": "one of 'a', 'b', or 'c'"}) == ["a", "b", "c"]


def test_words_split_by_slashes_in_parentheses_are_a_closed_choice():
    order_type = {"type": "string", "description": "Type of the order (Buy/Sell)."}
    assert described_choices(order_type) == ["Buy", "Sell"]
    assert {generate("order_type", order_type, random.Random(seed)) for seed in range(20)} == {"Buy", "Sell"}
    assert described_choices({"type": "string", "description": "A speed (km/h) or a path (a/b)."}) == []


def test_examples_and_non_strings_are_not_choices():
    assert described_choices({"type": "string", "description": "The order id, such as '#W0000000'."}) == []
    assert described_choices({"type": "integer", "description": "either '1' or '2'"}) == []


def test_expression_parameters_get_arithmetic_a_calculator_accepts():
    rng = random.Random(1)
    for _ in range(20):
        expr = generate("expression", {"type": "string"}, rng)
        assert set(expr) <= set("0123456789+-*/(). ") and isinstance(eval(expr, {"__builtins__": {}}), int)


def test_birth_dates_are_iso_dates():
    rng = random.Random(2)
    assert all(len(generate(n, {"type": "string"}, rng).split("-")) == 3 for n in ("dob", "date_of_birth"))


def test_an_airline_destination_is_an_airport_code_and_a_file_destination_a_file():
    iata = {"type": "string", "description": "The IATA code for the destination city such as 'JFK'."}
    for seed in range(20):
        code = generate("destination", iata, random.Random(seed))
        assert isinstance(code, str) and code.isupper() and len(code) == 3, code
    path = generate("destination", {"type": "string", "description": "The file or folder to move to."},
                    random.Random(0))
    assert not (path.isupper() and len(path) == 3), path


def test_a_part_never_exceeds_the_total_the_same_call_gives():
    """tau2 airline: 16 of 38 baggage calls asked for more paid bags than bags ("7 bags, 8 of them paid")."""
    from sap.provenance.generate import within_totals

    for seed in range(30):
        args = {"reservation_id": "ZVYRW3", "total_baggages": 2, "nonfree_baggages": 9}
        within_totals(args, {"total_baggages", "nonfree_baggages"}, random.Random(seed))
        assert 0 <= args["nonfree_baggages"] <= 2
    read_off = {"total_baggages": 2, "nonfree_baggages": 3}  # a value not stated fresh is left as it was
    within_totals(read_off, {"total_baggages"}, random.Random(0))
    assert read_off["nonfree_baggages"] == 3
    within_bound = {"total_baggages": 5, "nonfree_baggages": 1, "passengers": 9}  # no total of passengers given
    within_totals(within_bound, set(within_bound), random.Random(0))
    assert within_bound == {"total_baggages": 5, "nonfree_baggages": 1, "passengers": 9}


def test_an_issue_title_fits_the_world_c0_describes():
    """A tau2 retail hand-off's summary was "Printer on floor 3 offline": issue titles now follow what c0 holds."""
    shop = {"users": {}, "orders": {"#W1": {}}}
    airline = {"users": {}, "reservations": {"ZVYRW3": {}}}
    tickets = {"TicketAPI": {"ticket_queue": []}}
    titles = {name: {generate("summary", {"type": "string"}, random.Random(s), c0) for s in range(40)}
              for name, c0 in (("shop", shop), ("airline", airline), ("tickets", tickets))}
    assert "Printer on floor 3 offline" not in titles["shop"] | titles["airline"]
    assert any("Order" in t or "item" in t for t in titles["shop"])
    assert any("flight" in t.lower() or "booking" in t for t in titles["airline"])
    assert "Printer on floor 3 offline" in titles["tickets"]
