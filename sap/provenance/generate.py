"""Type- and name-aware generators for values a user introduces (self_create)."""
from __future__ import annotations

import math
import random
import re
import string
from typing import Any

_FIRST = ["Mia", "Noah", "Ava", "Liam", "Sofia", "Ethan", "Yara", "Omar", "Lena", "Kenji", "Priya", "Mateo"]
_LAST = ["Garcia", "Chen", "Okafor", "Novak", "Silva", "Kim", "Haddad", "Larsen", "Rossi", "Patel"]
_CITIES = ["Lisbon", "Denver", "Osaka", "Nairobi", "Toronto", "Krakow", "Austin", "Seville"]
_WORDS = ["budget", "draft", "summary", "invoice", "travel", "notes", "archive", "roadmap", "meeting", "backup",
          "report", "photos", "ideas", "plan", "review", "metrics"]
_SENTENCES = ["Remember to confirm the schedule", "Quarterly numbers look stable", "Call the supplier on Monday",
              "Ship the revised draft", "Collect feedback from the team", "Renew the subscription"]
_EXTS = [".txt", ".md", ".csv", ".log"]
_CLOSED_CHOICE = re.compile(r"\b(?:either|one of)\s+('[^']+'(?:\s*,\s*'[^']+')*,?\s+or\s+'[^']+')")


def _word_pair(rng: random.Random) -> str:
    """Two distinct vocabulary words joined by an underscore."""
    a, b = rng.sample(_WORDS, 2)
    return f"{a}_{b}"


def _string_for(name: str, rng: random.Random) -> str:
    """A plausible string for a parameter called `name`."""
    n = name.lower()
    if "email" in n:
        return f"{rng.choice(_FIRST).lower()}.{rng.choice(_LAST).lower()}{rng.randint(1, 99)}@example.com"
    if "first_name" in n:
        return rng.choice(_FIRST)
    if "last_name" in n:
        return rng.choice(_LAST)
    if n.endswith("name") and any(k in n for k in ("guest", "passenger", "user", "person", "customer", "full")):
        return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
    if "zip" in n or "postal" in n:
        return f"{rng.randint(10000, 99999)}"
    if "phone" in n:
        return f"+1-555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}"
    if "date" in n or n in ("check_in", "check_out", "dob") or n.endswith("_on") or "birth" in n:
        return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if "city" in n:
        return rng.choice(_CITIES)
    if "state" == n:
        return rng.choice(["CA", "TX", "NY", "WA", "CO"])
    if "address" in n:
        return f"{rng.randint(10, 999)} {rng.choice(_LAST)} Street"
    if "file" in n or n in ("source", "destination", "target", "path"):
        return _word_pair(rng) + rng.choice(_EXTS)
    if "dir" in n or "folder" in n:
        return _word_pair(rng)
    if any(k in n for k in ("content", "text", "message", "body", "note", "reason", "description")):
        return rng.choice(_SENTENCES)
    if "expression" in n or "formula" in n:
        return f"{rng.randint(2, 400)} {rng.choice('+-*')} {rng.randint(2, 60)}"
    if "pattern" in n or "query" in n or "keyword" in n:
        return rng.choice(_WORDS)
    if n.endswith("_id") or n == "id":
        return "".join(rng.choices(string.ascii_uppercase + string.digits, k=8))
    return _word_pair(rng)


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
    return min(hi, max(lo, round(rng.uniform(float(lo), float(hi)), 2)))


def described_choices(schema: dict[str, Any]) -> list[str]:
    """The closed set of values a string parameter's description names ("should be either 'a' or 'b'",
    "one of 'a', 'b' or 'c'"), or []: examples ("such as 'x'") are not a closed set."""
    if schema.get("type", "string") != "string":
        return []
    m = _CLOSED_CHOICE.search(schema.get("description", ""))
    return re.findall(r"'([^']+)'", m.group(1)) if m else []


def generate(name: str, schema: dict[str, Any], rng: random.Random) -> Any:
    """A fresh value for parameter `name` fitting `schema`: enums (declared, or a closed choice in the
    description), bounds and types are honoured."""
    if "enum" in schema and schema["enum"]:
        return rng.choice(schema["enum"])
    choices = described_choices(schema)
    if choices:
        return rng.choice(choices)
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "boolean":
        return rng.random() < 0.5
    if kind in ("integer", "number"):
        return _number(schema, kind == "integer", rng)
    if kind == "array":
        item = schema.get("items", {"type": "string"})
        return [generate(name.rstrip("s"), item, rng) for _ in range(rng.randint(1, 2))]
    if kind == "object":
        props = schema.get("properties", {})
        return {k: generate(k, v, rng) for k, v in props.items() if k in schema.get("required", props)}
    return _string_for(name, rng)
