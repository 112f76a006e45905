"""Coherent US postal addresses: real cities with their state and ZIP-code prefix, so a generated address's
street, city, state and ZIP belong together (never Columbus, OH with a Pennsylvania ZIP)."""
from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

# (city, state, three-digit ZIP prefix of the city's main post office area)
US_PLACES: list[tuple[str, str, str]] = [
    ("Austin", "TX", "787"), ("Dallas", "TX", "752"), ("Houston", "TX", "770"), ("San Antonio", "TX", "782"),
    ("Denver", "CO", "802"), ("Seattle", "WA", "981"), ("Boston", "MA", "021"), ("Chicago", "IL", "606"),
    ("Phoenix", "AZ", "850"), ("Tucson", "AZ", "857"), ("Portland", "OR", "972"), ("Atlanta", "GA", "303"),
    ("San Diego", "CA", "921"), ("Sacramento", "CA", "958"), ("San Jose", "CA", "951"), ("Oakland", "CA", "946"),
    ("Columbus", "OH", "432"), ("Cleveland", "OH", "441"), ("Nashville", "TN", "372"), ("Minneapolis", "MN", "554"),
    ("Jacksonville", "FL", "322"), ("Miami", "FL", "331"), ("Philadelphia", "PA", "191"),
    ("Pittsburgh", "PA", "152"), ("Charlotte", "NC", "282"), ("Raleigh", "NC", "276"),
    ("Salt Lake City", "UT", "841"), ("Las Vegas", "NV", "891"), ("Kansas City", "MO", "641"),
    ("St. Louis", "MO", "631"), ("Detroit", "MI", "482"), ("Milwaukee", "WI", "532"), ("Madison", "WI", "537"),
    ("Indianapolis", "IN", "462"), ("Louisville", "KY", "402"), ("Baltimore", "MD", "212"),
    ("Richmond", "VA", "232"), ("Albuquerque", "NM", "871"), ("Omaha", "NE", "681"), ("Boise", "ID", "837"),
]
STREETS = ["Maple Drive", "Oak Street", "Cedar Avenue", "Pine Lane", "Elm Court", "Lakeview Road", "Hillcrest Way",
           "River Road", "Sunset Boulevard", "Park Avenue", "Willow Street", "Highland Drive", "Main Street",
           "Washington Avenue", "Chestnut Street", "Spring Street", "Meadow Lane", "Broadway"]
# parameter names that are one part of a postal address, and which part
_PARTS = [(re.compile(r"address_?2|address_?line_?2|secondary|apartment|suite", re.I), "address2"),
          (re.compile(r"address_?1|address_?line_?1|^address$|street", re.I), "address1"),
          (re.compile(r"city|town", re.I), "city"), (re.compile(r"^state$|province|region", re.I), "state"),
          (re.compile(r"zip|postal|postcode", re.I), "zip"), (re.compile(r"country", re.I), "country")]


ADDRESS_FIELDS = ("address1", "address2", "city", "state", "zip", "country")  # a flat postal address, in writing order


def address_line(parts: Mapping[str, Any]) -> str:
    """A flat postal address on one line, its empty parts left out: street lines, city, "state zip", country
    ("2733 Hillcrest Way, Phoenix, AZ 85008, USA")."""
    street = [str(parts[k]) for k in ("address1", "address2") if parts.get(k)]
    region = " ".join(str(parts[k]) for k in ("state", "zip") if parts.get(k))
    return ", ".join(street + [str(v) for v in (parts.get("city"), region, parts.get("country")) if v])


def address_part(param: str) -> str | None:
    """Which part of a postal address a parameter is (address1, address2, city, state, zip, country), if any."""
    return next((part for pattern, part in _PARTS if pattern.search(param)), None)


def us_address(rng: random.Random, country: str = "USA", city: str | None = None, state: str | None = None,
               zip_code: str | None = None) -> dict[str, str]:
    """One address whose parts belong together: a street line, an optional unit, a real city, its state and a
    ZIP code under the city's prefix; in the given city, state or ZIP area when the table knows one that fits."""
    rows = [r for r in US_PLACES if city in (None, r[0]) and state in (None, r[1])
            and (zip_code is None or zip_code.startswith(r[2]))] or US_PLACES
    city_name, state_code, prefix = rng.choice(rows)
    unit = rng.choice(["", f"Apt {rng.randint(1, 40)}", f"Suite {rng.randint(100, 999)}"])
    return {"address1": f"{rng.randint(10, 9999)} {rng.choice(STREETS)}", "address2": unit, "city": city_name,
            "state": state_code, "zip": f"{prefix}{rng.randint(0, 99):02d}", "country": country}
