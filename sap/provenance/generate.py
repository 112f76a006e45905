"""Values a user introduces (self_create), from the domain first: the schema's enum and closed choices in the
description, values of the same field in c0 (for reads), airport codes c0 holds; then format-aware generators
(a date format the description declares, Luhn-valid card numbers, credentials, addresses; Faker, seeded from the
caller's RNG, so the same seed gives the same value), documented examples; word pairs only where nothing else fits
(`is_word_pair` counts them)."""
from __future__ import annotations

import datetime as dt
import math
import random
import re
import string
import threading
from collections.abc import Collection
from typing import Any

from faker import Faker

from sap.provenance.places import US_PLACES, address_part, us_address

_FIRST = ["Mia", "Noah", "Ava", "Liam", "Sofia", "Ethan", "Yara", "Omar", "Lena", "Kenji", "Priya", "Mateo"]
_LAST = ["Garcia", "Chen", "Okafor", "Novak", "Silva", "Kim", "Haddad", "Larsen", "Rossi", "Patel"]
_CITIES = ["Lisbon", "Denver", "Osaka", "Nairobi", "Toronto", "Krakow", "Austin", "Seville"]
_WORDS = ["budget", "draft", "summary", "invoice", "travel", "notes", "archive", "roadmap", "meeting", "backup",
          "report", "photos", "ideas", "plan", "review", "metrics"]
_SENTENCES = ["Remember to confirm the schedule", "Quarterly numbers look stable", "Call the supplier on Monday",
              "Ship the revised draft", "Collect feedback from the team", "Renew the subscription",
              "Running ten minutes late, start without me", "The draft is in the shared folder",
              "Can we move the sync to Thursday?", "Great thread, thanks for sharing", "Loved the new release",
              "Happy Friday, everyone!", "Lunch is on me today", "Please review the budget before noon",
              "Back from leave, catching up on email", "Meeting notes are attached", "Low tire pressure warning",
              "Service due in 500 miles", "Pick up the dry cleaning", "Book the venue for the offsite",
              "Server restart scheduled for tonight", "New blog post is live", "Thanks for the quick fix",
              "Deadline moved to next Wednesday", "Check the figures in section two", "Welcome aboard, glad to have you"]
_TITLES = ["Login page times out", "Refund not received", "Printer on floor 3 offline", "Broken link in footer",
           "Order arrived damaged", "Cannot reset password", "App crashes on startup", "Invoice shows wrong amount",
           "Wi-Fi drops every hour", "Missing item in delivery", "Slow dashboard loading", "Duplicate charge on card"]
# what a customer would hand a human agent, by what c0 holds: an airline's reservations, a shop's orders
_ISSUES = [("reservations", ["Flight cancelled, need a refund", "Seat charged twice on my booking",
                             "Name misspelled on my ticket", "Need to travel with a service animal",
                             "Missed my connection after a delay", "Bag lost on my last flight",
                             "Want compensation for an overnight delay", "Need a wheelchair at the gate"]),
           ("orders", ["Order arrived damaged", "Refund not received", "Missing item in delivery",
                       "Duplicate charge on card", "Wrong size delivered", "Package marked delivered but not here",
                       "Gift card balance is wrong", "Want to return an item past the window"])]


def _titles_for(c0: Any) -> list[str]:
    """Issue titles fitting the world c0 describes (an airline's, a shop's), else the general ones."""
    keys = set(c0) | {k for v in c0.values() if isinstance(v, dict) for k in v} if isinstance(c0, dict) else set()
    return next((titles for key, titles in _ISSUES if key in keys), _TITLES)


_FILE_TOPICS = ["report", "meeting-notes", "budget", "invoice", "roadmap", "summary", "todo", "changelog", "results",
                "survey", "expenses", "schedule", "proposal", "inventory", "minutes", "contacts", "draft", "timeline"]
_FILE_TAGS = ["q1", "q2", "q3", "q4", "2023", "2024", "final", "v2", "v3", "jan", "march", "old", "team", "client",
              "weekly", "annual"]
_EXTS = [".txt", ".md", ".csv", ".log"]
_CLOSED_CHOICE = re.compile(r"\b(?:either|one of)\s+('[^']+'(?:\s*,\s*'[^']+')*,?\s+or\s+'[^']+')")
_SLASHED_CHOICE = re.compile(r"\(([A-Za-z]{2,}(?:/[A-Za-z]{2,}){1,5})\)")  # "Type of the order (Buy/Sell)."
_EXAMPLES = re.compile(r"\b(?:e\.g\.|for example|such as|like)\s*[:,]?\s*((?:['\"][^'\"]+['\"](?:\s*(?:,|or|and)\s*)?)+)",
                       re.I)
_WORD_PAIR = re.compile("(?:" + "|".join(_WORDS) + ")_(?:" + "|".join(_WORDS) + ")")
_TICKERS = ["AAPL", "MSFT", "GOOG", "AMZN", "NVDA", "TSLA", "META", "NFLX", "AMD", "INTC", "ORCL", "IBM"]
_SECRET = re.compile(r"password|passcode|token|secret|pin\b|cvv|ssn", re.I)
_SEARCH = re.compile(r"query|keyword|search|term", re.I)  # a search's words: found in c0's names first
_NEW_NAMES = re.compile(r"name|file|dir|folder|path|source|destination|password|title|content|text|message|id$",
                        re.I)
REFERENCE_DATE = dt.date(2025, 1, 15)  # "today" for generated dates when c0 holds none
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}")
_FAKER = threading.local()
_FORMAT = re.compile(r"format(?: of)?\s*['\"]?((?:YYYY|YY|MM|DD|HH|SS|[-/:T. ])*(?:YYYY|YY|MM|DD|SS))")
_FORMAT_TOKENS = re.compile(r"YYYY|YY|MM|DD|HH|SS")
_AIRPORT_CODE = re.compile(r"[A-Z]{3}")
_TRIP_END = re.compile(r"^(?:travel|flight|trip)_(?:from|to)$|^(?:origin|departure|arrival)(?:_airport)?$", re.I)
_AIRPORTS = ["JFK", "LAX", "SFO", "ORD", "BOS", "SEA", "ATL", "DFW", "MIA", "DEN", "LHR", "CDG", "HND", "PEK"]
_FOLDERS = ["invoices", "photos", "drafts", "reports", "archive", "backups", "receipts", "projects", "music",
            "research", "slides", "contracts", "notes", "exports"]
_CARD_TYPES = ["visa16", "mastercard", "amex", "discover"]  # the common networks (Faker's own mix has 12-digit Maestro)
_INSURANCE = ["comprehensive", "basic", "premium", "trip cancellation", "medical"]
_CARD_CODE = re.compile(r"cvv|cvc|verification|security_code", re.I)


def faker_for(rng: random.Random) -> Faker:
    """This thread's Faker (en_US), seeded from `rng` so the next values follow from the caller's seed."""
    fake = getattr(_FAKER, "instance", None)
    if fake is None:
        fake = _FAKER.instance = Faker("en_US")
    fake.seed_instance(rng.getrandbits(64))
    return fake


def is_word_pair(value: Any) -> bool:
    """Whether a value is a generator word pair ("archive_report"), the placeholder of last resort."""
    return isinstance(value, str) and _WORD_PAIR.fullmatch(value.split(".")[0]) is not None


def described_examples(schema: dict[str, Any]) -> list[str]:
    """Documented example values of a string parameter: JSON-schema `examples`, or quoted values after "e.g.",
    "for example", "such as" in its description."""
    if schema.get("examples"):
        return [e for e in schema["examples"] if isinstance(e, str)]
    m = _EXAMPLES.search(schema.get("description", ""))
    return re.findall(r"['\"]([^'\"]+)['\"]", m.group(1)) if m else []


def is_secret_param(name: str) -> bool:
    """Whether a parameter or field holds a secret (a password, token, PIN): never repeated in a reply, never
    announced turns ahead."""
    return bool(_SECRET.search(name))


def is_search_param(name: str) -> bool:
    """Whether a parameter takes a search's words (query, keyword, search term)."""
    return bool(_SEARCH.search(name))


def search_terms(c0: Any) -> list[str]:
    """Words a search over c0 finds something with: the last word of each name, title or category c0 holds
    ("Office Chair" -> "chair"), in order of appearance."""
    terms: list[str] = []
    for key in ("name", "title", "category", "product_name"):
        for value in c0_values(key, c0):
            word = value.split()[-1].lower() if value.split() else ""
            if len(word) > 2 and word.isalpha() and word not in terms:
                terms.append(word)
    return terms


def c0_values(name: str, c0: Any, kinds: type | tuple[type, ...] = str) -> list[Any]:
    """Distinct values of the given kinds (strings by default) that c0 holds under a field called `name` (at any
    depth), in order of appearance."""
    found: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k == name and isinstance(v, kinds) and not isinstance(v, bool) and v not in found:
                    found.append(v)
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(c0)
    return found


def reference_date(c0: Any) -> dt.date:
    """The latest ISO date in c0 (the scenario's "now"), or REFERENCE_DATE."""
    return calendar(c0)[1]


def calendar(c0: Any) -> tuple[dt.date, dt.date]:
    """The earliest and the latest ISO date in c0 (both REFERENCE_DATE when it holds none); dates of birth are
    no part of the scenario's calendar (a flight searched for 2009 because a passenger was born then)."""
    dates = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if not is_birth_param(str(k)):
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif isinstance(node, str) and _ISO.match(node):
            try:
                dates.append(dt.date.fromisoformat(node[:10]))
            except ValueError:
                pass

    walk(c0)
    return (min(dates), max(dates)) if dates else (REFERENCE_DATE, REFERENCE_DATE)


def is_birth_param(name: str) -> bool:
    """Whether a parameter holds a date of birth (a date in the past)."""
    n = name.lower()
    return "birth" in n or n == "dob"


def declared_format(schema: dict[str, Any]) -> str | None:
    """The strftime pattern of the date format a parameter's description declares ("in the format MM/YYYY",
    "format of YYYY-MM-DDTHH:MM:SS"), or None; MM after HH: is minutes, elsewhere the month."""
    m = _FORMAT.search(schema.get("description", ""))
    if not m:
        return None
    text, out, pos = m.group(1), [], 0
    for tok in _FORMAT_TOKENS.finditer(text):
        out.append(text[pos:tok.start()])
        clock = tok.group() == "MM" and text[:tok.start()].rstrip(":").endswith("HH")
        out.append("%M" if clock else {"YYYY": "%Y", "YY": "%y", "MM": "%m", "DD": "%d", "HH": "%H", "SS": "%S"}[tok.group()])
        pos = tok.end()
    return "".join(out) + text[pos:]


def _dated(name: str, pattern: str, fake: Faker, c0: Any) -> str:
    """A date or time in `pattern`: an expiry years ahead, a birth date adult's, a modification time in the past,
    others in the scenario's calendar (as ISO dates are)."""
    n, now = name.lower(), reference_date(c0)
    if "expir" in n or "valid_until" in n:
        day = fake.date_between(now + dt.timedelta(days=60), now + dt.timedelta(days=5 * 365))
    elif is_birth_param(n):
        day = fake.date_between(dt.date(1950, 1, 1), now - dt.timedelta(days=18 * 366))
    elif any(k in n for k in ("modified", "created", "since", "after", "before", "last")):
        day = fake.date_between(now - dt.timedelta(days=3 * 365), now)
    else:
        first, last = calendar(c0)
        day = fake.date_between(first, last) if first < last else \
            fake.date_between(last + dt.timedelta(days=1), last + dt.timedelta(days=180))
    moment = dt.datetime.combine(day, dt.time(fake.random_int(0, 23), fake.random_int(0, 59), fake.random_int(0, 59)))
    return moment.strftime(pattern)


def _airport_codes(schema: dict[str, Any], name: str, c0: Any) -> list[str]:
    """Airport codes for a parameter that takes one ("the 3 letter code of the departing airport", "the IATA code
    for the destination city", "the origin city airport in three letters"): those c0
    holds, else the documented examples, else major airports; [] for other parameters."""
    text = f"{name} {schema.get('description', '')}".lower()
    coded = "iata" in text or "airport" in text and re.search(r"code|letter", text) or "airport" in name.lower()
    if not (coded or _TRIP_END.search(name)):
        return []
    held = [f for f in _strings(c0) if _AIRPORT_CODE.fullmatch(f)] if c0 is not None else []
    return list(dict.fromkeys(held)) or described_examples(schema) or _AIRPORTS


def _strings(node: Any) -> list[Any]:
    """Every string inside a JSON value."""
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return [node] if isinstance(node, str) else []


def _opaque(fake: Faker, length: int) -> str:
    """A random letters-and-digits credential (a client secret, a refresh token)."""
    return fake.lexify("?" * length, letters=string.ascii_letters + string.digits)


def file_name(fake: Faker) -> str:
    """A file name as people name files: a topic and a tag ("q3_report.csv", "meeting-notes-2024.md"), drawn
    from the seeded Faker (so the caller's RNG advances as for any other Faker value)."""
    topic, tag, ext = (fake.random_element(xs) for xs in (_FILE_TOPICS, _FILE_TAGS, _EXTS))
    return fake.random_element([f"{tag}_{topic}", f"{topic}_{tag}", f"{topic}-{tag}", topic]) + ext


def _word_pair(rng: random.Random) -> str:
    """Two distinct vocabulary words joined by an underscore."""
    a, b = rng.sample(_WORDS, 2)
    return f"{a}_{b}"


def _string_for(name: str, rng: random.Random, c0: Any = None, schema: dict[str, Any] | None = None) -> str | None:
    """A plausible string for a parameter called `name` (a date format its description declares, then Faker
    formats by name, c0's dates as "now"), or None when no format knows the name."""
    n, described = name.lower(), (schema or {}).get("description", "").lower()
    fake = faker_for(rng)
    pattern = declared_format(schema or {})
    if pattern is not None:
        return _dated(n, pattern, fake, c0)
    if "card" in n and ("number" in n or n.endswith("card")):
        return fake.credit_card_number(rng.choice(_CARD_TYPES))  # Luhn-valid
    if _CARD_CODE.search(n):
        return fake.credit_card_security_code()
    if "expir" in n:
        return _dated(n, "%m/%y", fake, c0)
    if "passport" in n:
        return fake.bothify("US#######")  # a US passport: the country prefix, seven digits
    if "username" in n or "user_name" in n or n in ("user", "handle"):
        return fake.user_name()
    if "secret" in n or "token" in n or "api_key" in n:
        return _opaque(fake, 32 if "token" in n else 24)
    if "insurance" in n and "type" in n:
        return rng.choice(_INSURANCE)
    if described.startswith("if true"):  # a flag passed as text
        return rng.choice(["true", "false"])
    if "street" in described and "city" in described:  # "in the format of street, city, state"
        place = us_address(rng)
        return f"{place['address1']}, {place['city']}, {place['state']}"
    if "email" in n:
        return fake.email()
    if "first_name" in n or n == "first":
        return fake.first_name()
    if "last_name" in n or n == "last":
        return fake.last_name()
    if n.endswith("name") and any(k in n for k in ("guest", "passenger", "user", "person", "customer", "full",
                                                   "traveler", "holder", "contact", "recipient")):
        return fake.name()
    if "zip" in n or "postal" in n:
        return fake.postcode()
    if "phone" in n:
        return fake.numerify("+1-###-###-####")
    if is_birth_param(n):
        return fake.date_between(dt.date(1950, 1, 1), reference_date(c0) - dt.timedelta(days=18 * 366)).isoformat()
    if "date" in n or n in ("check_in", "check_out") or n.endswith("_on"):
        first, last = calendar(c0)
        if first < last:  # the scenario's own calendar (a travel window, order dates)
            return fake.date_between(first, last).isoformat()
        return fake.date_between(last + dt.timedelta(days=1), last + dt.timedelta(days=180)).isoformat()
    if "city" in n:
        return rng.choice(US_PLACES)[0]
    if "country" in n:
        return fake.country()
    if "state" == n:
        return rng.choice(US_PLACES)[1]
    if "address" in n or "street" in n:
        return fake.street_address()
    if "symbol" in n or "ticker" in n or n == "stock":
        return rng.choice(_TICKERS)
    if "company" in n:
        return fake.company()
    if "password" in n:
        return fake.password(length=12)
    if "file" in n or n in ("source", "destination", "target", "path"):
        return file_name(fake)
    if "dir" in n or "folder" in n:
        return rng.choice(_FOLDERS)
    if any(k in n for k in ("summary", "title", "subject")):
        return fake.random_element(_titles_for(c0))
    if any(k in n for k in ("content", "text", "message", "body", "note", "reason", "description", "comment",
                            "resolution", "feedback", "answer")):  # free text: a sentence, never "notes_photos"
        return fake.random_element(_SENTENCES)
    if "expression" in n or "formula" in n:
        return f"{rng.randint(2, 400)} {rng.choice('+-*')} {rng.randint(2, 60)}"
    if "pattern" in n or "query" in n or "keyword" in n:
        return rng.choice(_WORDS)
    if "url" in n or "link" in n:
        return fake.url()
    if "color" in n or "colour" in n:
        return fake.color_name()
    if n.endswith("_id") or n == "id":
        return "".join(rng.choices(string.ascii_uppercase + string.digits, k=8))
    return None


def _number(schema: dict[str, Any], integer: bool, rng: random.Random) -> int | float:
    """A number inside the schema's bounds (inclusive minimum/maximum, exclusive exclusiveMinimum/Maximum)."""
    step = 1 if integer else 0.01
    lo = schema.get("minimum")
    if lo is None and "exclusiveMinimum" in schema:
        lo = schema["exclusiveMinimum"] + step
    hi = schema.get("maximum")
    if hi is None and "exclusiveMaximum" in schema:
        hi = schema["exclusiveMaximum"] - step
    if lo is None:
        lo = 1 if hi is None or hi >= 1 else hi - 10
    if hi is None:
        hi = max(lo, 0) + 10
    hi = max(lo, hi)
    if integer:
        return rng.randint(math.ceil(lo), max(math.ceil(lo), math.floor(hi)))
    width = hi - lo  # as people give a quantity: 65 over a wide range, 7.5 over a narrow one, 0.3 within one
    grain = 1 if width >= 20 else 0.5 if width >= 2 else 0.1 if width >= 0.5 else 0.01
    value = round(round(rng.uniform(float(lo), float(hi)) / grain) * grain, 2)
    return value if lo <= value <= hi else min(hi, max(lo, round(rng.uniform(float(lo), float(hi)), 2)))


def _typical_range(name: str, schema: dict[str, Any], c0: Any = None) -> dict[str, Any]:
    """`schema` with the usual range of a quantity at the ends its bounds leave open: the span of the values c0
    holds of the quantity the name ends in (`min_price` -> the prices of c0's stocks), a card code's three digits,
    a cabin temperature in degrees Celsius, a speed in miles per hour, a road distance."""
    given_lo = "minimum" in schema or "exclusiveMinimum" in schema
    given_hi = "maximum" in schema or "exclusiveMaximum" in schema
    if given_lo and given_hi:
        return schema
    held = c0_values(name.rsplit("_", 1)[-1], c0, (int, float)) if c0 is not None else []
    low = name.lower()
    if len(held) >= 2:
        typical = (math.floor(min(held) * 0.8), math.ceil(max(held) * 1.1))
    elif _CARD_CODE.search(name):
        typical = (100, 999)
    else:
        typical = next((span for word, span in _TYPICAL_SPANS if word in low), None)
    if typical is None:
        return schema
    out = {**({} if given_lo else {"minimum": typical[0]}), **({} if given_hi else {"maximum": typical[1]}), **schema}
    lo, hi = out.get("minimum", out.get("exclusiveMinimum")), out.get("maximum", out.get("exclusiveMaximum"))
    if lo >= hi and given_lo != given_hi:  # the one given end lies beyond the typical span: the span moves to it
        width = typical[1] - typical[0]
        out = {**schema, "maximum": lo + width} if given_lo else {**schema, "minimum": hi - width}
    return out


_TYPICAL_SPANS = [("temperature", (16, 28)), ("speed", (25, 75)), ("distance", (10, 300))]


def described_choices(schema: dict[str, Any]) -> list[str]:
    """The closed set of values a string parameter's description names ("should be either 'a' or 'b'",
    "one of 'a', 'b' or 'c'", "(Buy/Sell)": words in parentheses split by slashes), or []: examples ("such as
    'x'") are not a closed set."""
    if schema.get("type", "string") != "string":
        return []
    description = schema.get("description", "")
    if m := _CLOSED_CHOICE.search(description):
        return re.findall(r"'([^']+)'", m.group(1))
    m = _SLASHED_CHOICE.search(description)
    return m.group(1).split("/") if m else []


def generate(name: str, schema: dict[str, Any], rng: random.Random, c0: Any = None, *,
             reuse_existing: bool = True) -> Any:
    """A fresh value for parameter `name` fitting `schema`, from the domain first: enums (declared, or a closed
    choice in the description); with `reuse_existing` (a read, such as a search, that should find something) a
    value c0 holds under the same field name, for a string that names no new thing; then the format generators
    by type and name; then documented examples (a format hint: reused verbatim before a generator, every new
    address would be the docstring's "445 Maple Drive"); word pairs last. A write passes `reuse_existing=False`:
    c0's value of the field is what the write would replace, and writing it again changes nothing. Bounds and
    types are honoured."""
    if "enum" in schema and schema["enum"]:
        return rng.choice(schema["enum"])
    choices = described_choices(schema)
    if choices:
        return rng.choice(choices)
    kind = schema.get("type", "string")
    if kind == "string" and c0 is not None and not _NEW_NAMES.search(name):  # a search finds something
        known = (c0_values(name, c0) if reuse_existing else []) or (search_terms(c0) if is_search_param(name) else [])
        if known:
            return rng.choice(known)
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "boolean":
        return rng.random() < 0.5
    if kind in ("integer", "number"):
        return _number(_typical_range(name, schema, c0), kind == "integer", rng)
    if kind == "array":
        item = schema.get("items", {"type": "string"})
        return [generate(name.rstrip("s"), item, rng, c0, reuse_existing=reuse_existing)
                for _ in range(rng.randint(1, 2))]
    if kind == "object":
        props = schema.get("properties", {})
        return {k: generate(k, v, rng, c0, reuse_existing=reuse_existing)
                for k, v in props.items() if k in schema.get("required", props)}
    airports = _airport_codes(schema, name, c0)
    if airports:
        return rng.choice(airports)
    formatted = _string_for(name, rng, c0, schema)
    if formatted is not None:
        return formatted
    examples = described_examples(schema)
    return rng.choice(examples) if examples else _word_pair(rng)


def announceable(name: str, schema: dict[str, Any]) -> bool:
    """Whether a value of `name` reads naturally when the user says it turns before its use, or refers back to it
    ("the file I mentioned"): a free string that is not an address part, a search's words or a secret; never a
    flag, a number or an enum's pick ("the lock setting I'll want later is true" is no way people talk)."""
    return schema.get("type", "string") == "string" and "enum" not in schema and address_part(name) is None \
        and not is_search_param(name) and not is_secret_param(name)


def within_totals(args: dict[str, Any], fresh: Collection[str], rng: random.Random) -> None:
    """Set (in place) each count that is part of a total the same call gives (`nonfree_baggages` of
    `total_baggages`: the name ends in the total's noun) to at most that total, when it is one of the values the
    user states fresh (`fresh`) and exceeds it: 8 paid bags of 7 is a request no one makes."""
    for name, total in args.items():
        noun = name[len("total_"):] if name.startswith("total_") else ""
        if not noun or not isinstance(total, int) or isinstance(total, bool):
            continue
        for part in [p for p in args if p != name and p.endswith(f"_{noun}") and p in fresh]:
            if isinstance(args[part], int) and not isinstance(args[part], bool) and args[part] > total:
                args[part] = rng.randint(0, max(total, 0))
