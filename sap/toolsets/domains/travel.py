"""Travel booking system: find locations, hotels and flights, book them from a wallet, then manage or cancel them."""
from __future__ import annotations

import copy
import math
import random
import re
import zlib
from datetime import date, datetime, timedelta
from typing import Any, Callable, Literal, Optional

from sap.jsonutil import json_copy
from sap.toolsets.domains.common import ToolError, money, tool_method

NAME = "travel"
DESCRIPTION = (
    "Travel booking: search locations, hotels and flights, check room and seat availability, book hotels and flights "
    "paid from the traveler's wallet, list, modify or cancel bookings, check the weather and convert currencies."
)

SeatClass = Literal["economy", "business", "first"]
SEAT_CLASSES = ("economy", "business", "first")
BookingType = Literal["hotel", "flight"]
BookingStatus = Literal["confirmed", "cancelled"]
MAX_LISTED = 10
CALENDAR_DAYS = 30
DEFAULT_BOOKING_NUMBER = 100001
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")





def _parse_date(value: Any, label: str) -> date:
    if not isinstance(value, str) or not _DATE_RE.fullmatch(value):
        raise ToolError(f"{label} must be a date in YYYY-MM-DD format, got {value!r}")
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ToolError(f"{label} {value!r} is not a valid calendar date") from None


def _name(value: Any, label: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"{label} must be a non-empty string, got {value!r}")
    return value.strip()


def _positive_int(value: Any, label: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolError(f"{label} must be an integer of at least 1, got {value!r}")
    return value


class TravelBooking:
    """A travel agency: locations, hotels with room types, flights with cabins, the traveler's bookings and wallet."""

    def __init__(self) -> None:
        self._today = ""
        self._last_day = ""
        self._traveler: dict = {}
        self._locations: dict[str, dict] = {}
        self._hotels: dict[str, dict] = {}
        self._flights: dict[str, dict] = {}
        self._bookings: dict[str, dict] = {}
        self._exchange_rates: dict[str, float] = {}
        self._next_booking_number = DEFAULT_BOOKING_NUMBER

    def _load_scenario(self, config: dict) -> None:
        config = json_copy(config)
        self._today = config["today"]
        self._last_day = config.get("last_day") or (
            date.fromisoformat(self._today) + timedelta(days=CALENDAR_DAYS - 1)).isoformat()
        self._traveler = config.get("traveler", {})
        self._locations = {loc["location_id"]: loc for loc in config.get("locations", [])}
        self._hotels = {h["hotel_id"]: h for h in config.get("hotels", [])}
        self._flights = {f["flight_id"]: f for f in config.get("flights", [])}
        self._bookings = {b["booking_id"]: b for b in config.get("bookings", [])}
        self._exchange_rates = config.get("exchange_rates", {"USD": 1.0})
        self._next_booking_number = int(config.get("next_booking_number", DEFAULT_BOOKING_NUMBER))

    def _state(self) -> dict:
        return {
            "today": self._today,
            "last_day": self._last_day,
            "traveler": self._traveler,
            "locations": self._locations,
            "hotels": self._hotels,
            "flights": self._flights,
            "bookings": self._bookings,
            "exchange_rates": self._exchange_rates,
            "next_booking_number": self._next_booking_number,
        }

    # ----- internal helpers -------------------------------------------------

    def _calendar_date(self, value: Any, label: str) -> date:
        """`value` parsed as a date inside the bookable calendar."""
        day = _parse_date(value, label)
        if not self._today <= day.isoformat() <= self._last_day:
            raise ToolError(f"{label} {value} is outside the bookable calendar {self._today} to {self._last_day}")
        return day

    def _stay(self, check_in: Any, check_out: Any) -> int:
        """The number of nights between valid in-calendar dates check_in < check_out."""
        start = self._calendar_date(check_in, "check_in")
        end = self._calendar_date(check_out, "check_out")
        if end <= start:
            raise ToolError(f"check_out {check_out} must be after check_in {check_in}")
        return (end - start).days

    def _location(self, location_id: str, label: str = "location_id") -> dict:
        location = self._locations.get(location_id)
        if location is None:
            raise ToolError(f"{label} {location_id!r} not found; use search_locations to find location ids")
        return location

    def _hotel(self, hotel_id: str) -> dict:
        hotel = self._hotels.get(hotel_id)
        if hotel is None:
            raise ToolError(f"hotel {hotel_id!r} not found")
        return hotel

    def _room(self, hotel: dict, room_id: str) -> dict:
        for room in hotel["rooms"]:
            if room["room_id"] == room_id:
                return room
        raise ToolError(f"room {room_id!r} not found in hotel {hotel['hotel_id']!r} ({hotel['name']})")

    def _flight(self, flight_id: str) -> dict:
        flight = self._flights.get(flight_id)
        if flight is None:
            raise ToolError(f"flight {flight_id!r} not found")
        return flight

    def _booking(self, booking_id: str, confirmed: bool = False) -> dict:
        booking = self._bookings.get(booking_id)
        if booking is None:
            raise ToolError(f"booking {booking_id!r} not found")
        if confirmed and booking["status"] != "confirmed":
            raise ToolError(f"booking {booking_id!r} is already {booking['status']}")
        return booking

    def _charge(self, amount: float) -> None:
        balance = self._traveler.get("wallet_balance", 0.0)
        if amount > balance + 1e-9:
            raise ToolError(f"wallet balance {balance} is less than the price {money(amount)}")
        self._traveler["wallet_balance"] = money(balance - amount)

    def _refund(self, amount: float) -> None:
        self._traveler["wallet_balance"] = money(self._traveler.get("wallet_balance", 0.0) + amount)

    def _new_booking_id(self) -> str:
        while f"BK{self._next_booking_number}" in self._bookings:
            self._next_booking_number += 1
        booking_id = f"BK{self._next_booking_number}"
        self._next_booking_number += 1
        return booking_id

    def _rate(self, currency: str, label: str) -> float:
        rate = self._exchange_rates.get(currency.upper()) if isinstance(currency, str) else None
        if rate is None:
            raise ToolError(f"{label} {currency!r} is not supported; supported: {sorted(self._exchange_rates)}")
        return rate

    def _place(self, location_id: str) -> dict:
        location = self._locations[location_id]
        return {"location_id": location_id, "city": location["city"], "airport_code": location["airport_code"]}

    @staticmethod
    def _flight_summary(flight: dict) -> dict:
        cabins = flight["cabins"]
        open_classes = [c for c in SEAT_CLASSES if cabins[c]["seats_left"] > 0]
        return {
            "flight_id": flight["flight_id"],
            "flight_number": flight["flight_number"],
            "airline": flight["airline"],
            "origin_location_id": flight["origin_location_id"],
            "destination_location_id": flight["destination_location_id"],
            "date": flight["date"],
            "departure_time": flight["departure_time"],
            "arrival_time": flight["arrival_time"],
            "price": min((cabins[c]["price"] for c in open_classes), default=cabins["economy"]["price"]),
            "seats_left": sum(cabins[c]["seats_left"] for c in SEAT_CLASSES),
        }

    @staticmethod
    def _booking_summary(booking: dict) -> dict:
        keys = ["booking_id", "booking_type", "status", "total_price"]
        if booking["booking_type"] == "hotel":
            keys += ["hotel_id", "hotel_name", "city", "check_in", "check_out"]
        else:
            keys += ["flight_id", "flight_number", "origin_location_id", "destination_location_id", "date",
                     "seat_class"]
        return {key: booking[key] for key in keys}

    # ----- traveler, locations and information ----------------------------------

    @tool_method
    def get_traveler_profile(self) -> dict:
        """Get the traveler's profile: name, home location, names for bookings, wallet balance and today's date."""
        traveler = self._traveler
        active = [b for b in self._bookings.values() if b["status"] == "confirmed"]
        return {
            **copy.deepcopy(traveler),
            "home_city": self._locations.get(traveler.get("home_location_id"), {}).get("city"),
            "today": self._today,
            "last_day": self._last_day,
            "active_bookings": len(active),
        }

    @tool_method
    def search_locations(self, query: str) -> dict:
        """Search the destinations served by the agency by city, country or airport code.

        Args:
            query: Words to look for, e.g. "Lisbon", "japan" or "CDG"; an empty string lists all locations.
        """
        if not isinstance(query, str):
            raise ToolError(f"query must be a string, got {query!r}")
        words = query.lower().split()
        matches = [loc for loc in self._locations.values()
                   if all(w in f"{loc['city']} {loc['country']} {loc['airport_code']}".lower() for w in words)]
        return {
            "query": query,
            "locations": [
                {key: loc[key] for key in ("location_id", "city", "country", "airport_code", "currency")}
                for loc in matches[:MAX_LISTED]
            ],
            "count": len(matches),
        }

    @tool_method
    def get_weather(self, location_id: str, date: str) -> dict:
        """Get the weather forecast for a location on a date within the bookable calendar.

        Args:
            location_id: The location id, from search_locations.
            date: The day of the forecast, in YYYY-MM-DD format.
        """
        location = self._location(location_id)
        self._calendar_date(date, "date")
        climate = location["climate"]
        digest = zlib.crc32(f"{location_id}|{date}".encode())
        wet = digest % 100 < climate["rain_chance"]
        conditions = ("rain", "showers", "thunderstorms") if wet else ("sunny", "partly cloudy", "cloudy")
        high = climate["avg_high_c"] + (digest >> 8) % 7 - 3
        return {
            "location_id": location_id,
            "city": location["city"],
            "date": date,
            "condition": conditions[(digest >> 16) % 3],
            "high_c": high,
            "low_c": high - 5 - (digest >> 20) % 5,
            "precipitation_chance": min(95, climate["rain_chance"] + 40) if wet else climate["rain_chance"] // 2,
        }

    @tool_method
    def convert_currency(self, amount: float, from_currency: str, to_currency: str) -> dict:
        """Convert an amount of money between currencies at today's exchange rates.

        Args:
            amount: The amount to convert, zero or more.
            from_currency: The ISO code of the amount's currency, e.g. "USD".
            to_currency: The ISO code of the currency to convert to, e.g. "EUR".
        """
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
            raise ToolError(f"amount must be a number of at least 0, got {amount!r}")
        rate = self._rate(to_currency, "to_currency") / self._rate(from_currency, "from_currency")
        return {
            "amount": amount,
            "from_currency": from_currency.upper(),
            "to_currency": to_currency.upper(),
            "rate": round(rate, 6),
            "converted_amount": money(amount * rate),
        }

    # ----- hotels -------------------------------------------------------------

    @tool_method
    def search_hotels(self, location_id: str, check_in: str, check_out: str, guests: int) -> dict:
        """Find hotels in a location with a free room for the guests, cheapest first; prices are in USD per night.

        Args:
            location_id: The location id, from search_locations.
            check_in: The arrival date, in YYYY-MM-DD format.
            check_out: The departure date, in YYYY-MM-DD format, after check_in.
            guests: The number of guests sharing one room, at least 1.
        """
        location = self._location(location_id)
        nights = self._stay(check_in, check_out)
        guests = _positive_int(guests, "guests")
        found = []
        for hotel in self._hotels.values():
            prices = [r["price"] for r in hotel["rooms"] if r["rooms_left"] > 0 and r["max_guests"] >= guests]
            if hotel["location_id"] == location_id and prices:
                found.append({"hotel_id": hotel["hotel_id"], "name": hotel["name"], "rating": hotel["rating"],
                              "price_per_night": min(prices), "location_id": location_id})
        found.sort(key=lambda h: (h["price_per_night"], h["hotel_id"]))
        return {
            "location_id": location_id,
            "city": location["city"],
            "check_in": check_in,
            "check_out": check_out,
            "nights": nights,
            "guests": guests,
            "hotels": found[:MAX_LISTED],
            "count": len(found),
        }

    @tool_method
    def get_hotel_details(self, hotel_id: str) -> dict:
        """Get a hotel with its room types: price per night in USD, capacity and availability.

        Args:
            hotel_id: The hotel id, from search_hotels.
        """
        hotel = self._hotel(hotel_id)
        return {
            "hotel_id": hotel_id,
            "name": hotel["name"],
            "location_id": hotel["location_id"],
            "city": self._locations[hotel["location_id"]]["city"],
            "rating": hotel["rating"],
            "amenities": list(hotel["amenities"]),
            "rooms": [{**room, "available": room["rooms_left"] > 0} for room in copy.deepcopy(hotel["rooms"])],
        }

    @tool_method
    def book_hotel(
        self, hotel_id: str, room_id: str, check_in: str, check_out: str, guest_name: str, guests: int = 1
    ) -> dict:
        """Book a room type of a hotel for a stay, paying the full price from the traveler's wallet.

        Args:
            hotel_id: The hotel id, from search_hotels.
            room_id: The room type id within that hotel, from get_hotel_details.
            check_in: The arrival date, in YYYY-MM-DD format.
            check_out: The departure date, in YYYY-MM-DD format, after check_in.
            guest_name: The full name the room is booked under.
            guests: The number of guests in the room, at least 1 and at most the room's max_guests.
        """
        hotel = self._hotel(hotel_id)
        room = self._room(hotel, room_id)
        nights = self._stay(check_in, check_out)
        guest_name = _name(guest_name, "guest_name")
        guests = _positive_int(guests, "guests")
        if guests > room["max_guests"]:
            raise ToolError(f"room {room_id!r} holds at most {room['max_guests']} guest(s), not {guests}")
        if room["rooms_left"] < 1:
            raise ToolError(f"room {room_id!r} ({room['type']}) at {hotel['name']} is fully booked")
        total = money(room["price"] * nights)
        self._charge(total)
        room["rooms_left"] -= 1
        booking = {
            "booking_id": self._new_booking_id(), "booking_type": "hotel", "status": "confirmed",
            "hotel_id": hotel_id, "hotel_name": hotel["name"], "room_id": room_id, "room_type": room["type"],
            "location_id": hotel["location_id"], "city": self._locations[hotel["location_id"]]["city"],
            "check_in": check_in, "check_out": check_out, "nights": nights, "guests": guests,
            "guest_name": guest_name, "price_per_night": room["price"], "total_price": total,
        }
        self._bookings[booking["booking_id"]] = booking
        return {**copy.deepcopy(booking), "wallet_balance": self._traveler["wallet_balance"]}

    # ----- flights ------------------------------------------------------------

    @tool_method
    def get_flight_routes(self, origin_location_id: str) -> dict:
        """List the destinations with direct flights from a location and the dates they fly.

        Args:
            origin_location_id: The departure location id, from search_locations or the traveler's profile.
        """
        origin = self._location(origin_location_id, "origin_location_id")
        dates: dict[str, dict[str, int]] = {}
        for flight in self._flights.values():
            if flight["origin_location_id"] == origin_location_id:
                per_day = dates.setdefault(flight["destination_location_id"], {})
                per_day[flight["date"]] = per_day.get(flight["date"], 0) + 1
        routes = [
            {"destination_location_id": dest, "city": self._locations[dest]["city"],
             "country": self._locations[dest]["country"],
             "dates": [{"date": day, "flight_count": n} for day, n in sorted(per_day.items())][:MAX_LISTED]}
            for dest, per_day in sorted(dates.items(), key=lambda item: self._locations[item[0]]["city"])
        ]
        return {"origin_location_id": origin_location_id, "city": origin["city"], "routes": routes[:MAX_LISTED]}

    @tool_method
    def search_flights(self, origin_location_id: str, destination_location_id: str, date: str) -> dict:
        """Find direct flights between two locations on a date, earliest first; times are UTC, prices USD.

        Args:
            origin_location_id: The departure location id, from search_locations.
            destination_location_id: The arrival location id, from search_locations.
            date: The departure date, in YYYY-MM-DD format.
        """
        self._location(origin_location_id, "origin_location_id")
        self._location(destination_location_id, "destination_location_id")
        if origin_location_id == destination_location_id:
            raise ToolError(f"origin and destination are both {origin_location_id!r}")
        self._calendar_date(date, "date")
        flights = sorted(
            (f for f in self._flights.values() if f["date"] == date and f["origin_location_id"] == origin_location_id
             and f["destination_location_id"] == destination_location_id),
            key=lambda f: f["departure_time"],
        )
        return {
            "origin_location_id": origin_location_id,
            "destination_location_id": destination_location_id,
            "date": date,
            "flights": [self._flight_summary(f) for f in flights[:MAX_LISTED]],
            "count": len(flights),
        }

    @tool_method
    def get_flight_details(self, flight_id: str) -> dict:
        """Get a flight with its origin, destination, times and the price and free seats of each seat class.

        Args:
            flight_id: The flight id, from search_flights.
        """
        flight = self._flight(flight_id)
        return {
            **self._flight_summary(flight),
            "duration_minutes": flight["duration_minutes"],
            "origin": self._place(flight["origin_location_id"]),
            "destination": self._place(flight["destination_location_id"]),
            "cabins": [{"seat_class": c, **flight["cabins"][c]} for c in SEAT_CLASSES],
        }

    @tool_method
    def book_flight(self, flight_id: str, passenger_name: str, seat_class: SeatClass) -> dict:
        """Book one seat on a flight in a seat class, paying the fare from the traveler's wallet.

        Args:
            flight_id: The flight id, from search_flights.
            passenger_name: The passenger's full name as on their passport.
            seat_class: The cabin to fly in.
        """
        flight = self._flight(flight_id)
        passenger_name = _name(passenger_name, "passenger_name")
        if seat_class not in SEAT_CLASSES:
            raise ToolError(f"seat_class must be one of {list(SEAT_CLASSES)}, got {seat_class!r}")
        cabin = flight["cabins"][seat_class]
        if cabin["seats_left"] < 1:
            raise ToolError(f"flight {flight_id!r} has no {seat_class} seats left")
        self._charge(cabin["price"])
        cabin["seats_left"] -= 1
        booking = {
            "booking_id": self._new_booking_id(), "booking_type": "flight", "status": "confirmed",
            **{key: flight[key] for key in ("flight_id", "flight_number", "airline", "origin_location_id",
                                            "destination_location_id", "date", "departure_time", "arrival_time")},
            "passenger_name": passenger_name, "seat_class": seat_class, "total_price": cabin["price"],
        }
        self._bookings[booking["booking_id"]] = booking
        return {**copy.deepcopy(booking), "wallet_balance": self._traveler["wallet_balance"]}

    # ----- bookings -----------------------------------------------------------

    @tool_method
    def list_bookings(self, status: Optional[BookingStatus] = None, booking_type: Optional[BookingType] = None) -> dict:
        """List the traveler's hotel and flight bookings, optionally filtered by status and type.

        Args:
            status: Only list bookings with this status; omit to list all.
            booking_type: Only list hotel or only flight bookings; omit to list both.
        """
        matches = [b for b in self._bookings.values()
                   if status in (None, b["status"]) and booking_type in (None, b["booking_type"])]
        return {"bookings": [self._booking_summary(b) for b in matches[:MAX_LISTED]], "count": len(matches)}

    @tool_method
    def get_booking(self, booking_id: str) -> dict:
        """Get every detail of one hotel or flight booking.

        Args:
            booking_id: The booking id, e.g. "BK100234".
        """
        return copy.deepcopy(self._booking(booking_id))

    @tool_method
    def cancel_booking(self, booking_id: str) -> dict:
        """Cancel a confirmed hotel or flight booking, release the room or seat and refund the wallet in full.

        Args:
            booking_id: The id of the confirmed booking to cancel.
        """
        booking = self._booking(booking_id, confirmed=True)
        if booking["booking_type"] == "hotel":
            self._room(self._hotel(booking["hotel_id"]), booking["room_id"])["rooms_left"] += 1
        else:
            self._flight(booking["flight_id"])["cabins"][booking["seat_class"]]["seats_left"] += 1
        self._refund(booking["total_price"])
        booking["status"] = "cancelled"
        booking["refund_amount"] = booking["total_price"]
        return {"booking_id": booking_id, "booking_type": booking["booking_type"], "status": "cancelled",
                "refund_amount": booking["total_price"], "wallet_balance": self._traveler["wallet_balance"]}

    @tool_method
    def modify_booking_dates(self, booking_id: str, check_in: str, check_out: str) -> dict:
        """Move a confirmed hotel booking to new dates, charging or refunding the price difference.

        Args:
            booking_id: The id of the confirmed hotel booking.
            check_in: The new arrival date, in YYYY-MM-DD format.
            check_out: The new departure date, in YYYY-MM-DD format, after check_in.
        """
        booking = self._booking(booking_id, confirmed=True)
        if booking["booking_type"] != "hotel":
            raise ToolError(f"booking {booking_id!r} is a flight booking; only hotel bookings have stay dates")
        nights = self._stay(check_in, check_out)
        if (check_in, check_out) == (booking["check_in"], booking["check_out"]):
            raise ToolError(f"booking {booking_id!r} is already from {check_in} to {check_out}")
        total = money(booking["price_per_night"] * nights)
        difference = money(total - booking["total_price"])
        if difference > 0:
            self._charge(difference)
        else:
            self._refund(-difference)
        booking.update(check_in=check_in, check_out=check_out, nights=nights, total_price=total)
        return {**copy.deepcopy(booking), "price_difference": difference,
                "wallet_balance": self._traveler["wallet_balance"]}


TOOL_CLASS = TravelBooking
# Error results leave the state untouched (checked in tests/test_domains_contract.py).
ERROR_RESULTS_CHANGE_NOTHING = True


def _place_query(rng: random.Random, config: dict) -> str:
    """A place as a traveler types it into a destination search: a city the agency serves, now and then its
    airport code (never a word no place has: a search for "kim" found nothing and fed nothing)."""
    place = rng.choice(config["locations"])
    return place["airport_code"] if rng.random() < 0.2 else place["city"]


SAMPLERS = {"search_locations.query": _place_query}

# ----- sample configurations ------------------------------------------------------

# city, country, airport code, currency, latitude, longitude, hotel cost index, average high in C, rain chance in %
_CITIES: list[tuple[str, str, str, str, float, float, float, int, int]] = [
    ("New York", "United States", "JFK", "USD", 40.64, -73.78, 1.5, 17, 30),
    ("San Francisco", "United States", "SFO", "USD", 37.62, -122.38, 1.4, 18, 20),
    ("Chicago", "United States", "ORD", "USD", 41.98, -87.90, 1.1, 14, 30),
    ("Toronto", "Canada", "YYZ", "CAD", 43.68, -79.63, 1.1, 13, 30),
    ("Mexico City", "Mexico", "MEX", "MXN", 19.44, -99.07, 0.7, 24, 35),
    ("London", "United Kingdom", "LHR", "GBP", 51.47, -0.45, 1.5, 15, 40),
    ("Paris", "France", "CDG", "EUR", 49.01, 2.55, 1.4, 16, 35),
    ("Barcelona", "Spain", "BCN", "EUR", 41.30, 2.08, 1.1, 21, 20),
    ("Rome", "Italy", "FCO", "EUR", 41.80, 12.25, 1.1, 21, 20),
    ("Berlin", "Germany", "BER", "EUR", 52.37, 13.50, 1.0, 14, 35),
    ("Amsterdam", "Netherlands", "AMS", "EUR", 52.31, 4.76, 1.3, 14, 45),
    ("Lisbon", "Portugal", "LIS", "EUR", 38.77, -9.13, 0.9, 22, 20),
    ("Zurich", "Switzerland", "ZRH", "CHF", 47.46, 8.55, 1.6, 14, 40),
    ("Istanbul", "Turkey", "IST", "TRY", 41.26, 28.74, 0.8, 19, 25),
    ("Dubai", "United Arab Emirates", "DXB", "AED", 25.25, 55.36, 1.3, 33, 5),
    ("Singapore", "Singapore", "SIN", "SGD", 1.36, 103.99, 1.3, 31, 55),
    ("Bangkok", "Thailand", "BKK", "THB", 13.69, 100.75, 0.6, 33, 45),
    ("Tokyo", "Japan", "HND", "JPY", 35.55, 139.78, 1.3, 19, 35),
    ("Seoul", "South Korea", "ICN", "KRW", 37.46, 126.44, 1.0, 17, 35),
    ("Sydney", "Australia", "SYD", "AUD", -33.95, 151.18, 1.2, 22, 30),
    ("Cape Town", "South Africa", "CPT", "ZAR", -33.97, 18.60, 0.7, 21, 25),
]
_RATES_PER_USD = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "CAD": 1.36, "MXN": 17.1, "CHF": 0.88, "TRY": 32.5,
                  "AED": 3.67, "SGD": 1.34, "THB": 35.6, "JPY": 151.0, "KRW": 1340.0, "AUD": 1.52, "ZAR": 18.6}
# room type, id code, max guests, price factor
_ROOM_TYPES = [("Standard Single", "SGL", 1, 0.75), ("Standard Double", "DBL", 2, 1.0), ("Twin Room", "TWN", 2, 1.0),
               ("Deluxe King", "DLX", 2, 1.35), ("Junior Suite", "JST", 3, 1.8), ("Family Suite", "FAM", 4, 2.1)]
_HOTEL_WORDS = ["Grand", "Royal", "Riverside", "Central", "Harbor", "Park", "Garden", "Skyline", "Old Town", "Plaza",
                "Boulevard", "Lighthouse"]
_HOTEL_KINDS = ["Hotel", "Inn", "Suites", "Residences", "Palace", "Boutique Hotel"]
_AMENITIES = ["free wifi", "breakfast included", "pool", "gym", "spa", "airport shuttle", "parking", "restaurant",
              "rooftop bar", "pet friendly"]
_AIRLINES = [("Delta Air Lines", "DL"), ("United Airlines", "UA"), ("British Airways", "BA"), ("Air France", "AF"),
             ("Lufthansa", "LH"), ("KLM", "KL"), ("Emirates", "EK"), ("Singapore Airlines", "SQ"),
             ("Japan Airlines", "JL"), ("Qantas", "QF"), ("Air Canada", "AC"), ("Iberia", "IB"),
             ("TAP Air Portugal", "TP"), ("Turkish Airlines", "TK"), ("Korean Air", "KE")]
_FIRST_NAMES = ["Mia", "Liam", "Olivia", "Noah", "Emma", "Ethan", "Ava", "Lucas", "Sofia", "Yusuf", "Aarav", "Chen",
                "Fatima", "Mei", "Omar", "Isabella", "Daiki", "Amelia", "Raj", "Harper", "Mateo", "Zoe", "Ivan", "Lena"]
_LAST_NAMES = ["Garcia", "Smith", "Nguyen", "Patel", "Kim", "Johnson", "Silva", "Rossi", "Khan", "Muller", "Lopez",
               "Brown", "Ito", "Hernandez", "Wilson", "Ahmed", "Kowalski", "Davis", "Moreau", "Lee", "Santos", "Novak"]


def _unique(rng: random.Random, taken: set[str], make: Callable[[random.Random], str]) -> str:
    value = make(rng)
    while value in taken:
        value = make(rng)
    taken.add(value)
    return value


def _distance_km(a: tuple, b: tuple) -> float:
    """Great-circle distance between two _CITIES rows."""
    lat1, lon1, lat2, lon2 = map(math.radians, (a[4], a[5], b[4], b[5]))
    h = math.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    return 2 * 6371 * math.asin(math.sqrt(h))


def _sample_location(rng: random.Random, city: tuple) -> dict:
    name, country, code, currency, *_, high, rain = city
    return {
        "location_id": code,  # a place's id is its airport code, as travelers name it ("LHR"), never "LOC1766"
        "city": name, "country": country, "airport_code": code, "currency": currency,
        "climate": {"avg_high_c": high + rng.randint(-4, 4), "rain_chance": max(0, rain + rng.randint(-10, 10))},
    }


def _sample_hotel(rng: random.Random, taken: set[str], location: dict, cost: float, title: str) -> dict:
    hotel_id = _unique(rng, taken, lambda r: f"HTL{r.randint(10000, 99999)}")
    rating = round(rng.uniform(3.0, 5.0), 1)
    base = 95 * cost * (0.6 + 0.2 * rating) * rng.uniform(0.85, 1.15)
    rooms = [
        {"room_id": f"{hotel_id}-{code}", "type": kind, "max_guests": guests, "price": money(round(base * factor)),
         "rooms_left": 0 if rng.random() < 0.25 else rng.randint(1, 6)}
        for kind, code, guests, factor in sorted(rng.sample(_ROOM_TYPES, rng.randint(2, 4)), key=lambda t: t[3])
    ]
    if all(room["rooms_left"] == 0 for room in rooms):
        rng.choice(rooms)["rooms_left"] = rng.randint(1, 3)
    return {"hotel_id": hotel_id, "name": f"{title} {location['city']}", "location_id": location["location_id"],
            "rating": rating, "amenities": sorted(rng.sample(_AMENITIES, rng.randint(2, 5))), "rooms": rooms}


def _sample_flight(rng: random.Random, taken: set[str], origin: tuple, destination: tuple, day: date) -> dict:
    km = _distance_km(origin[1], destination[1])
    airline, code = rng.choice(_AIRLINES)
    departure = datetime.combine(day, datetime.min.time()) + timedelta(minutes=5 * rng.randint(72, 270))
    minutes = 5 * round((40 + km / 820 * 60) / 5)
    fare = (70 + 0.085 * km) * rng.uniform(0.8, 1.3)
    seats = {"economy": rng.choice([0, 2, 5, 9, 14, 23, 40]), "business": rng.choice([0, 1, 3, 6, 8]),
             "first": rng.choice([0, 0, 1, 2, 4])}
    number = _unique(rng, taken, lambda r: f"{code}{r.randint(10, 2999)}")
    return {  # a flight's id is its flight number ("BA2877"), as it stands on a traveler's ticket
        "flight_id": number, "flight_number": number, "airline": airline,
        "origin_location_id": origin[0]["location_id"], "destination_location_id": destination[0]["location_id"],
        "date": day.isoformat(), "departure_time": departure.isoformat(timespec="minutes"),
        "arrival_time": (departure + timedelta(minutes=minutes)).isoformat(timespec="minutes"),
        "duration_minutes": minutes,
        "cabins": {c: {"price": money(round(fare * factor)), "seats_left": seats[c]}
                   for c, factor in (("economy", 1.0), ("business", 3.2), ("first", 5.5))},
    }


def _sample_routes(rng: random.Random, count: int) -> list[tuple[int, int]]:
    """Both legs of round trips between place indices: home (index 0) to several places, a few other pairs, and every
    place on at least one route (the agency lists the places it flies to: a place without flights made every search
    from or to it come back empty, and the calls after such a search fall back to values the dialogue never showed)."""
    pairs = {(0, dest) for dest in rng.sample(range(1, count), rng.randint(3, min(5, count - 1)))}
    while len(pairs) < count // 2 + 2:
        a, b = sorted(rng.sample(range(1, count), 2))
        pairs.add((a, b))
    for place in range(1, count):
        if not any(place in pair for pair in pairs):
            a, b = sorted((place, rng.choice([other for other in range(count) if other != place])))
            pairs.add((a, b))
    return [leg for a, b in sorted(pairs) for leg in ((a, b), (b, a))]


def _add_bookings(rng: random.Random, config: dict) -> dict:
    """Place 0-2 bookings through the tools (one maybe cancelled) and return the resulting configuration."""
    system = TravelBooking()
    system._load_scenario(config)
    traveler = config["traveler"]
    for _ in range(rng.randint(0, 2)):
        if rng.random() < 0.5:
            hotel = rng.choice(config["hotels"])
            room = rng.choice([r for r in hotel["rooms"] if r["rooms_left"] > 0])
            start = date.fromisoformat(config["today"]) + timedelta(days=rng.randint(1, 20))
            result = system.book_hotel(hotel["hotel_id"], room["room_id"], start.isoformat(),
                                       (start + timedelta(days=rng.randint(1, 6))).isoformat(),
                                       traveler["guest_name"], rng.randint(1, room["max_guests"]))
        else:
            flight = rng.choice([f for f in config["flights"] if f["cabins"]["economy"]["seats_left"] > 0])
            result = system.book_flight(flight["flight_id"], traveler["passenger_name"], "economy")
        if "error" not in result and rng.random() < 0.3:
            system.cancel_booking(result["booking_id"])
    state = system._state()
    for key in ("locations", "hotels", "flights", "bookings"):
        state[key] = list(state[key].values())
    return state


def sample_config(seed: int) -> dict:
    """A random but deterministic travel world: locations, hotels, flights, a traveler and maybe a few bookings."""
    rng = random.Random(seed)
    taken: set[str] = set()
    today = date(2025, 1, 1) + timedelta(days=rng.randint(0, 700))
    cities = rng.sample(_CITIES, rng.randint(6, 12))
    places = [(_sample_location(rng, city), city) for city in cities]
    hotels = []
    for location, city in places:
        titles = rng.sample([f"{w} {k}" for w in _HOTEL_WORDS for k in _HOTEL_KINDS], rng.randint(2, 4))
        hotels += [_sample_hotel(rng, taken, location, city[6], title) for title in titles]
    flights = []
    for origin, destination in _sample_routes(rng, len(places)):
        for offset in sorted(rng.sample(range(CALENDAR_DAYS), rng.randint(3, 4))):
            day = today + timedelta(days=offset)
            flights += [_sample_flight(rng, taken, places[origin], places[destination], day)
                        for _ in range(rng.choice([1, 1, 2]))]
    first, last = rng.choice(_FIRST_NAMES), rng.choice(_LAST_NAMES)
    home = places[0][0]
    currencies = {"USD", "EUR", "GBP"} | {location["currency"] for location, _ in places}
    config = {
        "today": today.isoformat(),
        "last_day": (today + timedelta(days=CALENDAR_DAYS - 1)).isoformat(),
        "traveler": {
            "name": f"{first} {last}", "home_location_id": home["location_id"],
            "origin_location_id": home["location_id"], "guest_name": f"{first} {last}",
            "passenger_name": f"{first} {last}", "wallet_balance": float(rng.randrange(1500, 9000, 50)),
            "currency": "USD",
        },
        "locations": [location for location, _ in places],
        "hotels": hotels,
        "flights": flights,
        "bookings": [],
        "exchange_rates": {c: round(_RATES_PER_USD[c] * (1 if c == "USD" else rng.uniform(0.97, 1.03)), 4)
                           for c in sorted(currencies)},
        "next_booking_number": rng.randint(100000, 899999),
    }
    return _add_bookings(rng, config)
