"""Tests for RulePlanner's binding rules, with PlanRequests built by hand."""
import dataclasses

import pytest

from helpers import call, request, spec
from sap.agents.planner import HistoryCall, RulePlanner, StatedValue, error_options, error_quotes
from sap.model import Tag
from sap.provenance.jsonpath import resolve

SEEDS = range(40)
STR = {"type": "string"}

HOTELS = {"hotels": [{"id": "H1", "name": "Alpha", "city": "Oslo"}, {"id": "H2", "name": "Beta", "city": "Rome"}]}
BOOK = spec("book_hotel", "Book a hotel room.", {"hotel_id": STR})


def bind(req):
    return RulePlanner().bind(req)


@pytest.mark.parametrize("seed", SEEDS)
def test_prev_output_binds_from_earlier_result_with_locating_path(seed):
    history = [HistoryCall(0, 0, call("login", {"name": "x"}, result={"token": "T"})),
               HistoryCall(0, 1, call("search_hotels", {"city": "Oslo"}, result=HOTELS))]
    b = bind(request(BOOK, {"hotel_id": Tag.prev_output}, turn=1, history=history, seed=seed))
    prov = b.args_prov["hotel_id"]
    assert prov.tag == Tag.prev_output
    assert (prov.turn, prov.call) == (0, 1)
    assert b.args_exec["hotel_id"] in {"H1", "H2"}
    assert resolve(HOTELS, prov.path) == b.args_exec["hotel_id"]
    assert prov.path.endswith(".id")


def test_prev_output_skips_failed_calls_and_prefers_this_turn():
    failed = call("search_hotels", {}, result={"hotels": [{"id": "BAD"}]}, ok=False, error="boom")
    history = [HistoryCall(0, 0, call("search_hotels", {}, result={"hotels": [{"id": "OLD"}]})),
               HistoryCall(1, 0, failed),
               HistoryCall(2, 0, call("search_hotels", {}, result={"hotels": [{"id": "NEW"}]}))]
    got = {bind(request(BOOK, {"hotel_id": Tag.prev_output}, turn=2, index=1, history=history, seed=s))
           .args_exec["hotel_id"] for s in SEEDS}
    assert got == {"NEW"}
    # from a later turn, the newest producer is still the only failed-free choice besides OLD; BAD never appears
    got = {bind(request(BOOK, {"hotel_id": Tag.prev_output}, turn=3, history=history, seed=s)).args_exec["hotel_id"]
           for s in SEEDS}
    assert "BAD" not in got and got <= {"OLD", "NEW"}


@pytest.mark.parametrize("seed", SEEDS[:10])
def test_initial_state_binds_from_c0_with_config_path(seed):
    c0 = {"profile": {"home": {"city": "Lisbon"}}, "n": 3}
    tool = spec("set_city", "Set the city.", {"city": STR})
    b = bind(request(tool, {"city": Tag.initial_state}, c0=c0, seed=seed))
    prov = b.args_prov["city"]
    assert b.args_exec == {"city": "Lisbon"}
    assert prov.tag == Tag.initial_state and prov.path == "$.profile.home.city"
    assert resolve(c0, prov.path) == "Lisbon"
    assert prov.turn is None and prov.call is None


def test_self_create_respects_enum_and_integer_bounds():
    tool = spec("configure", "Configure.", {
        "mode": {"type": "string", "enum": ["fast", "slow", "auto"]},
        "count": {"type": "integer", "minimum": 3, "maximum": 5},
        "ratio": {"type": "number", "minimum": 0.5, "maximum": 0.7},
    })
    modes, counts = set(), set()
    for s in range(60):
        b = bind(request(tool, seed=s))
        assert set(b.args_exec) == {"mode", "count", "ratio"}
        assert all(p.tag == Tag.self_create for p in b.args_prov.values())
        assert b.args_exec["mode"] in {"fast", "slow", "auto"}
        assert isinstance(b.args_exec["count"], int) and not isinstance(b.args_exec["count"], bool)
        assert 3 <= b.args_exec["count"] <= 5
        assert 0.5 <= b.args_exec["ratio"] <= 0.7
        modes.add(b.args_exec["mode"])
        counts.add(b.args_exec["count"])
    assert modes == {"fast", "slow", "auto"} and counts == {3, 4, 5}  # values are generated, not fixed


def test_self_create_respects_exclusive_bounds():
    tool = spec("configure", "Configure.", {"count": {"type": "integer", "exclusiveMinimum": 3, "exclusiveMaximum": 6}})
    assert {bind(request(tool, seed=s)).args_exec["count"] for s in range(60)} <= {4, 5}


def test_self_create_respects_maximum_below_one():
    tool = spec("configure", "Configure.", {"offset": {"type": "integer", "maximum": -2}})
    assert all(bind(request(tool, seed=s)).args_exec["offset"] <= -2 for s in range(20))


def test_a_price_range_spans_the_prices_c0_holds_and_its_ends_are_in_order():
    tool = spec("filter_stocks", "Keep stocks in a price range.", {"min_price": {"type": "number"},
                                                                    "max_price": {"type": "number"}})
    c0 = {"stocks": {"AAPL": {"price": 227.16}, "GOOG": {"price": 2840.34}, "ZETA": {"price": 22.09}}}
    for s in range(40):
        args = bind(request(tool, c0=c0, seed=s)).args_exec
        assert 17 <= args["min_price"] <= args["max_price"] <= 3125, args  # 0.8x the cheapest, 1.1x the dearest
    lows = {bind(request(tool, seed=s)).args_exec["min_price"] for s in range(20)}
    assert max(lows) <= 11  # no prices in c0: the generic range


def test_a_new_value_fits_the_combination_the_parameters_bound_before_it_are_in():
    zips = {"type": "string", "enum": ["1", "2", "3", "4"]}
    tool = spec("estimate_distance", "Distance between two zip codes.", {"cityA": zips, "cityB": zips})
    pairs = [{"cityA": "1", "cityB": "2"}, {"cityA": "2", "cityB": "1"}, {"cityA": "3", "cityB": "4"}]
    seen = set()
    for s in range(40):
        req = request(tool, {"cityA": Tag.self_create, "cityB": Tag.self_create}, seed=s)
        req.combinations = pairs
        args = bind(req).args_exec
        assert args in pairs, args  # each end alone is in the enum; together they are a pair the code knows
        seen.add(args["cityA"])
    assert seen == {"1", "2", "3"}


def test_self_create_generates_names_and_strings():
    tool = spec("add_contact", "Add a contact.", {"email": STR, "city": STR})
    values = [bind(request(tool, seed=s)).args_exec for s in range(20)]
    assert all("@" in v["email"] for v in values)
    assert len({v["email"] for v in values}) > 5


def test_prev_user_msg_reuses_an_earlier_statement_or_registers_a_virtual_one():
    stated = [StatedValue(1, "venue", "Lisbon Arena"), StatedValue(3, "venue", "Osaka Hall"), StatedValue(1, "count", 4)]
    tool = spec("book_venue", "Book a venue.", {"venue": STR})
    modes = set()
    for seed in range(30):
        b = bind(request(tool, {"venue": Tag.prev_user_msg}, turn=3, stated=stated, seed=seed))
        prov = b.args_prov["venue"]
        assert prov.tag == Tag.prev_user_msg and prov.path is None and prov.call is None
        if b.args_exec == {"venue": "Lisbon Arena"} and not b.virtual:
            modes.add("stated")
            assert prov.turn == 1  # turn 3's value is not "earlier"
        else:
            modes.add("virtual")
            # remap-bind-restore: a fresh value registered at an earlier anchor that holds no other venue
            assert [(v.turn, v.param, v.value) for v in b.virtual] == [(prov.turn, "venue", b.args_exec["venue"])]
            assert prov.turn in (0, 2)
    assert modes == {"stated", "virtual"}


def test_a_value_the_user_gave_before_is_referred_to_not_announced_again():
    """Read in a travel record: "I'm going to need the source currency set to USD later" in the first turn, and "use
    USD as the source currency when we get there" again two turns on, for the next conversion."""
    tool = spec("convert", "Convert an amount.", {"from_currency": STR})
    stated = [StatedValue(0, "from_currency", "USD")]
    for seed in range(30):  # the user's currency is always USD: a new value would be USD again
        req = request(tool, {"from_currency": Tag.prev_user_msg}, turn=3, stated=stated, seed=seed)
        b = bind(dataclasses.replace(req, samplers={"from_currency": lambda rng, c0: "USD"}))
        assert b.args_exec == {"from_currency": "USD"} and not b.virtual
        assert b.args_prov["from_currency"].tag == Tag.prev_user_msg and b.args_prov["from_currency"].turn == 0


@pytest.mark.parametrize("name, schema", [("count", {"type": "integer", "minimum": 1, "maximum": 9}),
                                          ("unlock", {"type": "boolean"}), ("city", STR),
                                          ("mode", {"type": "string", "enum": ["eco", "sport"]})])
def test_a_flag_number_choice_or_address_part_is_never_announced_ahead(name, schema):
    """Nothing stated before (or only a value of another type): a flag, a number, an enum's pick or an address
    part is not said turns before its use ("the lock setting I'll want later is true"), so the declared
    prev_user_msg has no usable source and the value is a recorded fallback, announced nowhere."""
    stated = [StatedValue(0, name, object())]  # a statement of a value no schema takes
    tool = spec("set_it", "Set it.", {name: schema})
    for seed in range(10):
        b = bind(request(tool, {name: Tag.prev_user_msg}, turn=2, stated=stated, seed=seed))
        assert b.args_prov[name].tag == Tag.fallback and b.args_prov[name].fallback_from == Tag.prev_user_msg
        assert b.virtual == []


def test_prev_user_msg_at_the_first_turn_falls_back():
    tool = spec("set_city", "Set the city.", {"city": STR})
    b = bind(request(tool, {"city": Tag.prev_user_msg}, turn=0, c0={}, history=[], stated=[]))
    assert b.args_prov["city"].tag == Tag.fallback
    assert b.args_prov["city"].fallback_from == Tag.prev_user_msg
    assert b.virtual == []


@pytest.mark.parametrize("declared", [Tag.prev_output, Tag.initial_state])
def test_unusable_declared_source_falls_back_with_fallback_from(declared):
    tool = spec("set_city", "Set the city.", {"city": STR})
    b = bind(request(tool, {"city": declared}, turn=2, c0={}, history=[], stated=[]))
    prov = b.args_prov["city"]
    assert prov.tag == Tag.fallback
    assert prov.fallback_from == declared
    assert isinstance(b.args_exec["city"], str) and b.args_exec["city"]
    assert prov.path is None and prov.turn is None  # nothing to locate: a fresh value


def test_fallback_takes_another_source_and_keeps_its_location():
    c0 = {"home": {"city": "Rome"}}
    tool = spec("set_city", "Set the city.", {"city": STR})
    b = bind(request(tool, {"city": Tag.prev_output}, turn=2, c0=c0))
    prov = b.args_prov["city"]
    assert b.args_exec == {"city": "Rome"}
    assert prov.tag == Tag.fallback and prov.fallback_from == Tag.prev_output
    assert prov.path == "$.home.city" and resolve(c0, prov.path) == "Rome"


@pytest.mark.parametrize("seed", SEEDS)
def test_co_located_arguments_come_from_the_same_object(seed):
    users = [{"first_name": f"First{i}", "last_name": f"Last{i}", "email": f"u{i}@example.com"} for i in range(14)]
    c0 = {"users": users}
    tool = spec("find_user", "Find a user by name.", {"first_name": STR, "last_name": STR})
    b = bind(request(tool, {"first_name": Tag.initial_state, "last_name": Tag.initial_state}, c0=c0, seed=seed))
    first, last = b.args_exec["first_name"], b.args_exec["last_name"]
    assert first.removeprefix("First") == last.removeprefix("Last")
    p1, p2 = b.args_prov["first_name"].path, b.args_prov["last_name"].path
    assert p1.rsplit(".", 1)[0] == p2.rsplit(".", 1)[0]


FLIGHTS = {"flights": [{"flight_id": f"F{i}", "origin_location_id": o, "destination_location_id": d, "date": day}
                       for i, (o, d, day) in enumerate([("L1", "L2", "2025-05-01"), ("L1", "L3", "2025-05-02"),
                                                        ("L4", "L5", "2025-05-03"), ("L4", "L6", "2025-05-04")])]}
SEARCH = spec("search_flights", "Find direct flights between two locations on a date.",
              {"origin_location_id": STR, "destination_location_id": STR, "date": STR})


@pytest.mark.parametrize("seed", SEEDS)
def test_a_search_takes_filters_that_one_item_of_c0_holds_together(seed):
    """Read in travel records: an origin from a forecast, a destination from another place's routes, no flight
    between them (46% of flight searches came back empty). A search (its name's verb, no read_only flag) filters a
    collection: its origin, destination and date are one flight's of c0, wherever each value is taken from."""
    forecast = call("get_weather", {"location_id": "L4", "date": "2025-05-09"},
                    result={"location_id": "L4", "date": "2025-05-09", "condition": "sunny"})
    routes = call("get_flight_routes", {"origin_location_id": "L1"}, result={"origin_location_id": "L1", "routes": [
        {"destination_location_id": "L2", "dates": [{"date": "2025-05-01"}]},
        {"destination_location_id": "L3", "dates": [{"date": "2025-05-02"}]}]})
    twin = call("search_flights", {"origin_location_id": "L1", "destination_location_id": "L2", "date": "2025-05-01"},
                result={"flights": [FLIGHTS["flights"][0]]})  # this turn's other search: not repeated as it is
    history = [HistoryCall(0, 0, forecast), HistoryCall(0, 1, routes), HistoryCall(1, 0, twin)]
    tags = dict.fromkeys(["origin_location_id", "destination_location_id", "date"], Tag.prev_output)
    b = bind(request(SEARCH, tags, turn=1, index=1, history=history, c0=FLIGHTS, seed=seed))
    picked = (b.args_exec["origin_location_id"], b.args_exec["destination_location_id"], b.args_exec["date"])
    assert picked in {(f["origin_location_id"], f["destination_location_id"], f["date"]) for f in FLIGHTS["flights"]}
    weather = spec("get_weather", "Get the forecast for a location on a date.", {"location_id": STR, "date": STR})
    days = {bind(request(weather, {"location_id": Tag.initial_state, "date": Tag.initial_state}, c0={
        **FLIGHTS, "locations": [{"location_id": "L1"}, {"location_id": "L4"}]}, seed=s)).args_exec["date"]
        for s in SEEDS}
    assert len(days) > 1  # a lookup that is no search is not tied to the flights' dates
    hotels = spec("search_hotels", "Find hotels with a free room.", {"location_id": STR, "check_in": STR, "guests": STR})
    found = call("search_locations", {"query": "oslo"}, result={"locations": [{"location_id": "L1", "city": "Oslo"}]})
    c0 = {"hotels": [{"hotel_id": "H1", "location_id": "L1"}],  # a hotel has no dates: they filter its free rooms
          "bookings": [{"location_id": "L9", "check_in": "2025-05-01", "guests": "2"}]}  # not the searched hotels
    b = bind(request(hotels, {"location_id": Tag.prev_output, "check_in": Tag.self_create, "guests": Tag.self_create},
                     history=[HistoryCall(0, 0, found)], c0=c0, seed=seed))
    assert b.args_exec["location_id"] == "L1" and b.args_prov["location_id"].tag == Tag.prev_output


def test_failed_args_are_avoided_when_alternatives_exist():
    history = [HistoryCall(0, 0, call("list_cities", {}, result={"cities": ["A", "B", "C"]}))]
    tool = spec("visit", "Visit a city.", {"city": STR})
    failed = [{"city": "A"}, {"city": "B"}]
    got = {bind(request(tool, {"city": Tag.prev_output}, history=history, failed_args=failed, seed=s))
           .args_exec["city"] for s in SEEDS}
    assert got == {"C"}
    # from c0 and from stated values too
    got = {bind(request(tool, {"city": Tag.initial_state}, c0={"cities": ["A", "B", "C"]}, failed_args=failed,
                        seed=s)).args_exec["city"] for s in SEEDS}
    assert got == {"C"}
    stated = [StatedValue(0, "city", "A"), StatedValue(1, "city", "C")]
    reused = set()
    for s in SEEDS:
        b = bind(request(tool, {"city": Tag.prev_user_msg}, turn=2, stated=stated, failed_args=failed, seed=s))
        assert b.args_exec["city"] not in ("A", "B")
        if b.args_prov["city"].tag == Tag.prev_user_msg and not b.virtual:
            reused.add(b.args_exec["city"])
    assert reused == {"C"}  # turns 0 and 1 anchor other cities, so no virtual anchor is free: reuse or fall back


def test_failed_args_reused_only_when_nothing_else_exists():
    history = [HistoryCall(0, 0, call("list_cities", {}, result={"cities": ["A"]}))]
    tool = spec("visit", "Visit a city.", {"city": STR})
    b = bind(request(tool, {"city": Tag.prev_output}, history=history, failed_args=[{"city": "A"}]))
    assert b.args_exec == {"city": "A"} and b.args_prov["city"].tag == Tag.prev_output


def test_value_quoted_by_last_error_is_avoided():
    history = [HistoryCall(0, 0, call("list_cities", {}, result={"cities": ["A", "B"]}))]
    tool = spec("visit", "Visit a city.", {"city": STR})
    got = {bind(request(tool, {"city": Tag.prev_output}, history=history, last_error="city 'A' is closed",
                        seed=s)).args_exec["city"] for s in SEEDS}
    assert got == {"B"}


def test_failed_enum_value_is_avoided_for_self_create():
    tool = spec("set_mode", "Set the mode.", {"mode": {"type": "string", "enum": ["on", "off"]}})
    assert {bind(request(tool, failed_args=[{"mode": "on"}], seed=s)).args_exec["mode"] for s in range(200)} == {"off"}


ORDERS = {"orders": [{"order_id": "O1", "status": "delivered"}, {"order_id": "O2", "status": "pending"},
                     {"order_id": "O3", "status": "cancelled"}]}


@pytest.mark.parametrize("tag", [Tag.prev_output, Tag.initial_state])
def test_sibling_hint_from_tool_name_picks_pending_order(tag):
    tool = spec("cancel_pending_order", "Cancel an order.", {"order_id": STR})
    history = [HistoryCall(0, 0, call("list_orders", {}, result=ORDERS))]
    got = {bind(request(tool, {"order_id": tag}, history=history, c0=ORDERS, seed=s)).args_exec["order_id"]
           for s in SEEDS}
    assert got == {"O2"}


def test_a_status_a_later_result_shows_outdates_the_one_in_c0():
    """c0 says O2 and O4 are pending; the dialogue since cancelled O2: the user knows O4 is the pending one."""
    c0 = {"orders": [*ORDERS["orders"], {"order_id": "O4", "status": "pending"}]}
    tool = spec("cancel_pending_order", "Cancel an order.", {"order_id": STR})
    history = [HistoryCall(0, 0, call("cancel_pending_order", {"order_id": "O2"},
                                      result={"order_id": "O2", "status": "cancelled"}))]
    got = {bind(request(tool, {"order_id": Tag.initial_state}, history=history, c0=c0, seed=s)).args_exec["order_id"]
           for s in SEEDS}
    assert got == {"O4"}
    fresh = {bind(request(tool, {"order_id": Tag.initial_state}, c0=c0, seed=s)).args_exec["order_id"] for s in SEEDS}
    assert fresh == {"O2", "O4"}  # before the dialogue changed O2, both are pending

@pytest.mark.parametrize("shown", [True, False])
def test_a_status_error_never_turns_the_wanted_status_against_the_other_candidates(shown):
    """The failed order was cancelled in the dialogue (shown or not): the error's "only pending orders" is what the
    tool asks for, not what came with the failure, so the other pending order is next, never the delivered one."""
    c0 = {"orders": [{"order_id": "O1", "status": "pending"}, {"order_id": "O2", "status": "pending"},
                     {"order_id": "O3", "status": "delivered"}]}
    tool = spec("modify_pending_order", "Modify an order.", {"order_id": STR})
    history = [HistoryCall(0, 0, call("cancel_order", {"order_id": "O1"},
                                      result={"order_id": "O1", "status": "cancelled"}))] if shown else []
    error = "order 'O1' is 'cancelled'; only pending orders allow this action"
    got = {bind(request(tool, {"order_id": Tag.initial_state}, history=history, c0=c0, seed=s, last_error=error,
                        failed_args=[{"order_id": "O1"}])).args_exec["order_id"] for s in SEEDS}
    assert got == {"O2"}

def test_a_listing_of_bare_ids_does_not_hide_what_c0_says_of_each():
    """A profile lists the user's order ids bare (beside the user's own id): c0's statuses still tell them apart."""
    c0 = {"orders": [{"order_id": "O2", "status": "pending"}, {"order_id": "O3", "status": "delivered"}]}
    tool = spec("cancel_pending_order", "Cancel an order.", {"order_id": STR})
    history = [HistoryCall(0, 0, call("get_user_details", {}, result={"user_id": "u1", "orders": ["O2", "O3"]}))]
    got = {bind(request(tool, {"order_id": Tag.initial_state}, history=history, c0=c0, seed=s)).args_exec["order_id"]
           for s in SEEDS}
    assert got == {"O2"}


def test_an_error_refusing_the_order_drops_it_for_a_fitting_one_of_c0():
    """The only order a lookup showed is refused ("Non-delivered order cannot be exchanged", quoting nothing): the
    planner does not send it again but falls back to the customer's delivered order in c0."""
    c0 = {"orders": [{"order_id": "O1", "status": "pending"}, {"order_id": "O3", "status": "delivered"}]}
    tool = spec("exchange_delivered_order_items", "Exchange items.", {"order_id": STR})
    history = [HistoryCall(0, 0, call("get_order_details", {"order_id": "O1"},
                                      result={"order_id": "O1", "status": "pending"}))]
    for s in SEEDS:
        got = bind(request(tool, {"order_id": Tag.prev_output}, history=history, c0=c0, seed=s,
                           last_error="Error: Non-delivered order cannot be exchanged", failed_args=[{"order_id": "O1"}]))
        assert got.args_exec["order_id"] == "O3" and got.args_prov["order_id"].tag == Tag.fallback

NO_OP_ERROR = "incoherent call: set_city changes nothing: its arguments equal the current state"
CITIES = {"orders": [{"order_id": "O1", "city": "Oslo"}, {"order_id": "O2", "city": "Rome"}]}


def test_without_tags_a_write_that_changed_nothing_sets_new_values_on_its_last_target():
    """No tags: c0's city made a no-op write; the next attempt keeps the order it wrote and states a new city."""
    tool = spec("set_city", "Set an order's delivery city.", {"order_id": STR, "city": STR})
    tried = [{"order_id": "O1", "city": "Rome"}, {"order_id": "O2", "city": "Rome"}]
    for s in SEEDS:
        req = dataclasses.replace(request(tool, c0=CITIES, seed=s, last_error=NO_OP_ERROR, failed_args=tried),
                                  free=True)
        got = bind(req)
        assert got.args_exec["order_id"] == "O2" and got.args_prov["city"].tag == Tag.self_create
        assert got.args_exec["city"] not in ("Oslo", "Rome")

def test_without_hint_any_order_can_be_picked():
    tool = spec("show_order", "Show an order.", {"order_id": STR})
    history = [HistoryCall(0, 0, call("list_orders", {}, result=ORDERS))]
    got = {bind(request(tool, {"order_id": Tag.prev_output}, history=history, seed=s)).args_exec["order_id"]
           for s in range(80)}
    assert len(got) > 1  # so the hint test above is meaningful


ERR = "x 'FOO' is not supported; supported: ['EUR', 'GBP']"


def test_error_message_parsing():
    assert error_options(ERR) == ["EUR", "GBP"]
    assert error_quotes(ERR) == {"FOO", "EUR", "GBP"}
    assert error_options("no options here") == [] and error_quotes(None) == set()


def test_error_options_drive_self_create_strings():
    tool = spec("convert", "Convert money.", {"currency": STR})
    got = {bind(request(tool, {"currency": Tag.self_create}, last_error=ERR, failed_args=[{"currency": "FOO"}],
                        seed=s)).args_exec["currency"] for s in SEEDS}
    assert got == {"EUR", "GBP"}
    for s in SEEDS[:5]:
        assert bind(request(tool, {"currency": Tag.self_create}, last_error=ERR, seed=s)).args_prov["currency"].tag \
            == Tag.self_create


def test_error_options_failed_option_is_excluded():
    tool = spec("convert", "Convert money.", {"currency": STR})
    got = {bind(request(tool, last_error=ERR, failed_args=[{"currency": "EUR"}], seed=s)).args_exec["currency"]
           for s in SEEDS}
    assert got == {"GBP"}


def test_error_options_must_fit_the_schema():
    tool = spec("convert", "Convert money.", {"currency": {"type": "string", "enum": ["USD", "JPY"]}})
    got = {bind(request(tool, last_error=ERR, seed=s)).args_exec["currency"] for s in SEEDS}
    assert got <= {"USD", "JPY"}


def _rich_request(seed):
    users = [{"first_name": f"F{i}", "last_name": f"L{i}"} for i in range(6)]
    tool = spec("book", "Book.", {"hotel_id": STR, "first_name": STR, "last_name": STR, "nights": {
        "type": "integer", "minimum": 1, "maximum": 9}, "check_in": STR},
        optional={"vip": {"type": "boolean"}, "tier": {"type": "string", "enum": ["a", "b"]}})
    history = [HistoryCall(0, 0, call("search_hotels", {}, result=HOTELS))]
    tags = {"hotel_id": Tag.prev_output, "first_name": Tag.initial_state, "last_name": Tag.initial_state}
    return request(tool, tags, history=history, c0={"users": users, "start": "2026-03-01", "end": "2026-03-20"},
                   seed=seed)


def test_same_seed_gives_same_binding():
    for seed in range(10):
        a, b = RulePlanner().bind(_rich_request(seed)), RulePlanner().bind(_rich_request(seed))
        assert a == b
    results = {repr(RulePlanner().bind(_rich_request(s)).args_exec) for s in range(10)}
    assert len(results) > 1  # different seeds do vary


def test_dates_stay_inside_c0_calendar():
    for seed in range(20):
        b = RulePlanner().bind(_rich_request(seed))
        assert "2026-03-01" <= b.args_exec["check_in"] <= "2026-03-20"


@pytest.mark.parametrize("seed", range(8))
def test_a_bare_id_is_chosen_by_what_c0_says_beside_it(seed):
    """A profile lists order ids bare; c0 knows their statuses: exchanging items of a delivered order takes the
    delivered one, not a pending one the profile lists first."""
    c0 = {"orders": {"#W1": {"order_id": "#W1", "status": "pending"}, "#W2": {"order_id": "#W2", "status": "pending"},
                     "#W3": {"order_id": "#W3", "status": "delivered"}}}
    profile = HistoryCall(0, 0, call("get_user_details", {"user_id": "u"}, result={"orders": ["#W1", "#W2", "#W3"]}))
    tool = spec("exchange_delivered_order_items", "Exchange items in a delivered order.", {"order_id": STR})
    b = bind(request(tool, {"order_id": Tag.prev_output}, turn=1, c0=c0, history=[profile], seed=seed))
    assert b.args_exec["order_id"] == "#W3"


SHOP = {"users": [{"user_id": "ann_1", "email": "ann@x.org", "payment_methods": [{"payment_method_id": "card_ann"}]},
                  {"user_id": "bob_2", "email": "bob@x.org", "payment_methods": [{"payment_method_id": "card_bob"}]}],
        "orders": [{"order_id": "#A1", "user_id": "ann_1"}, {"order_id": "#A2", "user_id": "ann_1"},
                   {"order_id": "#B1", "user_id": "bob_2"}, {"order_id": "#B2", "user_id": "bob_2"}]}
PAY = spec("pay_order", "Pay an order.", {"order_id": STR, "payment_method_id": STR})
LOGIN = HistoryCall(0, 0, call("login_by_email", {"email": "ann@x.org"}, result={"user_id": "ann_1"}))


def _free(history, seed):
    """A no-tags request (no declared sources) to pay an order, on the two-customer SHOP."""
    req = request(PAY, {}, turn=1, history=history, c0=SHOP, seed=seed)
    req.free = True
    return req


def test_c0_values_are_the_logged_in_customers_own_once_the_dialogue_names_them():
    # no tags: every value from c0, and after ann's login only ann's order and card (bob's would be refused)
    got = [bind(_free([LOGIN], s)) for s in SEEDS]
    assert {b.args_exec["order_id"] for b in got} == {"#A1", "#A2"}
    assert {b.args_exec["payment_method_id"] for b in got} == {"card_ann"}
    assert all(p.tag == Tag.initial_state for b in got for p in b.args_prov.values())
    # a fallback from an unfed prev_output takes the customer's own too
    fb = [bind(request(PAY, {"order_id": Tag.prev_output, "payment_method_id": Tag.prev_output}, turn=1,
                       history=[LOGIN], c0=SHOP, seed=s)) for s in SEEDS]
    assert {b.args_exec["order_id"] for b in fb} == {"#A1", "#A2"}
    assert all(b.args_prov["order_id"].tag == Tag.fallback for b in fb)


def test_before_anyone_is_named_any_c0_value_can_be_taken():
    got = {bind(_free([], s)).args_exec["order_id"] for s in SEEDS}
    assert got >= {"#A1", "#B1"}  # so the test above is meaningful


def test_a_file_parameter_takes_a_file_and_a_folder_parameter_a_folder_from_one_listing():
    listing = {"current_directory_content": ["logs", "notes.txt", "temp", "todo.md"]}
    history = [HistoryCall(0, 0, call("ls", {}, result=listing))]
    aliases = {"file_name": ["current_directory_content"], "folder": ["current_directory_content"]}
    cat = spec("cat", "Display the contents of a file.", {"file_name": STR}).model_copy(
        update={"value_fields": {"file_name": aliases["file_name"]}})
    cd = spec("cd", "Change the current directory.", {"folder": STR}).model_copy(
        update={"value_fields": {"folder": aliases["folder"]}})
    files = {bind(request(cat, {"file_name": Tag.prev_output}, history=history, seed=s)).args_exec["file_name"]
             for s in SEEDS}
    folders = {bind(request(cd, {"folder": Tag.prev_output}, history=history, seed=s)).args_exec["folder"]
               for s in SEEDS}
    assert files <= {"notes.txt", "todo.md"} and folders <= {"logs", "temp"}, (files, folders)  # never a folder to read


def test_an_item_swapped_for_a_variant_is_of_the_variants_product():
    order = {"order_id": "#W1", "status": "delivered",
             "items": [{"item_id": "111", "product_id": "P1", "name": "Lamp"},
                       {"item_id": "222", "product_id": "P2", "name": "Kettle"}]}
    product = {"product_id": "P2", "name": "Kettle", "variants": {"333": {"item_id": "333", "available": True},
                                                                 "444": {"item_id": "444", "available": True}}}
    history = [HistoryCall(0, 0, call("get_order_details", {"order_id": "#W1"}, result=order)),
               HistoryCall(1, 0, call("get_product_details", {"product_id": "P2"}, result=product))]
    ids = {"type": "array", "items": STR}
    exchange = spec("exchange_delivered_order_items", "Exchange items in a delivered order for new items of the "
                    "same product.", {"order_id": STR, "item_ids": ids, "new_item_ids": ids}).model_copy(
        update={"value_fields": {"new_item_ids": ["$.variants.*.item_id"]}})
    tags = {p: Tag.prev_output for p in ("order_id", "item_ids", "new_item_ids")}
    pairs = {(tuple(b.args_exec["item_ids"]), tuple(b.args_exec["new_item_ids"]))
             for b in (bind(request(exchange, tags, turn=2, history=history, seed=s)) for s in SEEDS)}
    assert {old for old, _ in pairs} == {("222",)}, pairs  # the lamp has no variant in the dialogue
    assert {new for _, new in pairs} <= {("333",), ("444",)}, pairs
