"""Tests for the built-in `travel` domain (locations, hotels, flights, bookings and a traveler wallet)."""
import copy
import json
from datetime import date, timedelta

from langchain_core.utils.function_calling import convert_to_openai_tool

from sap.toolsets.domains import travel
from sap.toolsets.domains.travel import TravelBooking, sample_config

SEEDS = range(30)


def tool_names(instance):
    return sorted(n for n in dir(instance) if not n.startswith("_") and callable(getattr(instance, n)))


def loaded(seed=0):
    config = sample_config(seed)
    system = TravelBooking()
    system._load_scenario(config)
    return system, config


def day(config, offset):
    return (date.fromisoformat(config["today"]) + timedelta(days=offset)).isoformat()


def bookable_room(system, location_id, config, guests=1):
    """(hotel_id, room) of the cheapest hotel in the location with a free room for the guests."""
    found = system.search_hotels(location_id, day(config, 2), day(config, 5), guests)
    hotel_id = found["hotels"][0]["hotel_id"]
    rooms = system.get_hotel_details(hotel_id)["rooms"]
    return hotel_id, next(r for r in rooms if r["available"] and r["max_guests"] >= guests)


def full_room(config):
    return next((h["hotel_id"], r) for h in config["hotels"] for r in h["rooms"] if r["rooms_left"] == 0)


def rich(system):
    system._traveler["wallet_balance"] = 1_000_000.0


# ----- module contract --------------------------------------------------------

def test_module_constants():
    assert travel.NAME == "travel"
    assert travel.DESCRIPTION and "\n" not in travel.DESCRIPTION
    assert travel.TOOL_CLASS is TravelBooking
    assert travel.__doc__.strip()


def test_at_least_twelve_tools_and_clean_schemas():
    names = tool_names(TravelBooking())
    assert len(names) >= 12
    for name in names:
        spec = convert_to_openai_tool(getattr(TravelBooking(), name))["function"]
        assert spec["name"] == name
        assert spec["description"].strip()
        for pname, pschema in spec["parameters"].get("properties", {}).items():
            assert pschema.get("description", "").strip(), f"{name}.{pname} lacks a description"
    flights = convert_to_openai_tool(TravelBooking().search_flights)["function"]["parameters"]
    assert flights["required"] == ["origin_location_id", "destination_location_id", "date"]
    book = convert_to_openai_tool(TravelBooking().book_flight)["function"]["parameters"]
    assert book["properties"]["seat_class"]["enum"] == ["economy", "business", "first"]
    hotel = convert_to_openai_tool(TravelBooking().book_hotel)["function"]["parameters"]
    assert hotel["required"] == ["hotel_id", "room_id", "check_in", "check_out", "guest_name"]
    assert hotel["properties"]["guests"]["type"] == "integer"
    listing = convert_to_openai_tool(TravelBooking().list_bookings)["function"]["parameters"]
    assert not listing.get("required")


def test_empty_instance_gives_structured_errors():
    system = TravelBooking()
    assert "error" in system.get_hotel_details("HTL1")
    assert "error" in system.get_booking("BK1")
    assert system.list_bookings() == {"bookings": [], "count": 0}


# ----- sample configurations ----------------------------------------------------

def test_sample_config_is_deterministic_and_json():
    assert sample_config(5) == sample_config(5)
    config = sample_config(5)
    assert json.loads(json.dumps(config)) == config


def test_sample_config_varies_with_seed():
    configs = [sample_config(seed) for seed in SEEDS]
    assert len({c["today"] for c in configs}) > 20
    assert len({c["traveler"]["name"] for c in configs}) > 10
    assert len({len(c["locations"]) for c in configs}) > 3
    assert len({frozenset(loc["city"] for loc in c["locations"]) for c in configs}) == len(configs)
    assert len({c["hotels"][0]["hotel_id"] for c in configs}) > 25
    assert {len(c["bookings"]) for c in configs} == {0, 1, 2}


def test_sample_config_shape():
    for seed in SEEDS:
        config = sample_config(seed)
        ids = {loc["location_id"] for loc in config["locations"]}
        assert 6 <= len(ids) <= 12
        assert config["last_day"] == day(config, 29)
        traveler = config["traveler"]
        assert traveler["home_location_id"] in ids and traveler["origin_location_id"] in ids
        assert traveler["guest_name"] and traveler["passenger_name"]
        for location_id in ids:
            hotels = [h for h in config["hotels"] if h["location_id"] == location_id]
            assert 2 <= len(hotels) <= 4
            assert all(2 <= len(h["rooms"]) <= 4 for h in hotels)
            held = {b["room_id"] for b in config["bookings"] if b.get("room_id") and b["status"] == "confirmed"}
            assert all(any(r["rooms_left"] > 0 or r["room_id"] in held for r in h["rooms"]) for h in hotels)
        assert all(config["today"] <= f["date"] <= config["last_day"] for f in config["flights"])
        assert all(f["origin_location_id"] in ids and f["destination_location_id"] in ids for f in config["flights"])
        assert len({(f["origin_location_id"], f["destination_location_id"]) for f in config["flights"]}) >= 6
        assert len(config["bookings"]) <= 2
    all_rooms = [r for seed in SEEDS for h in sample_config(seed)["hotels"] for r in h["rooms"]]
    assert any(r["rooms_left"] == 0 for r in all_rooms)


def test_every_location_has_flights_out_and_in():
    """A location the agency lists without flights made every search from or to it empty (a third of the flight
    searches of a 30-record run) and the calls after it fell back to values the dialogue never showed."""
    for seed in range(200):
        config = sample_config(seed)
        system = TravelBooking()
        system._load_scenario(config)
        for location in config["locations"]:
            routes = system.get_flight_routes(location["location_id"])["routes"]
            assert routes, f"seed {seed}: no flights from {location['city']}"
            assert any(f["destination_location_id"] == location["location_id"] for f in config["flights"])


def test_places_and_flights_are_known_by_what_travelers_call_them():
    """Travelers say "LHR" and "BA2877", not an internal "LOC1766" or "FL67608" (103 and 46 of 477 user messages
    stated one at n=100 seed 0)."""
    for seed in range(50):
        config = sample_config(seed)
        locations, flights = config["locations"], config["flights"]
        assert all(loc["location_id"] == loc["airport_code"] for loc in locations)
        assert len({loc["location_id"] for loc in locations}) == len(locations)
        assert all(f["flight_id"] == f["flight_number"] for f in flights)
        assert len({f["flight_id"] for f in flights}) == len(flights)


# ----- dependency chains ------------------------------------------------------

def test_chain_locations_hotel_details_book_get_cancel():
    system, config = loaded(1)
    location = system.search_locations(config["locations"][2]["city"])["locations"][0]
    check_in, check_out = day(config, 3), day(config, 6)
    found = system.search_hotels(location["location_id"], check_in, check_out, 2)
    assert found["nights"] == 3 and found["hotels"]
    prices = [h["price_per_night"] for h in found["hotels"]]
    assert prices == sorted(prices)
    hotel = found["hotels"][0]
    details = system.get_hotel_details(hotel["hotel_id"])
    room = next(r for r in details["rooms"] if r["available"] and r["max_guests"] >= 2)
    assert room["price"] == hotel["price_per_night"]
    balance = config["traveler"]["wallet_balance"]
    booked = system.book_hotel(hotel["hotel_id"], room["room_id"], found["check_in"], found["check_out"],
                               config["traveler"]["guest_name"], found["guests"])
    assert booked["status"] == "confirmed"
    assert booked["total_price"] == round(room["price"] * 3, 2)
    assert booked["wallet_balance"] == round(balance - booked["total_price"], 2)
    after = system.get_hotel_details(hotel["hotel_id"])["rooms"]
    assert next(r for r in after if r["room_id"] == room["room_id"])["rooms_left"] == room["rooms_left"] - 1
    fetched = system.get_booking(booked["booking_id"])
    assert (fetched["hotel_id"], fetched["room_id"], fetched["guest_name"]) == (
        hotel["hotel_id"], room["room_id"], config["traveler"]["guest_name"])
    assert booked["booking_id"] in {b["booking_id"] for b in system.list_bookings("confirmed", "hotel")["bookings"]}
    cancelled = system.cancel_booking(fetched["booking_id"])
    assert cancelled["status"] == "cancelled" and cancelled["refund_amount"] == booked["total_price"]
    assert cancelled["wallet_balance"] == balance
    restored = system.get_hotel_details(hotel["hotel_id"])["rooms"]
    assert next(r for r in restored if r["room_id"] == room["room_id"])["rooms_left"] == room["rooms_left"]
    assert "already cancelled" in system.cancel_booking(fetched["booking_id"])["error"]


def test_chain_routes_flights_details_book_cancel():
    system, config = loaded(2)
    rich(system)
    routes = system.get_flight_routes(config["traveler"]["origin_location_id"])
    route = routes["routes"][0]
    found = system.search_flights(routes["origin_location_id"], route["destination_location_id"],
                                  route["dates"][0]["date"])
    assert found["count"] == route["dates"][0]["flight_count"]
    flight = found["flights"][0]
    assert flight["origin_location_id"] == routes["origin_location_id"]
    details = system.get_flight_details(flight["flight_id"])
    assert details["destination"]["location_id"] == route["destination_location_id"]
    cabin = next(c for c in details["cabins"] if c["seats_left"] > 0)
    booked = system.book_flight(details["flight_id"], config["traveler"]["passenger_name"], cabin["seat_class"])
    assert booked["total_price"] == cabin["price"] and booked["seat_class"] == cabin["seat_class"]
    again = system.get_flight_details(flight["flight_id"])["cabins"]
    assert next(c for c in again if c["seat_class"] == cabin["seat_class"])["seats_left"] == cabin["seats_left"] - 1
    assert system.get_booking(booked["booking_id"])["passenger_name"] == config["traveler"]["passenger_name"]
    assert system.cancel_booking(booked["booking_id"])["status"] == "cancelled"
    assert system.get_flight_details(flight["flight_id"])["cabins"] == details["cabins"]


def test_chain_flight_then_hotel_and_weather_at_destination():
    system, config = loaded(3)
    rich(system)
    route = system.get_flight_routes(config["traveler"]["origin_location_id"])["routes"][0]
    arrival_day = route["dates"][0]["date"]
    destination = route["destination_location_id"]
    weather = system.get_weather(destination, arrival_day)
    assert weather["city"] == route["city"] and weather["low_c"] < weather["high_c"]
    assert system.get_weather(destination, arrival_day) == weather
    if arrival_day < config["last_day"]:
        check_out = (date.fromisoformat(arrival_day) + timedelta(days=1)).isoformat()
        hotels = system.search_hotels(destination, arrival_day, check_out, 1)["hotels"]
        assert all(h["location_id"] == destination for h in hotels)


def test_chain_modify_hotel_dates_charges_difference():
    system, config = loaded(4)
    rich(system)
    location_id = config["traveler"]["home_location_id"]
    hotel_id, room = bookable_room(system, location_id, config)
    booked = system.book_hotel(hotel_id, room["room_id"], day(config, 2), day(config, 4), "Ana Lima")
    before = system._state()["traveler"]["wallet_balance"]
    moved = system.modify_booking_dates(booked["booking_id"], day(config, 10), day(config, 15))
    assert (moved["check_in"], moved["check_out"], moved["nights"]) == (day(config, 10), day(config, 15), 5)
    assert moved["price_difference"] == round(room["price"] * 3, 2)
    assert moved["wallet_balance"] == round(before - moved["price_difference"], 2)
    shorter = system.modify_booking_dates(booked["booking_id"], day(config, 10), day(config, 11))
    assert shorter["price_difference"] == round(-room["price"] * 4, 2)
    assert system.get_booking(booked["booking_id"])["total_price"] == room["price"]
    assert "already" in system.modify_booking_dates(booked["booking_id"], day(config, 10), day(config, 11))["error"]


def test_booking_ids_are_deterministic_and_fresh():
    def book(seed):
        system, config = loaded(seed)
        hotel_id, room = bookable_room(system, config["locations"][0]["location_id"], config)
        return system.book_hotel(hotel_id, room["room_id"], day(config, 1), day(config, 2), "Kai Berg")["booking_id"]

    assert book(8) == book(8)
    assert book(8) not in {b["booking_id"] for b in sample_config(8)["bookings"]}


# ----- validation and structured errors ------------------------------------------

def test_bad_ids_give_structured_errors():
    system, config = loaded(5)
    assert "LOC0" in system.search_hotels("LOC0", day(config, 1), day(config, 2), 1)["error"]
    assert "HTL0" in system.get_hotel_details("HTL0")["error"]
    assert "FL0" in system.get_flight_details("FL0")["error"]
    assert "FL0" in system.book_flight("FL0", "Kai Berg", "economy")["error"]
    assert "BK0" in system.get_booking("BK0")["error"]
    assert "BK0" in system.cancel_booking("BK0")["error"]
    assert "LOC0" in system.get_weather("LOC0", day(config, 1))["error"]
    assert "origin_location_id" in system.get_flight_routes("LOC0")["error"]
    home = config["traveler"]["home_location_id"]
    assert "destination_location_id" in system.search_flights(home, "LOC0", day(config, 1))["error"]
    assert "both" in system.search_flights(home, home, day(config, 1))["error"]
    hotel_id, _ = bookable_room(system, home, config)
    other_room = next(r["room_id"] for h in config["hotels"] if h["hotel_id"] != hotel_id for r in h["rooms"])
    assert other_room in system.book_hotel(hotel_id, other_room, day(config, 1), day(config, 2), "Kai")["error"]


def test_date_validation():
    system, config = loaded(6)
    location_id = config["locations"][0]["location_id"]
    search = system.search_hotels
    assert "YYYY-MM-DD" in search(location_id, "05/03/2025", day(config, 2), 1)["error"]
    assert "2025-02-30" in search(location_id, "2025-02-30", day(config, 2), 1)["error"]
    assert "after check_in" in search(location_id, day(config, 3), day(config, 3), 1)["error"]
    assert "after check_in" in search(location_id, day(config, 5), day(config, 3), 1)["error"]
    assert "calendar" in search(location_id, day(config, -1), day(config, 2), 1)["error"]
    assert "calendar" in search(location_id, day(config, 20), day(config, 30), 1)["error"]
    assert "error" not in search(location_id, day(config, 0), day(config, 29), 1)
    assert "calendar" in system.get_weather(location_id, day(config, 30))["error"]
    origin = config["flights"][0]["origin_location_id"]
    destination = config["flights"][0]["destination_location_id"]
    assert "calendar" in system.search_flights(origin, destination, day(config, 45))["error"]


def test_guests_validation():
    system, config = loaded(7)
    location_id = config["locations"][0]["location_id"]
    for bad in (0, -2, "two", True):
        assert "guests" in system.search_hotels(location_id, day(config, 1), day(config, 2), bad)["error"]
    assert system.search_hotels(location_id, day(config, 1), day(config, 2), 9)["hotels"] == []
    hotel_id, room = bookable_room(system, location_id, config)
    too_many = system.book_hotel(hotel_id, room["room_id"], day(config, 1), day(config, 2), "Kai",
                                 room["max_guests"] + 1)
    assert "at most" in too_many["error"]
    assert "guest_name" in system.book_hotel(hotel_id, room["room_id"], day(config, 1), day(config, 2), " ")["error"]


def test_full_room_and_full_cabin_are_rejected():
    system, config = loaded(9)
    rich(system)
    hotel_id, room = full_room(config)
    before = copy.deepcopy(system._state())  # _state() gives the live structures
    result = system.book_hotel(hotel_id, room["room_id"], day(config, 1), day(config, 2), "Kai")
    assert "fully booked" in result["error"]
    flight, seat_class = next((f, c) for f in config["flights"] for c in ("economy", "business", "first")
                              if f["cabins"][c]["seats_left"] == 0)
    assert "no " + seat_class in system.book_flight(flight["flight_id"], "Kai Berg", seat_class)["error"]
    assert "seat_class" in system.book_flight(flight["flight_id"], "Kai Berg", "premium")["error"]
    assert system._state() == before


def test_last_room_sells_out():
    system, config = loaded(10)
    rich(system)
    hotel_id, room = bookable_room(system, config["locations"][1]["location_id"], config)
    for _ in range(room["rooms_left"]):
        assert "error" not in system.book_hotel(hotel_id, room["room_id"], day(config, 1), day(config, 3), "Kai")
    result = system.book_hotel(hotel_id, room["room_id"], day(config, 1), day(config, 3), "Kai")
    assert "fully booked" in result["error"]


def test_wallet_balance_is_enforced():
    system, config = loaded(11)
    system._traveler["wallet_balance"] = 10.0
    flight = next(f for f in config["flights"] if f["cabins"]["economy"]["seats_left"] > 0)
    before = copy.deepcopy(system._state())  # _state() gives the live structures
    assert "wallet balance" in system.book_flight(flight["flight_id"], "Kai Berg", "economy")["error"]
    assert system._state() == before


def test_modify_rules():
    system, config = loaded(17)
    rich(system)
    flight = next(f for f in config["flights"] if f["cabins"]["economy"]["seats_left"] > 0)
    booked = system.book_flight(flight["flight_id"], "Kai Berg", "economy")
    result = system.modify_booking_dates(booked["booking_id"], day(config, 1), day(config, 2))
    assert "flight booking" in result["error"]
    assert "BK0" in system.modify_booking_dates("BK0", day(config, 1), day(config, 2))["error"]


def test_cancelled_sample_booking_cannot_be_cancelled_again():
    for seed in SEEDS:
        system, config = loaded(seed)
        cancelled = next((b for b in config["bookings"] if b["status"] == "cancelled"), None)
        if cancelled:
            break
    assert "already cancelled" in system.cancel_booking(cancelled["booking_id"])["error"]
    assert "already cancelled" in system.modify_booking_dates(cancelled["booking_id"], day(config, 1),
                                                              day(config, 2))["error"]


def test_convert_currency():
    system, config = loaded(12)
    rates = config["exchange_rates"]
    result = system.convert_currency(100, "usd", "EUR")
    assert result["converted_amount"] == round(100 * rates["EUR"], 2) and result["to_currency"] == "EUR"
    back = system.convert_currency(result["converted_amount"], "EUR", "USD")
    assert abs(back["converted_amount"] - 100) < 0.02
    assert "XYZ" in system.convert_currency(10, "XYZ", "USD")["error"]
    assert "amount" in system.convert_currency(-5, "USD", "EUR")["error"]


def test_search_locations_matches_city_country_and_code():
    system, config = loaded(13)
    location = config["locations"][0]
    for query in (location["city"].upper(), location["country"], location["airport_code"].lower()):
        assert location["location_id"] in {loc["location_id"] for loc in system.search_locations(query)["locations"]}
    everything = system.search_locations("")
    assert everything["count"] == len(config["locations"]) and len(everything["locations"]) <= 10
    assert system.search_locations("Atlantis")["count"] == 0


def test_traveler_profile_exposes_binding_values():
    system, config = loaded(14)
    profile = system.get_traveler_profile()
    for key in ("guest_name", "passenger_name", "home_location_id", "origin_location_id", "wallet_balance"):
        assert profile[key] == config["traveler"][key]
    assert profile["today"] == config["today"]


# ----- state ------------------------------------------------------------------

def test_state_changes_after_mutation_and_is_json():
    system, config = loaded(15)
    before = copy.deepcopy(system._state())  # _state() gives the live structures
    json.dumps(before)
    system.search_locations("")
    system.get_flight_routes(config["traveler"]["origin_location_id"])
    assert system._state() == before  # reads do not mutate
    hotel_id, room = bookable_room(system, config["locations"][0]["location_id"], config)
    rich(system)
    booked = system.book_hotel(hotel_id, room["room_id"], day(config, 1), day(config, 2), "Kai Berg")
    after = system._state()
    assert after != before and booked["booking_id"] in after["bookings"]
    assert json.loads(json.dumps(after)) == after


def test_load_scenario_deep_copies():
    config = sample_config(16)
    system = TravelBooking()
    system._load_scenario(config)
    config["traveler"]["wallet_balance"] = -1
    config["hotels"][0]["rooms"][0]["rooms_left"] = 99
    state = system._state()
    assert state["traveler"]["wallet_balance"] != -1
    assert state["hotels"][config["hotels"][0]["hotel_id"]]["rooms"][0]["rooms_left"] != 99


def test_a_booking_moves_to_dates_the_user_gives_not_dates_read_off_a_result():
    """modify_booking_dates documents check_in/check_out as "the new" dates: they are the user's new values on every
    edge of the rule FSM (read off the booking they are its own dates, a no-op the domain refuses; read off a search
    they are the dates the booking was made for)."""
    from sap.fsm.build import RuleFSMBuilder
    from sap.model import Tag
    from sap.toolsets import load_toolset

    fsm = RuleFSMBuilder().build(load_toolset("travel"))
    tags = {(name, e.provenance_tag["modify_booking_dates"][name]) for e in fsm.transitions
            if "modify_booking_dates" in e.action for name in ("check_in", "check_out")}
    assert tags == {("check_in", Tag.self_create), ("check_out", Tag.self_create)}
    booking_tags = {e.provenance_tag["modify_booking_dates"]["booking_id"] for e in fsm.transitions
                    if "modify_booking_dates" in e.action}
    assert Tag.prev_output in booking_tags  # the booking itself is still found, not made up
