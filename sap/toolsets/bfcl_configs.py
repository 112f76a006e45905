"""Random initial configurations for BFCL's multi-turn classes, one sampler per class, following each class's
`_load_scenario` schema (never copied from BFCL's test files)."""
from __future__ import annotations

import random
from typing import Any, Callable

from sap.provenance.generate import faker_for

PEOPLE = ["Alice", "Bob", "Catherine", "Daniel", "Eva", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Keiko", "Liam",
          "Maya", "Nikolai", "Olivia", "Pedro", "Quinn", "Rosa", "Sven", "Tara"]
SURNAMES = ["Smith", "Garcia", "Chen", "Kowalski", "Okafor", "Tanaka", "Nguyen", "Rossi", "Schmidt", "Dubois"]
TOPICS = ["budget", "roadmap", "release", "meeting", "invoice", "travel", "research", "backup", "design", "report"]
WORDS = ["alpha", "review", "draft", "summary", "quarterly", "notes", "plan", "status", "update", "archive",
         "pending", "final", "metrics", "schedule", "errors", "warning", "ok", "deadline", "client", "server"]
FOLDERS = ["documents", "projects", "photos", "archive", "reports", "logs", "drafts", "workspace", "music", "temp",
           "research", "invoices", "backups", "notes"]
EXTENSIONS = [".txt", ".md", ".csv", ".log"]


def _sentence(rng: random.Random, n: int = 6) -> str:
    """A short lower-case line of vocabulary words, first letter capitalised, no parentheses."""
    words = [rng.choice(WORDS + TOPICS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def _file_text(rng: random.Random) -> str:
    """A file body of 2 to 6 lines."""
    return "\n".join(_sentence(rng, rng.randint(3, 8)) for _ in range(rng.randint(2, 6)))


def _directory(rng: random.Random, depth: int, files: int | None = None) -> dict[str, Any]:
    """A directory node with `files` files (1 to 3 when not given) and (above the bottom level) subdirectories, one
    in six of them empty (a folder nothing was put in yet: what `rmdir` can remove)."""
    contents: dict[str, Any] = {}
    for _ in range(rng.randint(1, 3) if files is None else files):
        name = f"{rng.choice(TOPICS)}_{rng.choice(WORDS)}{rng.choice(EXTENSIONS)}"
        contents[name] = {"type": "file", "content": _file_text(rng)}
    if depth > 0:
        for name in rng.sample(FOLDERS, rng.randint(1, 3)):
            if name not in contents:
                contents[name] = {"type": "directory", "contents": {}} if rng.random() < 1 / 6 else \
                    _directory(rng, depth - 1 if rng.random() < 0.7 else 0)
    return {"type": "directory", "contents": contents}


def gorilla_file_system(rng: random.Random) -> dict[str, Any]:
    """A tree under one user folder, two levels deep at most below it. As in BFCL's own configurations (29 of the
    50 base entries), the user folder itself mostly holds folders only: the files are in a subfolder, which `cd`
    enters before a file is read or changed."""
    user = rng.choice(PEOPLE).lower()
    top = _directory(rng, 2, files=0 if rng.random() < 0.55 else rng.randint(1, 2))
    if not any(v["type"] == "file" for v in top["contents"].values()) and \
            not any(v["type"] == "directory" and v["contents"] for v in top["contents"].values()):
        top["contents"][rng.choice(FOLDERS)] = _directory(rng, 0, files=rng.randint(1, 3))  # something to work on
    return {"root": {user: top}}


def twitter_api(rng: random.Random) -> dict[str, Any]:
    """A logged-out account with a few tweets of its own and of others."""
    username = faker_for(rng).user_name()
    others = [p.lower() for p in rng.sample(PEOPLE, 4)]
    tweets = {}
    for i in range(rng.randint(2, 5)):
        author = username if rng.random() < 0.6 else rng.choice(others)
        tags = [f"#{t}" for t in rng.sample(TOPICS, rng.randint(0, 2))]
        tweets[str(i)] = {"id": i, "username": author, "content": _sentence(rng, rng.randint(4, 8)),
                          "tags": tags, "mentions": []}
    return {"username": username, "password": f"{rng.choice(WORDS)}{rng.randint(100, 999)}!",
            "authenticated": False, "tweets": tweets, "comments": {}, "retweets": {},
            "following_list": others[:rng.randint(1, 3)], "tweet_counter": len(tweets)}


def message_api(rng: random.Random) -> dict[str, Any]:
    """A workspace of users, a few sent messages, nobody logged in."""
    names = rng.sample(PEOPLE, rng.randint(3, 6))
    user_map = {name: f"USR{i + 1:03d}" for i, name in enumerate(names)}
    ids = list(user_map.values())
    inbox = [{rng.choice(ids[1:]): _sentence(rng, rng.randint(4, 8))} for _ in range(rng.randint(1, 4))]
    return {"user_count": len(user_map), "user_map": user_map, "inbox": inbox, "message_count": len(inbox),
            "current_user": None, "random_seed": rng.randint(1, 10**6)}


def ticket_api(rng: random.Random) -> dict[str, Any]:
    """A queue of tickets by a few users, nobody logged in."""
    users = [f"{p} {s}" for p, s in zip(rng.sample(PEOPLE, 3), rng.sample(SURNAMES, 3))]
    queue = []
    for i in range(rng.randint(1, 4)):
        queue.append({"id": i + 1, "title": f"{rng.choice(TOPICS)} {rng.choice(['issue', 'request', 'question'])}",
                      "description": _sentence(rng, rng.randint(4, 8)),
                      "status": rng.choice(["Open", "Open", "In Progress", "Resolved"]),
                      "priority": rng.randint(1, 5), "created_by": rng.choice(users)})
    return {"ticket_queue": queue, "ticket_counter": len(queue) + 1, "current_user": None}


STOCKS = {"AAPL": 227.16, "GOOG": 2840.34, "TSLA": 667.92, "MSFT": 310.23, "NVDA": 220.34, "ALPH": 1320.45,
          "OMEG": 457.23, "QUAS": 725.89, "NEPT": 88.34, "SYNX": 345.67, "ZETA": 22.09,
          "AMZN": 178.35, "GORI": 85.12}  # every symbol the backend's get_symbol_by_name knows


def trading_bot(rng: random.Random) -> dict[str, Any]:
    """An account with a balance, some orders, a watch list and the market's stocks (every company the backend
    names) at prices jittered around typical values."""
    symbols = sorted(STOCKS)
    stocks = {}
    for sym in symbols:
        price = round(STOCKS[sym] * rng.uniform(0.9, 1.1), 2)
        stocks[sym] = {"price": price, "percent_change": round(rng.uniform(-0.5, 0.5), 2),
                       "volume": round(rng.uniform(0.5, 3.5), 3), "MA(5)": round(price * rng.uniform(0.98, 1.02), 2),
                       "MA(20)": round(price * rng.uniform(0.97, 1.03), 2)}
    counter = rng.randint(10000, 90000)
    orders = {}
    for i in range(rng.choice([0, 1, 2, 2, 2, 2, 3, 3])):  # an active account: most have orders on it
        sym = rng.choice(symbols)
        orders[str(counter + i)] = {"id": counter + i, "order_type": rng.choice(["Buy", "Sell"]), "symbol": sym,
                                    "price": stocks[sym]["price"], "amount": rng.randint(1, 20),
                                    "status": rng.choice(["Completed", "Pending", "Open"])}
    return {"orders": orders,
            "account_info": {"account_id": rng.randint(10000, 99999), "balance": float(rng.randint(5, 60) * 1000),
                             "binding_card": int(faker_for(rng).credit_card_number("visa16"))},
            "authenticated": False, "market_status": "Closed" if rng.random() < 0.15 else "Open",  # trading hours
            "order_counter": counter + len(orders), "stocks": stocks,
            "watch_list": rng.sample(symbols, rng.randint(1, 3)), "transaction_history": [],
            "random_seed": rng.randint(1, 10**6)}


def travel_api(rng: random.Random) -> dict[str, Any]:
    """A traveller with registered cards and a booking or two, not yet authenticated."""
    first, last = rng.choice(PEOPLE), rng.choice(SURNAMES)
    cards = {}
    for _ in range(rng.randint(1, 3)):
        card_id = str(rng.randint(10**11, 10**12 - 1))
        cards[card_id] = {"card_number": faker_for(rng).credit_card_number("visa16"),
                          "expiration_date": f"{rng.randint(1, 12):02d}/{rng.randint(2027, 2031)}",
                          "cardholder_name": f"{first} {last}", "card_verification_number": rng.randint(100, 999),
                          "balance": float(rng.randint(10, 90) * 100)}
    bookings = {}
    for _ in range(rng.randint(0, 2)):
        route = rng.sample(["SFO", "LAX", "JFK", "ORD", "BOS"], 2)
        bookings[str(rng.randint(10**6, 10**7 - 1))] = {
            "card_id": rng.choice(sorted(cards)), "travel_date": f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            "travel_from": route[0], "travel_to": route[1], "travel_class": rng.choice(["economy", "business"]),
            "travel_cost": float(rng.randint(2, 9) * 100), "transaction_id": str(rng.randint(10**7, 10**8 - 1))}
    return {"random_seed": rng.randint(1, 10**6), "credit_card_list": cards, "booking_record": bookings,
            "access_token": None, "token_type": None, "token_expires_in": None, "token_scope": None,
            "user_first_name": first, "user_last_name": last,
            "budget_limit": rng.choice([None, float(rng.randint(5, 20) * 100)])}


def vehicle_control_api(rng: random.Random) -> dict[str, Any]:
    """A parked car with random fuel, climate, doors and tyre pressures."""
    doors = {d: rng.choice(["locked", "unlocked"]) for d in ("driver", "passenger", "rear_left", "rear_right")}
    return {"random_seed": rng.randint(1, 10**6), "fuelLevel": float(rng.randint(2, 50)),
            "batteryVoltage": round(rng.uniform(11.8, 13.2), 1), "engineState": "stopped", "doorStatus": doors,
            "remainingUnlockedDoors": sum(v == "unlocked" for v in doors.values()),
            "acTemperature": float(rng.randint(16, 28)), "fanSpeed": rng.randint(0, 100),
            "acMode": rng.choice(["auto", "cool", "heat", "defrost"]), "humidityLevel": float(rng.randint(30, 70)),
            "headLightStatus": rng.choice(["on", "off"]), "parkingBrakeStatus": rng.choice(["engaged", "released"]),
            "parkingBrakeForce": 0.0, "slopeAngle": float(rng.randint(0, 10)), "brakePedalStatus": "released",
            "brakePedalForce": 0.0, "distanceToNextVehicle": float(rng.randint(20, 120)), "cruiseStatus": "inactive",
            "destination": "None", "frontLeftTirePressure": float(rng.randint(26, 36)),
            "frontRightTirePressure": float(rng.randint(26, 36)), "rearLeftTirePressure": float(rng.randint(26, 36)),
            "rearRightTirePressure": float(rng.randint(26, 36))}


CONFIG_SAMPLERS: dict[str, Callable[[random.Random], dict[str, Any]]] = {
    "GorillaFileSystem": gorilla_file_system,
    "TwitterAPI": twitter_api,
    "MessageAPI": message_api,
    "TicketAPI": ticket_api,
    "TradingBot": trading_bot,
    "TravelAPI": travel_api,
    "VehicleControlAPI": vehicle_control_api,
}  # MathAPI is stateless: it takes no configuration


def sample_bfcl_config(classes: list[str], seed: int) -> dict[str, Any]:
    """An initial configuration keyed by class name, as BFCL's `initial_config`, deterministic in `seed`."""
    rng = random.Random(f"bfcl:{'+'.join(classes)}:{seed}")
    return {name: CONFIG_SAMPLERS[name](rng) for name in classes if name in CONFIG_SAMPLERS}
