"""Toolsets over BFCL v4's multi-turn backend classes (`bfcl/GorillaFileSystem+TwitterAPI`, ...), from bfcl-eval."""
from __future__ import annotations

import importlib
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

from sap.executors.bfcl import BfclExecutor
from sap.model import ToolCall, Toolset, ToolSpec
from sap.provenance.jsonpath import steps
from sap.toolsets.bfcl_configs import sample_bfcl_config
from sap.toolsets.code_enums import accepted_combinations, checked_values
from sap.toolsets.errors import ToolsetUnavailable
from sap.toolsets.loaders import load_bfcl_func_doc

PREFIX = "bfcl/"
LONG_CONTEXT = ":long_context"
BFCL_VERSION = "2026.3.23"
INSTALL_HINT = f"pip install --no-deps bfcl-eval=={BFCL_VERSION} mpmath"
ENUM_IN_DESCRIPTION = re.compile(r"(?:\[Enum\]:|Options are:|Here are the options:)\s*(.+?)\s*$", re.S)
RANGE_IN_DESCRIPTION = re.compile(r"(?:between|from) (-?\d+(?:\.\d+)?)(?: \([^)]*\))? (?:and|to) (-?\d+(?:\.\d+)?)")
TOOL_DESCRIPTION_MARK = "Tool description: "
BACKEND_PACKAGE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"

# class name -> (backend module, func-doc file in bfcl_eval/data/multi_turn_func_doc)
BFCL_CLASSES = {
    "GorillaFileSystem": ("gorilla_file_system", "gorilla_file_system.json"),
    "TwitterAPI": ("posting_api", "posting_api.json"),
    "MessageAPI": ("message_api", "message_api.json"),
    "TicketAPI": ("ticket_api", "ticket_api.json"),
    "TradingBot": ("trading_bot", "trading_bot.json"),
    "TravelAPI": ("travel_booking", "travel_booking.json"),
    "VehicleControlAPI": ("vehicle_control", "vehicle_control.json"),
    "MathAPI": ("math_api", "math_api.json"),
}

# The class combinations BFCL v4's multi-turn categories use besides the single classes.
BFCL_COMBINATIONS = [
    ("GorillaFileSystem", "MathAPI"), ("GorillaFileSystem", "MessageAPI"), ("GorillaFileSystem", "TicketAPI"),
    ("GorillaFileSystem", "TwitterAPI"), ("MathAPI", "TradingBot"), ("MathAPI", "TravelAPI"),
    ("MathAPI", "VehicleControlAPI"), ("MessageAPI", "TradingBot"), ("MessageAPI", "TravelAPI"),
    ("MessageAPI", "VehicleControlAPI"), ("TicketAPI", "TradingBot"), ("TicketAPI", "TravelAPI"),
    ("TicketAPI", "VehicleControlAPI"), ("TradingBot", "TwitterAPI"), ("TravelAPI", "TwitterAPI"),
    ("TwitterAPI", "VehicleControlAPI"),
]

# Field names (or `$` path patterns), besides a parameter's own, whose values can fill it: class -> tool ->
# parameter -> names. GorillaFileSystem names files and folders only as the items of `ls`'s listing and as keys of
# its config tree's `contents` (those of the directory it starts in); the tools that act on an existing entry take
# them, not those that create one (touch, mkdir, echo). VehicleControlAPI's results name what other tools take:
# the nearest tire shop is a navigation destination, a city's zipcode an end of a distance estimate, a liter
# conversion the fuel to add, the fuel level a gallon amount to convert. TravelAPI verifies only its own user, whose
# names c0 holds as `user_first_name` and `user_last_name`. MessageAPI's get_user_id answers with a `user_id`, the
# receiver a message goes to. TradingBot names stocks by symbol: a company's symbol (get_symbol_by_name), the watch
# list's entries and a sector's `stock_list` are the stocks the other tools look up, watch, filter or sell. MathAPI
# answers every operation with a bare `result`, which the next operation's operands take.
ENTRY_NAMES = ["current_directory_content", "$.GorillaFileSystem.root.*.contents.*~",
               "$.GorillaFileSystem.root.*.contents.*.contents.*~",
               "$.GorillaFileSystem.root.*.contents.*.contents.*.contents.*~"]


class FolderScope:
    """GorillaFileSystem's names resolve in the current folder: `cd` moves it (`..` up, `a/b` down twice), c0's tree
    says which folder an entry is in, and an `ls` lists the folder current when it ran."""

    def folder_of(self, path: str) -> tuple[str, ...] | None:
        """`$.GorillaFileSystem.root.u.contents.a.contents["x.txt"]~` -> ("a",); None for any other path."""
        if not path.startswith("$.GorillaFileSystem.root.") or not path.endswith("~"):
            return None
        keys = steps(path[:-1])[3:]
        return tuple(k for i, k in enumerate(keys[1:-1]) if i % 2 == 0)  # contents, a, contents, x -> (a,)

    def current(self, calls: list[ToolCall]) -> tuple[str, ...]:
        """The folder below the user folder that the successful `cd` calls among `calls` lead to."""
        here: list[str] = []
        for call in calls:
            if call.name == "cd" and call.ok:
                for part in str(call.args_exec.get("folder", "")).split("/"):
                    if part == "..":
                        here = here[:-1]
                    elif part not in ("", "."):
                        here.append(part)
        return tuple(here)

    def listed_in(self, tool: str) -> bool:
        """`ls` lists the current folder."""
        return tool == "ls"

    def moves(self, tool: str) -> bool:
        """`cd` changes it."""
        return tool == "cd"

    @property
    def up(self) -> str:
        """`cd("..")` goes up one folder."""
        return ".."

    def where(self, c0: dict[str, Any], name: str) -> tuple[str, ...] | None:
        """The folder below the user folder whose contents hold `name` in c0 (the first, breadth first), or None."""
        users = list((c0.get("GorillaFileSystem", {}).get("root") or {}).values())
        queue = [((), users[0])] if users else []
        while queue:
            folder, node = queue.pop(0)
            contents = node.get("contents", {}) if isinstance(node, dict) else {}
            if name in contents:
                return folder
            queue += [((*folder, k), v) for k, v in contents.items()
                      if isinstance(v, dict) and v.get("type") == "directory"]
        return None
OPERANDS = ("a", "b", "number", "value", "base", "part", "whole")
VALUE_FIELDS: dict[str, dict[str, dict[str, list[str]]]] = {
    "GorillaFileSystem": {
        **{tool: {"file_name": ENTRY_NAMES} for tool in ("cat", "grep", "rm", "sort", "tail", "wc")},
        "cd": {"folder": ENTRY_NAMES}, "rmdir": {"dir_name": ENTRY_NAMES},
        "diff": {"file_name1": ENTRY_NAMES, "file_name2": ENTRY_NAMES},
        "cp": {"source": ENTRY_NAMES, "destination": ENTRY_NAMES},
        "mv": {"source": ENTRY_NAMES, "destination": ENTRY_NAMES},
    },
    "VehicleControlAPI": {
        "set_navigation": {"destination": ["shopLocation"]},
        "estimate_distance": {"cityA": ["zipcode"], "cityB": ["zipcode"]},
        "fillFuelTank": {"fuelAmount": ["gallon"]},
        "gallon_to_liter": {"gallon": ["fuelLevel"]},
    },
    "TradingBot": {
        "add_to_watchlist": {"stock": ["symbol"]}, "get_stock_info": {"symbol": ["watchlist", "stock_list"]},
        "remove_stock_from_watchlist": {"symbol": ["watchlist"]},
        **{tool: {"stocks": ["stock_list", "watchlist"]} for tool in ("filter_stocks_by_price", "notify_price_change")},
    },
    "TravelAPI": {"verify_traveler_information": {"first_name": ["user_first_name"], "last_name": ["user_last_name"]},
                  **{tool: {"travel_from": ["nearest_airport"], "travel_to": ["nearest_airport"]}
                     for tool in ("book_flight", "get_flight_cost")}},  # "the airport nearest to Rivermist"
    "MessageAPI": {tool: {"receiver_id": ["user_id"]} for tool in ("send_message", "delete_message")},
    "TwitterAPI": {"unfollow_user": {"username_to_unfollow": ["following_list"]}},  # only a followed user
    "MathAPI": {tool: {p: ["result"] for p in OPERANDS}
                for tool in ("absolute_value", "add", "divide", "imperial_si_conversion", "logarithm", "multiply",
                             "percentage", "power", "round_number", "si_unit_conversion", "square_root", "subtract")},
}


class BfclUnavailable(ToolsetUnavailable):
    """bfcl-eval is not installed (or its backend modules do not import)."""


def bfcl_names() -> list[str]:
    """The listed BFCL toolset names: every class alone, then BFCL's combinations."""
    return [PREFIX + c for c in BFCL_CLASSES] + [PREFIX + "+".join(combo) for combo in BFCL_COMBINATIONS]


def is_bfcl_name(name: str) -> bool:
    """Whether `name` names a BFCL toolset."""
    return name.startswith(PREFIX)


def parse_bfcl_name(name: str) -> tuple[list[str], bool]:
    """The classes and the long-context flag of `bfcl/A+B[:long_context]`; ValueError naming the problem."""
    body = name[len(PREFIX):]
    long_context = body.endswith(LONG_CONTEXT)
    if long_context:
        body = body[:-len(LONG_CONTEXT)]
    classes = body.split("+") if body else []
    unknown = [c for c in classes if c not in BFCL_CLASSES]
    if not classes or unknown or len(set(classes)) != len(classes) or len(classes) > 3:
        problem = f"unknown class {unknown[0]!r}" if unknown else "give one to three distinct classes"
        raise ValueError(f"bad BFCL toolset {name!r}: {problem}; classes: {', '.join(BFCL_CLASSES)}")
    return classes, long_context


def backend_class(name: str) -> type:
    """The BFCL backend class `name`, imported from its own module (not through bfcl_eval's heavy top level)."""
    module_name = f"{BACKEND_PACKAGE}.{BFCL_CLASSES[name][0]}"
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BfclUnavailable(f"BFCL toolsets need bfcl-eval ({exc}); install it with: {INSTALL_HINT}") from None
    return getattr(module, name)


def data_dir() -> Path:
    """bfcl_eval's data directory (question, possible_answer and func-doc files)."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise BfclUnavailable(f"BFCL toolsets need bfcl-eval, which is not installed; install it with: {INSTALL_HINT}")
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def _description_enum(description: str) -> list[Any] | None:
    """The values a BFCL parameter description enumerates (`[Enum]: [...]`, `Options are: a, b, c.`), if any."""
    m = ENUM_IN_DESCRIPTION.search(description)
    if not m:
        return None
    text = m.group(1).strip().rstrip(".")
    try:
        values = json.loads(text)
    except ValueError:
        values = [v.strip().strip("'\"") for v in text.split(",")]
    return values if isinstance(values, list) and values and all(isinstance(v, str) and v for v in values) else None


def _with_enums(spec: ToolSpec) -> ToolSpec:
    """`spec` with the enumerations and numeric ranges its parameter descriptions state ("[Enum]: ...",
    "between 0 (not pressed) and 1", "from 1 to 5") turned into JSON-schema `enum`, `minimum` and `maximum`."""
    props = {}
    for name, schema in spec.properties.items():
        description = schema.get("description", "")
        values = _description_enum(description)
        if values is not None and "enum" not in schema:
            if schema.get("type") == "array":
                schema = {**schema, "items": {**schema.get("items", {"type": "string"}), "enum": values}}
            else:
                schema = {**schema, "enum": values}
        bounds = RANGE_IN_DESCRIPTION.search(description)
        if bounds and schema.get("type") in ("number", "integer") and "minimum" not in schema:
            low, high = (float(b) for b in bounds.groups())
            schema = {**schema, "minimum": int(low) if low.is_integer() else low,
                      "maximum": int(high) if high.is_integer() else high}
        props[name] = schema
    return spec.model_copy(update={"parameters": {**spec.parameters, "properties": props}})


def _with_checked_values(spec: ToolSpec, method: Any) -> ToolSpec:
    """`spec` with an `enum` on each string parameter whose valid values the method's code tests against a table
    (MathAPI's unit conversions), read from the backend's source so they follow the installed bfcl-eval."""
    found = checked_values(method) if method is not None else {}
    props = {name: {**schema, "enum": found[name]} if name in found and "enum" not in schema
             and schema.get("type") == "string" else schema for name, schema in spec.properties.items()}
    return spec.model_copy(update={"parameters": {**spec.parameters, "properties": props}})


def _shared_enums(specs: list[ToolSpec]) -> list[ToolSpec]:
    """`specs` (one class's tools) with an enum on each string parameter that has none while the class's other
    tools give the same-named parameter exactly one enum (TravelAPI's `book_flight.travel_class` takes the
    classes that `get_flight_cost.travel_class` enumerates)."""
    enums: dict[str, set[tuple[Any, ...]]] = {}
    for spec in specs:
        for name, schema in spec.properties.items():
            if schema.get("enum"):
                enums.setdefault(name, set()).add(tuple(schema["enum"]))
    out = []
    for spec in specs:
        props = {name: {**schema, "enum": list(next(iter(enums[name])))}
                 if not schema.get("enum") and schema.get("type") == "string" and len(enums.get(name, ())) == 1
                 else schema for name, schema in spec.properties.items()}
        out.append(spec.model_copy(update={"parameters": {**spec.parameters, "properties": props}}))
    return out


def _own_words(description: str) -> str:
    """A func-doc description without BFCL's per-class preamble ("This tool belongs to ... Tool description: ")."""
    return description.split(TOOL_DESCRIPTION_MARK, 1)[-1].strip()


def load_bfcl_toolset(name: str, timeout: float = 5.0) -> Toolset:
    """The toolset `bfcl/A+B[:long_context]`: the classes' func docs, a BfclExecutor and sap's own c0 sampler."""
    classes, long_context = parse_bfcl_name(name)
    types = [backend_class(c) for c in classes]
    tools = []
    combinations: dict[str, list[dict[str, str]]] = {}  # tool -> the joint values its code accepts
    for cls_name, cls in zip(classes, types):
        by_tool = VALUE_FIELDS.get(cls_name, {})
        docs = load_bfcl_func_doc(data_dir() / "multi_turn_func_doc" / BFCL_CLASSES[cls_name][1])
        for spec in _shared_enums([_with_checked_values(_with_enums(s), getattr(cls, s.name, None)) for s in docs]):
            tools.append(spec.model_copy(update={
                "owner": cls_name, "description": _own_words(spec.description),
                "value_fields": {p: names for p, names in by_tool.get(spec.name, {}).items() if p in spec.properties}}))
            if combos := accepted_combinations(getattr(cls, spec.name, None)):
                combinations[spec.name] = combos
    return Toolset(
        name=name,
        description=f"BFCL multi-turn backends: {', '.join(classes)}" + (" (long context)" if long_context else ""),
        tools=tools,
        executor_factory=lambda: BfclExecutor(types, long_context=long_context, timeout=timeout),
        sample_config=lambda seed: sample_bfcl_config(classes, seed),
        extra={"bfcl_classes": classes, "long_context": long_context, "combinations": combinations,
               **({"scope": FolderScope()} if "GorillaFileSystem" in classes else {})},
    )
