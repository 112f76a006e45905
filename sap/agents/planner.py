"""Planner role: binds each argument of a call by its provenance tag; the rule implementation works by code."""
from __future__ import annotations

import datetime as dt
import functools
import json
import random
import re
from dataclasses import dataclass, field
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from sap.agents.items import (choose_items, config_objects, inherited, object_items, output_provenance,
                              source_objects)
from sap.agents.replies import SHOWN
from sap.model import ArgProvenance, Scope, Selector, Tag, ToolCall, ToolSpec, item_key
from sap.provenance.fields import Candidate, candidates, child_path, index_of, match_score, type_ok
from sap.provenance.generate import REFERENCE_DATE, announceable, c0_values, calendar, generate, is_birth_param
from sap.provenance.jsonpath import KEY_OF, PATH_TOKEN, PathError, holds_below, resolve
from sap.provenance.places import address_part, us_address
from sap.provenance.selectors import output_selector, stated_selector
from sap.text import QUOTED, error_names, error_quotes, words_of

_INDEX = re.compile(r"\[(\d+)\]")  # a list index in a path
_OPTIONAL_RATE = 0.25
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_WORD = re.compile(r"[a-z]{4,}")
_OPTIONS = re.compile(r"(?:supported|valid|allowed|one of|choose from|expected)[^\[]{0,40}\[([^\]]*)\]", re.I)
_ID = re.compile(r"(?:^|_)ids?$")
NO_OP = "changes nothing"  # words of a refusal of a write whose arguments equal the current state
_PERSON = re.compile(r"^(?:user|customer|account|member|client)_?ids?$|email", re.I)  # who the dialogue is about
_SECRET = re.compile(r"password|passcode|pin$|cvv|cvc|expir|security_code|secret")


def error_options(error: str | None) -> list[str]:
    """Alternatives an error message lists as valid (`supported: ['EUR', 'GBP']`)."""
    m = _OPTIONS.search(error or "")
    return [a or b for a, b in QUOTED.findall(m.group(1))] if m else []


@dataclass(frozen=True)
class HistoryCall:
    """A committed call visible to the planner, located by turn and call index."""

    turn: int
    index: int
    call: ToolCall


@dataclass(frozen=True)
class StatedValue:
    """A value the user stated in an earlier turn (as a new or configuration value)."""

    turn: int
    param: str
    value: Any


@dataclass
class PlanRequest:
    """Everything the planner may use to bind one call."""

    spec: ToolSpec
    tags: dict[str, Tag]
    turn: int
    index: int
    history: list[HistoryCall]
    stated: list[StatedValue]
    c0: dict[str, Any]
    rng: random.Random
    last_error: str | None = None
    failed_args: list[dict[str, Any]] = field(default_factory=list)
    upcoming: list[ToolSpec] = field(default_factory=list)  # the calls that follow in this turn
    virtual: list[StatedValue] = field(default_factory=list)  # values registered in earlier user turns (P_u)
    free: bool = False  # "no tags" ablation: no declared sources, the planner picks each argument's own
    samplers: Mapping[str, Callable[[random.Random, dict[str, Any]], Any]] = field(default_factory=dict)  # a
    # domain module's SAMPLERS: parameter (or `tool.parameter`, which wins) -> how users pick a new value of it
    sources: dict[str, tuple[int, int] | int] = field(default_factory=dict)  # where an argument must come from: an
    # earlier call (turn, call) for prev_output, an anchor turn for prev_user_msg (a RODS variant follows its seed)
    combinations: list[dict[str, Any]] = field(default_factory=list)  # joint values the tool's code accepts (BFCL's
    # estimate_distance knows only some pairs of zip codes): a new value fits the parameters bound before it
    scope: Scope | None = None  # where names resolve (a file system's current folder), as the toolset declares it
    key: str = ""  # the call's place in the plan (`plan_key`), by which a request ahead of it answered it
    answers: dict[str, Any] = field(default_factory=dict)  # the model's values for this call from the turn's request
    picks: dict[str, Any] = field(default_factory=dict)  # values chosen (by the model) among a source's ties: code
    # keeps each pick its ranking still ties, and binds the other arguments around it


@dataclass
class Binding:
    """The arguments to execute and where each value came from."""

    args_exec: dict[str, Any]
    args_prov: dict[str, ArgProvenance]
    virtual: list[StatedValue] = field(default_factory=list)  # new virtual-history entries this binding needs
    ties: dict[str, list[tuple[tuple[int, int] | None, Candidate]]] = field(default_factory=dict)  # per argument
    # bound from an earlier result or c0, the candidates its ranking left equal (more than one value), pick first


@dataclass(frozen=True)
class Ahead:
    """What a planner decided for a turn's calls in one go: per call (by its `PlanRequest.key`) the values of its
    open arguments, and the trajectory's narrative when it was asked for."""

    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    narrative: str | None = None


def plan_key(turn: int, action: list[str], index: int) -> str:
    """The key of call `index` of turn `turn`, whose tools are `action`: the turn, the tool and how many calls of
    that tool come before it in the turn (a prerequisite inserted ahead of it leaves the key as it was)."""
    tool = action[index]
    return f"{turn}:{tool}#{action[:index].count(tool)}"


@dataclass(frozen=True)
class NarrativeRequest:
    """What a trajectory's background story must fit: the environment, c0 and each turn's task phrases."""

    toolset: str
    c0: dict[str, Any]
    tasks: list[list[str]]


class Planner(Protocol):
    """Binds the arguments of one call (rule or LLM), and writes a trajectory's narrative."""

    def bind(self, req: PlanRequest) -> Binding:
        """Choose argument values honouring the tags, avoiding what failed before."""

    def narrate(self, req: NarrativeRequest) -> str:
        """A short story of who the user is and what they want, for the global message rewrite."""

    def ahead(self, reqs: list[PlanRequest], story: NarrativeRequest | None = None,
              later: list[PlanRequest] = ()) -> Ahead:
        """What can be decided for all calls of a turn at its start (`reqs`: each call as it would be bound now,
        less what `req.answers` decided before), the new values of the `later` turns' calls (bound as they would
        be now), and with `story` the trajectory's narrative; a planner without a model decides nothing ahead."""


def _common_prefix(a: str, b: str) -> int:
    """Length of the shared leading part of two JSON paths, counted in characters up to a separator."""
    n = 0
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            break
        if x in ".[":
            n = i
    return n


def done_calls(history: list[HistoryCall]) -> list[HistoryCall]:
    """The successful calls of a history, in dialogue order."""
    return [h for h in sorted(history, key=lambda h: (h.turn, h.index)) if h.call.ok]


@dataclass
class _CallContext:
    """What is known while binding one call: its words, the values and paths bound so far, failures."""

    req: PlanRequest
    words: frozenset[str]
    error_words: frozenset[str]
    bound: dict[str, Any] = field(default_factory=dict)
    sources: list[tuple[tuple[int, int] | None, str]] = field(default_factory=list)  # (history call or None=c0, path)
    virtual: list[StatedValue] = field(default_factory=list)
    params: list[str] = field(default_factory=list)  # the parameters this call binds
    address: dict[str, str] | None = None  # the one new postal address this call's address parts are cut from
    item_sources: list[Any] = field(default_factory=list)  # the objects an array argument's items were made of
    people: frozenset[str] | None = None  # `dialogue_identifiers` of the history, once asked for
    picked_ids: dict[tuple[Any, int], frozenset[str]] = field(default_factory=dict)  # `tied`'s, per document
    ties: dict[str, list[tuple[tuple[int, int] | None, Candidate]]] = field(default_factory=dict)  # Binding.ties

    def failed(self, name: str) -> list[Any]:
        """Values of `name` in the failed attempts of this call, values the last error quoted, and the value bound to
        its twin (`x` for `new_x` and `new_x` for `x`: nothing is exchanged or replaced by itself)."""
        named = error_quotes(self.req.last_error) - set(error_options(self.req.last_error))
        twin = name[4:] if name.startswith("new_") else f"new_{name}"
        same = [self.bound[twin]] if twin in self.bound else []
        tried = [a[name] for a in self.req.failed_args if name in a]
        if self.no_op():  # a write that changed nothing: first another target for the same values, then new values
            first = len(self.req.failed_args) == 1
            tried = (tried if first else []) if _ID.search(name) else ([] if first else tried)
        return tried + sorted(named) + same

    def blames(self, name: str) -> bool:
        """Whether the last error refuses the thing an id parameter names, and nothing else it quotes: "Non-delivered
        order cannot be exchanged" blames `order_id`, "item(s) ['1'] are not in order '#W2'" the items it quotes."""
        return _names_thing_of(self.req.last_error, name) and not error_quotes(self.req.last_error)

    def retarget(self, name: str) -> Any:
        """After a write changed nothing a second time, the id of its last attempt (the target was right, the
        values were not: they are new now), if the call sets something besides ids; else None."""
        if not (self.no_op() and _ID.search(name) and len(self.req.failed_args) > 1):
            return None
        if all(_ID.search(p) for p in self.params):
            return None
        return self.req.failed_args[-1].get(name)

    def said(self) -> list[tuple[int, str, Any]]:
        """(turn, parameter, value) of every value stated, or registered to be stated, before this turn."""
        req = self.req
        return [(s.turn, s.param, s.value) for s in [*req.stated, *req.virtual, *self.virtual] if s.turn < req.turn]

    def documents(self) -> list[Any]:
        """c0 and the results of the earlier successful calls: what the user and the dialogue know."""
        return [self.req.c0] + [h.call.result for h in self.req.history if h.call.ok]

    def no_op(self) -> bool:
        """Whether the last attempt was refused as a write that changes nothing."""
        return NO_OP in (self.req.last_error or "")

    @functools.cached_property
    def searched(self) -> list[Any]:
        """The collections of c0 a search tool's name names (`search_flights`: c0's `flights`), or none for a tool
        whose name opens with no search verb."""
        words = words_of(self.req.spec.name).lower().split()
        if not words or words[0] not in SEARCH_VERBS:
            return []
        return [v for k, v in _nested_items(self.req.c0, depth=3) if isinstance(v, list) and k.lower() in words[1:]]

    def entity_values(self, name: str) -> set[str] | None:
        """The values `name` may take so that it belongs to the same entity as its partners in this call (JSON
        texts), or None when no entity ties it. Partners are the other parameters found together with it in one
        object of c0 or an earlier result; a read ties all of them, a write only credentials to what they
        unlock (a write's other values may be new). A tool read-only by its doc's flag finds its partners under
        any key that answers to them. A search of a domain that declares nothing (`search_flights`: its name's
        verb and noun) filters the collection of c0 its name names, and finds something only where one item holds
        every filter: its partners are found only in that collection's items, by their names as they are (results
        echo what a tool was asked, and a result's object takes in its sub-objects' keys: a flight's
        `origin.location_id`). A flight search's origin, destination and date are one flight's; a hotel search's
        dates are no hotel's field (nor are they a c0 booking's to copy); a weather lookup or a fare quote
        (`get_flight_cost`, whose route a c0 booking also holds) is no search and stays untied."""
        searched = self.searched
        by_name = self.req.spec.read_only is None and bool(searched)
        docs = searched if by_name else self.documents()
        allowed: set[str] | None = None
        for partner in self.params:
            tied = self.req.spec.read_only or by_name or _SECRET.search(name) or _SECRET.search(partner) or (
                address_part(name) and address_part(partner))  # one address is never cut from two
            if partner == name or not tied:
                continue
            key = _exact_key if by_name else _key_for
            objs = [(e[a], e[b]) for doc in docs for e in index_of(doc).entities
                    if (a := key(name, e)) is not None and (b := key(partner, e)) is not None]
            if not objs:
                continue
            fits = {json.dumps(v, sort_keys=True) for v, w in objs if partner not in self.bound or w == self.bound[partner]}
            allowed = fits if allowed is None else allowed & fits
        return allowed

    def known_siblings(self, value: Any) -> frozenset[str] | None:
        """What the dialogue knows beside `value` now: what the newest of c0 and the earlier results that holds it in
        its own object says there (an order id listed bare in a profile has its status in the user's orders; once
        a result shows the order cancelled, c0's "pending" is stale), else what any of them says beside it. None
        if none says anything."""
        if not isinstance(value, str):
            return None
        docs = self.documents()
        own = next((found for doc in reversed(docs) if (found := index_of(doc).own_siblings_of.get(value))), None)
        if own is not None:
            return own
        return frozenset().union(*(index_of(d).siblings_of.get(value, frozenset()) for d in docs)) or None

    def siblings(self, cand: Candidate, doc: tuple[int, int] | None) -> frozenset[str]:
        """What the dialogue knows beside a candidate value now: for a value read from c0, `known_siblings` (c0's
        own when nothing else says anything); for one from a result, that result's and `known_siblings`."""
        known = self.known_siblings(cand.value)
        return cand.siblings if known is None else known if doc is None else cand.siblings | known

    def rank(self, cand: Candidate, doc: tuple[int, int] | None,
             bad: frozenset[str]) -> tuple[int, int, int, int, int, int]:
        """Preference: a name leading to what the last error could not find (`toward`); match score; an element the
        user has seen (an earlier turn's reply names only the first few of a listing: "the ninth file there" would
        point at one it never showed); sibling values the dialogue knows beside it (`siblings`) that the tool or
        the last error asks for (pending, hotel) and not those that came with failed values (delivered, cancelled);
        the ids it shares with this call's other picks (`tied`: the new item a variant of the old item's product);
        nearness to the other picks of this call."""
        seen = doc is None or doc[0] == self.req.turn or all(int(i) < SHOWN for i in _INDEX.findall(cand.path))
        siblings = self.siblings(cand, doc)
        hint = len(siblings & self.words) + len(siblings & (self.error_words - bad)) - 2 * len(siblings & bad)
        near = max((_common_prefix(cand.path, p) for d, p in self.sources if d == doc), default=0)
        return self.toward(cand, doc), cand.score, int(seen), hint, self.tied(cand, doc), near

    @functools.cached_property
    def done(self) -> list[HistoryCall]:
        """The successful calls before this one, in dialogue order (once per call: `here` asks per candidate)."""
        return done_calls(self.req.history)

    @functools.cached_property
    def folder(self) -> tuple[str, ...] | None:
        """The current folder of the toolset's scope, or None without a scope."""
        return None if self.req.scope is None else self.req.scope.current([h.call for h in self.done])

    def here(self, cand: Candidate, doc: tuple[int, int] | None) -> bool:
        """False for a name of another folder than the current one (the toolset's scope: c0's tree says where an
        entry is, a listing lists the folder current when it ran), else True."""
        scope = self.req.scope
        if scope is None:
            return True
        if doc is None:
            folder = scope.folder_of(cand.path)
        else:
            at = next((k for k, h in enumerate(self.done) if (h.turn, h.index) == tuple(doc)), None)
            folder = scope.current([h.call for h in self.done[:at]]) if at is not None and \
                scope.listed_in(self.done[at].call.name) else None
        return folder is None or folder == self.folder

    def toward(self, cand: Candidate, doc: tuple[int, int] | None) -> int:
        """In a toolset with a scope, 1 for a key of c0 whose subtree holds a name the last error is about (the
        folder a file it could not find is in), else 0."""
        if self.req.scope is None or doc is not None:
            return 0
        return int(holds_below(self.req.c0, cand.path, error_names(self.req.last_error)))

    def document(self, doc: tuple[int, int] | None) -> Any:
        """c0 (None) or the result of the earlier call at (turn, index)."""
        if doc is None:
            return self.req.c0
        return next((h.call.result for h in self.req.history if (h.turn, h.index) == tuple(doc)), None)

    def tied(self, cand: Candidate, doc: tuple[int, int] | None) -> int:
        """1 if the objects around `cand` (`around`: a variant's product, an order item's product and order) share
        an id with those around this call's other picks from other documents, the picked values themselves left
        out, else 0: one product ties the item swapped out of an order to the variant swapped in."""
        if not self.sources:
            return 0
        key = (doc, len(self.sources))  # the other picks' ids: the same for every candidate of one document
        if key not in self.picked_ids:
            self.picked_ids[key] = frozenset().union(*(self.around(d, p, resolve_or_none(self.document(d), p))
                                                       for d, p in self.sources if d != doc))
        mine = self.around(doc, cand.path, cand.value)
        return int(bool(mine & self.picked_ids[key] - {str(v) for v in self.bound.values()} - {str(cand.value)}))

    def around(self, doc: tuple[int, int] | None, path: str, value: Any) -> frozenset[str]:
        """The ids around a value (or a list's values) in its document: those on its path (`context_ids`) and, in an
        earlier result, those of the objects having it as their own id (an item id listed bare in a fulfilment is
        also the id of an order item with a product)."""
        body = self.document(doc)
        values = {json.dumps(v) for v in (value if isinstance(value, list) else [value])
                  if isinstance(v, (str, int)) and not isinstance(v, bool)}
        own = [e for e in index_of(body).entities if any(_ID_KEY.search(k) and json.dumps(v) in values
                                                         for k, v in e.items())] if doc is not None else []
        return context_ids(body, path).union(*(_own_ids(e) for e in own))


_ID_KEY = re.compile(r"(?:^|_)id$")  # a field holding one thing's id


def same_value(a: Any, b: Any) -> bool:
    """Whether two JSON values are one value (1 is not True, "1" is not 1)."""
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def _own_ids(obj: dict[str, Any]) -> set[str]:
    """The values (as text) of an object's own id fields."""
    return {str(v) for k, v in obj.items() if _ID_KEY.search(k) and isinstance(v, (str, int))
            and not isinstance(v, bool)}


def resolve_or_none(doc: Any, path: str) -> Any:
    """The value at `path` in `doc`, or None where it does not resolve."""
    try:
        return resolve(doc, path)
    except PathError:
        return None


def context_ids(doc: Any, path: str) -> frozenset[str]:
    """The ids (as text) that the objects on the way to `path` in `doc` hold in their id fields (`product_id` of the
    product whose variant it is, `order_id` and `product_id` beside an order's item), the root's included."""
    out: set[str] = set()
    cur = doc
    for m in PATH_TOKEN.finditer(path, 1):
        if isinstance(cur, dict):
            out |= _own_ids(cur)
        key, idx = (json.loads(m.group(3)) if m.group(3) else m.group(1)), m.group(2)
        try:
            cur = cur[int(idx)] if idx is not None else cur[key]
        except (KeyError, IndexError, TypeError, ValueError):
            break
    return frozenset(out)


def _identifiers(doc: Any, out: set[str]) -> None:
    """Add to `out` the string values of `doc`'s fields that name a person or account (`_PERSON`), at any depth."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if isinstance(value, str) and value and _PERSON.search(key):
                out.add(value)
            else:
                _identifiers(value, out)
    elif isinstance(doc, list):
        for value in doc:
            _identifiers(value, out)


def dialogue_identifiers(history: list[HistoryCall]) -> frozenset[str]:
    """The user ids and emails the dialogue has used or been shown: those of its successful calls' arguments and
    results (the logged-in customer's user id and email)."""
    out: set[str] = set()
    for h in history:
        if h.call.ok:
            _identifiers(h.call.args_exec, out)
            _identifiers(h.call.result, out)
    return frozenset(out)


def tied_to(doc: Any, path: str, identifiers: frozenset[str]) -> bool:
    """Whether an object enclosing the value at `path` in `doc` (below the root) holds one of `identifiers` as a
    direct field: an order whose user_id is the dialogue's customer, a payment method inside that customer."""
    plain = path[:-len(KEY_OF)] if path.endswith(KEY_OF) else path
    ends = [m.end() for m in PATH_TOKEN.finditer(plain, 1)][:-1]
    for end in ends:
        try:
            obj = resolve(doc, plain[:end])
        except PathError:
            continue
        if isinstance(obj, dict) and any(isinstance(v, str) and v in identifiers for v in obj.values()):
            return True
    return False


def _joint_options(name: str, combinations: list[dict[str, Any]], bound: dict[str, Any]) -> list[Any]:
    """The values of `name` in the accepted combinations that agree with every parameter bound so far."""
    out: list[Any] = []
    for c in combinations:
        if name in c and c[name] not in out and all(bound[k] == v for k, v in c.items() if k != name and k in bound):
            out.append(c[name])
    return out


def _beyond_bound(name: str, schema: dict[str, Any], bound: dict[str, Any]) -> dict[str, Any]:
    """A `max_x` (`min_x`) parameter's schema bounded below (above) by the `min_x` (`max_x`) already bound: a
    range whose ends are the wrong way round finds nothing."""
    low, _, rest = name.partition("_")
    other = {"max": "min_", "min": "max_"}.get(low, "") + rest
    value = bound.get(other) if rest else None
    if schema.get("type") not in ("number", "integer") or isinstance(value, bool) \
            or not isinstance(value, (int, float)):
        return schema
    return {**schema, "minimum": value} if low == "max" else {**schema, "maximum": value}


SEARCH_VERBS = ("search", "find", "lookup", "query", "filter")  # a tool that filters a collection by its arguments


def _nested_items(node: Any, depth: int) -> Iterator[tuple[str, Any]]:
    """The (key, value) pairs of a JSON object and of the objects inside it, down to `depth` levels of objects."""
    if depth <= 0 or not isinstance(node, dict):
        return
    for key, value in node.items():
        yield key, value
        yield from _nested_items(value, depth - 1)


def _exact_key(param: str, entity: dict[str, Any]) -> str | None:
    """`param` itself if `entity` holds it, else None."""
    return param if param in entity else None


def _key_for(param: str, entity: dict[str, Any]) -> str | None:
    """The key of `entity` that answers to `param` (exact first, then by match score), if any."""
    if param in entity:
        return param
    return next((k for k in entity if match_score(param, (k,))), None)


def referable(pool: list[tuple[tuple[int, int], Candidate]],
            history: list[HistoryCall]) -> list[tuple[tuple[int, int], Candidate]]:
    """The candidates no newer result of the same tool contradicts: of several results of one tool holding
    different values at a path, only the most recent one can be referred to ("the most recent booking")."""
    by_call = {(h.turn, h.index): h.call for h in history}
    keep = []
    for doc, cand in pool:
        tool = by_call[doc].name
        newer = [c for key, c in by_call.items() if key > doc and c.ok and c.name == tool]
        if not any(_differs(c.result, cand.path, by_call[doc].result) for c in newer):
            keep.append((doc, cand))
    return keep


def _differs(result: Any, path: str, source: Any) -> bool:
    """Whether `result` holds a different value than `source` at `path`; absent counts as different (another
    product's lookup has no such variant: "the variant priced 98.89" would not say which lookup is meant)."""
    try:
        return resolve(result, path) != resolve(source, path)
    except PathError:
        return True


def reference_selector(req: PlanRequest, turn: int, index: int, path: str) -> Selector | None:
    """The selector of the value at `path` in the result of history call (turn, index), as the code check
    expects it: against its listing, the earlier results of the same tool and what the results since changed."""
    by_call = {(h.turn, h.index): h.call for h in req.history}
    src = by_call[(turn, index)]
    earlier = [c.result for key, c in by_call.items() if key < (turn, index) and c.ok and c.name == src.name]
    later = [c.result for key, c in sorted(by_call.items()) if key > (turn, index) and c.ok]
    return output_selector(src.result, path, resolve(src.result, path), turn == req.turn, earlier, later)


def _names_thing_of(error: str | None, name: str) -> bool:
    """Whether `error` names the thing an id parameter stands for ("Booking not found" names `booking_id`'s)."""
    head = name[:-3].replace("_", " ") if name.endswith("_id") else ""
    return bool(head) and re.search(rf"\b{re.escape(head)}\b", (error or "").lower()) is not None


def _error_names_id(req: PlanRequest, name: str) -> bool:
    """Whether `name` is an optional id parameter whose thing the last error names ("Booking not found" names
    `booking_id`): left out, the call cannot succeed, and an earlier result may hold it."""
    return name not in req.spec.required and _names_thing_of(req.last_error, name)


_FILE_NAME = re.compile(r"[^/\\]\.[A-Za-z0-9]{1,5}$")  # a name with an extension: a file's ("notes.txt")


def _of_its_kind(name: str, pool: list[tuple[Any, Candidate]], strict: bool = False) -> list[tuple[Any, Candidate]]:
    """The candidates that name what the parameter names, when some do (`strict`: only those, even none, where a
    scope says names are a folder's entries): a file parameter's with an extension, a folder or directory
    parameter's without one (a listing gives both kinds of entry by name alone)."""
    words = set(_WORD.findall(name.lower().replace("_", " ")))
    kind = "file" if words & {"file", "filename"} else "folder" if words & {"folder", "dir", "directory"} else None
    if kind is None:
        return pool
    fits = [p for p in pool if isinstance(p[1].value, str) and bool(_FILE_NAME.search(p[1].value)) == (kind == "file")]
    return fits if strict else fits or pool


class RulePlanner:
    """Binds by code: P_o from earlier results, P_i from c0, P_u from stated values, P_c by generators."""

    def __init__(self) -> None:
        self._date_cache: tuple[dict[str, Any] | None, tuple[str, str] | None] = (None, None)

    def bind(self, req: PlanRequest) -> Binding:
        """Bind required arguments by tag, plus a few optional ones, with fallbacks recorded as P_f."""
        text = " ".join(f"{t.name.replace('_', ' ')} {t.description}" for t in [req.spec, *req.upcoming])
        words = frozenset(_WORD.findall(text.lower()))
        ctx = _CallContext(req, words, frozenset(_WORD.findall((req.last_error or "").lower())))
        ctx.params = self._params(req)
        prov: dict[str, ArgProvenance] = {}
        wholes = [n for n in ctx.params if object_items(req.spec.properties.get(n, {}))]
        # whole objects first (their partners follow); a `new_x` before its `x` (the new item fixes the product the
        # old item is of, among the products the dialogue looked up)
        for name in sorted(ctx.params, key=lambda n: (n not in wholes, f"new_{n}" in ctx.params)):
            schema = req.spec.properties.get(name, {})
            items = None if req.free or req.spec.read_only else self._items(name, schema, ctx)
            if items is not None:
                ctx.bound[name], parts = items
                prov.update(parts)
                continue
            if req.free and ctx.no_op() and not _ID.search(name):  # a write that changed nothing: what it sets is new
                ctx.bound[name], prov[name] = self._create(name, schema, ctx), ArgProvenance(tag=Tag.self_create)
                continue
            partner = self._beside_item(name, schema, ctx)
            if partner is not None:
                ctx.bound[name], prov[name] = partner
                continue
            if req.free:
                value, source = self._undeclared(name, schema, ctx)
            else:
                declared = req.tags.get(name, Tag.prev_output if _error_names_id(req, name) else Tag.self_create)
                value, source = self._by_tag(declared, name, schema, ctx)
                if source is None:
                    value, source = self._fallback(declared, name, schema, ctx)
            ctx.bound[name], prov[name] = value, source
        ctx.bound = {name: ctx.bound[name] for name in ctx.params}
        self._cohere_address(ctx, prov)
        ties = {n: t for n, t in ctx.ties.items() if n in prov and prov[n].tag in (Tag.prev_output, Tag.initial_state)}
        return Binding(ctx.bound, prov, ctx.virtual, ties)

    def ahead(self, reqs: list[PlanRequest], story: NarrativeRequest | None = None,
              later: list[PlanRequest] = ()) -> Ahead:
        """Nothing: code binds each call when it comes (and writes the narrative when the messages are written)."""
        return Ahead()

    def narrate(self, req: NarrativeRequest) -> str:
        """A template story listing the turns' tasks in order."""
        steps = "; then ".join(" and ".join(t) for t in req.tasks if t)
        return f"A user of the {req.toolset} service wants to get a few things done, in order: {steps}."

    def _params(self, req: PlanRequest) -> list[str]:
        """Required parameters, then optional ones worth filling: flags the last error named, a few enums/flags."""
        params = list(req.spec.required)
        error = (req.last_error or "").lower()
        for name, schema in req.spec.properties.items():
            if name in params:
                continue
            if schema.get("type") == "boolean" and name.lower() in error:
                params.append(name)
            elif _error_names_id(req, name) and any(candidates(name, schema, h.call.result, req.spec.aliases(name))
                                                    for h in req.history if h.call.ok):
                params.append(name)
            elif ("enum" in schema or schema.get("type") == "boolean") and req.rng.random() < _OPTIONAL_RATE:
                params.append(name)
        return params

    def _by_tag(self, tag: Tag, name: str, schema: dict[str, Any], ctx: _CallContext) -> tuple[Any, ArgProvenance | None]:
        """Bind from a source; (None, None) if it has nothing usable."""
        if tag == Tag.prev_output:
            return self._from_history(name, schema, ctx)
        if tag == Tag.initial_state:
            return self._from_config(name, schema, ctx)
        if tag == Tag.prev_user_msg:
            return self._from_stated(name, schema, ctx)
        return self._create(name, schema, ctx), ArgProvenance(tag=Tag.self_create)

    def _items(self, name: str, schema: dict[str, Any], ctx: _CallContext) -> tuple[list[dict[str, Any]],
                                                                                  dict[str, ArgProvenance]] | None:
        """An array of whole objects built item by item from objects of earlier results, each field with its own
        provenance (`item_key`): found in the object, else the producing call's own argument (a search's date),
        else a new value the user states. When no earlier result holds such objects and the tool declares item
        aliases, one object of c0 (`config_objects`) not tried in a failed attempt; None when there is none."""
        shape = object_items(schema)
        if shape is None:
            return None
        props, required = shape
        req = ctx.req
        by_doc = {(h.turn, h.index): h.call for h in req.history}
        aliases = {f: tuple(req.spec.value_fields.get(f"{name}.{f}", ())) for f in required}
        pool = source_objects(list(by_doc.items()), props, required, aliases)
        if not pool and any(aliases.values()):
            tried = [item for args in req.failed_args for item in args.get(name) or [] if isinstance(item, dict)]
            pool = [o for o in config_objects(req.c0, props, required, aliases)
                    if not any(item.get(f) == v for item in tried for f, (_, v) in o.fields.items())]
        if not pool:
            return None
        said = ctx.said()
        items, prov = [], {}
        chosen = choose_items(pool, req.rng) if pool[0].doc is not None else [req.rng.choice(pool)]  # one of c0's
        ctx.item_sources = chosen
        for i, obj in enumerate(chosen):
            item = {}
            for field_name in required:
                key = item_key(name, i, field_name)
                if field_name in obj.fields:
                    value, p = output_provenance(obj, field_name)
                    if obj.doc is not None:
                        p = p.model_copy(update={"selector": reference_selector(req, p.turn, p.call, p.path)})
                else:
                    got = None if obj.doc is None else inherited(by_doc[obj.doc], field_name, obj.doc[0], req.turn)
                    value, p = got or (self._create(field_name, props[field_name], ctx), ArgProvenance(tag=Tag.self_create))
                    if p.tag == Tag.prev_user_msg:
                        p = p.model_copy(update={"selector": stated_selector(key, value, said)})
                item[field_name], prov[key] = value, p
            items.append(item)
        return items, prov

    def _beside_item(self, name: str, schema: dict[str, Any], ctx: _CallContext) -> tuple[Any, ArgProvenance] | None:
        """An argument that the one object an array argument was made of also holds (a flight's origin and
        destination beside its number), when declared to come from an earlier result: taken from that object, so
        the call describes one thing. One the object lacks but the call that produced it was given (the path of
        the file whose text an edit replaces) is that call's argument, and one an object of c0 holds (that file's
        own `path`) is read there, whatever the declared source."""
        if len(ctx.item_sources) != 1:
            return None
        obj = ctx.item_sources[0]
        if obj.doc is None:
            if name not in obj.scalars or not type_ok(obj.scalars[name], schema):
                return None
            return obj.scalars[name], ArgProvenance(tag=Tag.initial_state, path=f"{obj.path}.{name}")
        if name not in obj.scalars:
            producer = next((h.call for h in ctx.req.history if (h.turn, h.index) == obj.doc), None)
            got = None if producer is None else inherited(producer, name, obj.doc[0], ctx.req.turn)
            if got is None or not type_ok(got[0], schema):
                return None
            if got[1].tag == Tag.prev_user_msg:
                got = got[0], got[1].model_copy(update={"selector": stated_selector(name, got[0], ctx.said())})
            return got
        if ctx.req.tags.get(name) != Tag.prev_output or not type_ok(obj.scalars[name], schema):
            return None
        path = f"{obj.path}.{name}"
        return obj.scalars[name], ArgProvenance(tag=Tag.prev_output, turn=obj.doc[0], call=obj.doc[1], path=path,
                                                selector=reference_selector(ctx.req, obj.doc[0], obj.doc[1], path))

    def _undeclared(self, name: str, schema: dict[str, Any], ctx: _CallContext) -> tuple[Any, ArgProvenance]:
        """Without declared sources ("no tags"): what the dialogue's user knows from c0 if a value there fits, else
        a new value; nothing tells the planner which earlier results or statements feed the argument."""
        value, src = self._from_config(name, schema, ctx)
        return (value, src) if src is not None else (self._create(name, schema, ctx), ArgProvenance(tag=Tag.self_create))

    def _fallback(self, declared: Tag, name: str, schema: dict[str, Any], ctx: _CallContext) -> tuple[Any, ArgProvenance]:
        """A value of c0, else a new value, recorded as a fallback from the declared tag (SAP allows P_f only from
        P_i or P_c sources)."""
        if declared != Tag.initial_state:
            value, src = self._from_config(name, schema, ctx)
            if src is not None:
                return value, src.model_copy(update={"tag": Tag.fallback, "fallback_from": declared})
        return self._create(name, schema, ctx), ArgProvenance(tag=Tag.fallback, fallback_from=declared)

    def _choose(self, name: str, pool: list[tuple[tuple[int, int] | None, Candidate]],
                ctx: _CallContext) -> tuple[tuple[int, int] | None, Candidate] | None:
        """The best-ranked candidate not already failed, never one used by another argument of this call or by
        this tool's twin call earlier in the turn (no file is compared with itself, no lookup repeated as is).

        A value the last error quoted (the culprit it names) is never chosen again; if nothing else is left
        the source is unusable (None) and the caller falls back to another source."""
        failed = ctx.failed(name)
        # what came with the failed values and the error names (delivered), never what the tool asks for (pending)
        bad = frozenset().union(*(ctx.siblings(c, d) for d, c in pool if c.value in failed)) & ctx.error_words - ctx.words
        culprits = error_quotes(ctx.req.last_error) - set(error_options(ctx.req.last_error))
        pool = [p for p in pool if not (isinstance(p[1].value, str) and p[1].value in culprits)]
        taken = list(ctx.bound.values()) + [h.call.args_exec[name] for h in ctx.req.history
                                            if h.turn == ctx.req.turn and h.call.name == ctx.req.spec.name
                                            and name in h.call.args_exec]
        pool = [p for p in pool if p[1].value not in taken]  # diff of a file with itself, a twin lookup repeated
        fresh = [p for p in pool if p[1].value not in failed]
        strict = (ctx.no_op() and not _ID.search(name)  # a value that left the state as it was is not used again
                  or ctx.blames(name))  # nor the order an error refuses ("Non-delivered order cannot be exchanged")
        pool = fresh or ([] if strict else pool)
        pool = _of_its_kind(name, pool, strict=ctx.req.scope is not None)
        pool = [p for p in pool if ctx.here(p[1], p[0])]  # a name of another folder is not usable from this one
        entity = ctx.entity_values(name)
        if entity is not None:  # a value of another entity than its partners' is unusable here
            pool = [p for p in pool if json.dumps(p[1].value, sort_keys=True) in entity]
        if not pool:
            return None
        target = ctx.retarget(name)
        if target is not None and (kept := [p for p in pool if p[1].value == target]):
            return kept[0]
        ranks = [ctx.rank(c, doc, bad) for doc, c in pool]
        best = max(ranks)
        top = [p for p, r in zip(pool, ranks) if r == best]
        picked = [p for p in top if name in ctx.req.picks and same_value(p[1].value, ctx.req.picks[name])]
        if len({json.dumps(c.value, sort_keys=True, default=str) for _, c in top}) > 1:
            ctx.ties[name] = top
        newest = max((d for d, _ in top), key=lambda d: (-1, -1) if d is None else d)
        if ctx.req.rng.random() < 0.6:
            top = [p for p in top if p[0] == newest]
        doc, cand = picked[-1] if picked else ctx.req.rng.choice(top)
        ctx.sources.append((doc, cand.path))
        return doc, cand

    def _from_history(self, name: str, schema: dict[str, Any], ctx: _CallContext) -> tuple[Any, ArgProvenance | None]:
        """A field of an earlier successful result, preferring this turn's calls, then the newest producer."""
        want = ctx.req.sources.get(name)
        pool = [((h.turn, h.index), c) for h in ctx.req.history if h.call.ok
                and (not isinstance(want, tuple) or (h.turn, h.index) == tuple(want))
                for c in candidates(name, schema, h.call.result, ctx.req.spec.aliases(name))]
        failed = ctx.failed(name)
        this_turn = {h.index: h.call.name for h in ctx.req.history if h.turn == ctx.req.turn}
        same_turn = [p for p in pool if p[0][0] == ctx.req.turn and p[1].value not in failed
                     and this_turn.get(p[0][1]) != ctx.req.spec.name]  # a repeated lookup runs beside its twin
        pool = [p for p in pool if not (p[0][0] == ctx.req.turn and this_turn.get(p[0][1]) == ctx.req.spec.name)]
        picked = self._choose(name, referable(same_turn, ctx.req.history) or referable(pool, ctx.req.history), ctx)
        if picked is None:
            return None, None
        (turn, index), cand = picked
        return cand.value, ArgProvenance(tag=Tag.prev_output, turn=turn, call=index, path=cand.path,
                                         selector=reference_selector(ctx.req, turn, index, cand.path))

    def _from_config(self, name: str, schema: dict[str, Any], ctx: _CallContext) -> tuple[Any, ArgProvenance | None]:
        """A value of the initial configuration c0 that the dialogue's user knows: c0 may hold more than the user
        (the store's c0 is the whole shop, every customer's orders), so once the dialogue has named someone (a
        login, a user id in a result), only values in objects carrying its user id or email are taken, when any
        fits (`dialogue_identifiers`, `tied_to`)."""
        found = candidates(name, schema, ctx.req.c0, ctx.req.spec.aliases(name))
        if ctx.people is None:
            ctx.people = dialogue_identifiers(ctx.req.history)
        own = ctx.people
        tied = [c for c in found if tied_to(ctx.req.c0, c.path, own)] if own else []
        pool = [(None, c) for c in tied or found]
        picked = self._choose(name, pool, ctx)
        if picked is None:
            return None, None
        return picked[1].value, ArgProvenance(tag=Tag.initial_state, path=picked[1].path)

    def _from_stated(self, name: str, schema: dict[str, Any], ctx: _CallContext) -> tuple[Any, ArgProvenance | None]:
        """A value the user stated in an earlier turn: one really stated there (usually), else remap-bind-restore.

        Remap-bind-restore binds a fresh value as if self_create, picks an earlier anchor turn that does not
        already anchor a different value for this parameter, and registers (param, value) there in the
        virtual history, so the messenger states it in that turn and the closure check can verify it. Only a
        name-like value is announced ahead (a file, a contact, a symbol): a flag, a number, an enum's pick or one
        part of an address said turns before its use ("the lock setting I'll want later is true") is no way
        people talk, so such a parameter with nothing stated before has no usable source (a fallback).
        """
        req = ctx.req
        earlier = [s for s in [*req.stated, *req.virtual, *ctx.virtual] if s.turn < req.turn]
        failed = ctx.failed(name)
        want = req.sources.get(name)
        found = [s for s in earlier if match_score(name, (s.param,)) and type_ok(s.value, schema)
                 and s.value not in failed and (not isinstance(want, int) or s.turn == want)]
        said = [(s.turn, s.param, s.value) for s in earlier]
        if found and req.rng.random() < 0.6:
            s = req.rng.choice(found)
            return s.value, ArgProvenance(tag=Tag.prev_user_msg, turn=s.turn,
                                          selector=stated_selector(name, s.value, said))
        if req.turn < 1 or not announceable(name, schema):
            return None, None
        value = self._create(name, schema, ctx)
        again = [s for s in found if same_value(s.value, value)]
        if again:  # the user gave this value before: they refer to it, they do not announce it a second time
            return value, ArgProvenance(tag=Tag.prev_user_msg, turn=again[-1].turn,
                                        selector=stated_selector(name, value, said))
        busy = {s.turn for s in earlier if s.param == name and s.value != value}
        # a value stated between an earlier reference and its use would make that reference ambiguous
        used = max((h.turn for h in req.history for p, a in h.call.args_prov.items()
                    if a.effective_tag() == Tag.prev_user_msg and match_score(p, (name,))), default=0)
        anchors = [k for k in range(used, req.turn) if k not in busy and (not isinstance(want, int) or k == want)]
        if not anchors:
            return None, None
        anchor = req.rng.choice(anchors)
        ctx.virtual.append(StatedValue(anchor, name, value))
        return value, ArgProvenance(tag=Tag.prev_user_msg, turn=anchor,
                                    selector=stated_selector(name, value, [*said, (anchor, name, value)]))

    def _create(self, name: str, schema: dict[str, Any], ctx: _CallContext) -> Any:
        """A new value: dates inside the configuration's calendar and after dates bound before; else generators."""
        failed = ctx.failed(name)
        options = [o for o in error_options(ctx.req.last_error) if type_ok(o, schema) and o not in failed]
        if not options and schema.get("enum"):
            options = [o for o in schema["enum"] if o not in failed]
        joint = _joint_options(name, ctx.req.combinations, ctx.bound)
        if joint:
            options = [o for o in options if o in joint] or [o for o in joint if o not in failed] or joint
        if options:
            return ctx.req.rng.choice(options)
        sampler = ctx.req.samplers.get(f"{ctx.req.spec.name}.{name}") or ctx.req.samplers.get(name)
        if sampler is not None:  # the domain's own way (a search phrase from the books c0 holds)
            for _ in range(6):
                value = sampler(ctx.req.rng, ctx.req.c0)
                if value not in failed and value not in ctx.bound.values():
                    break
            return value
        schema = _beyond_bound(name, schema, ctx.bound)
        part = address_part(name)
        if part and schema.get("type", "string") == "string" and sum(map(bool, map(address_part, ctx.params))) > 1:
            return self._address(ctx)[part]
        for _ in range(6):
            value = generate(name, schema, ctx.req.rng, ctx.req.c0, reuse_existing=ctx.req.spec.read_only)
            if isinstance(value, str) and _ISO_DATE.match(value) and not is_birth_param(name):
                value = self._date(ctx)
            if value not in failed and value not in ctx.bound.values():
                return value
        return value

    def _cohere_address(self, ctx: _CallContext, prov: dict[str, ArgProvenance]) -> None:
        """Address parts that are not one place (a street from one order, a city the user stated, a new ZIP code):
        the new and fallback parts are bound again, cut from one new address around the parts whose declared source
        stands (a stated city, a state read from c0), so the call's sources, and with them its edges, stay."""
        parts = [p for p in ctx.params if address_part(p) and isinstance(ctx.bound[p], str)
                 and not ctx.req.spec.properties.get(p, {}).get("enum")]  # a closed set names no new place
        if len(parts) < 2 or self._one_address(ctx, parts):
            return
        free = [p for p in parts if prov[p].tag in (Tag.self_create, Tag.fallback)]
        if not free or self._address_of_source(ctx, prov, parts):
            return
        ctx.address = None
        ctx.bound = {k: v for k, v in ctx.bound.items() if k not in free}
        address = self._address(ctx)
        for name in free:
            ctx.bound[name] = address[address_part(name)]
            if prov[name].tag == Tag.fallback:  # a new value: no c0 path any more
                prov[name] = ArgProvenance(tag=Tag.fallback, fallback_from=prov[name].fallback_from)
        ctx.bound = {name: ctx.bound[name] for name in ctx.params}

    def _address_of_source(self, ctx: _CallContext, prov: dict[str, ArgProvenance], parts: list[str]) -> bool:
        """Whether the parts could all be bound from the one address object a part read from c0 or an earlier
        result sits in (a street from the order's address: its city, state and ZIP too), with that part's source
        kind and their own paths; done if so."""
        for anchor in parts:
            src = prov[anchor]
            if src.tag not in (Tag.prev_output, Tag.initial_state) or not src.path or src.path.endswith(KEY_OF):
                continue
            doc = ctx.req.c0 if src.tag == Tag.initial_state else next(
                (h.call.result for h in ctx.req.history if (h.turn, h.index) == (src.turn, src.call)), None)
            steps = list(PATH_TOKEN.finditer(src.path, 1))
            try:
                place = resolve(doc, src.path[:steps[-1].start()]) if steps else None
            except PathError:
                continue
            keys = {p: _key_for(p, place) for p in parts} if isinstance(place, dict) else {}
            if not keys or any(k is None or not isinstance(place[k], str) for k in keys.values()):
                continue
            for name in parts:
                path = child_path(src.path[:steps[-1].start()], keys[name])
                selector = reference_selector(ctx.req, src.turn, src.call, path) if src.tag == Tag.prev_output else None
                ctx.bound[name] = place[keys[name]]
                prov[name] = src.model_copy(update={"path": path, "selector": selector})
            return True
        return False

    def _one_address(self, ctx: _CallContext, parts: list[str]) -> bool:
        """Whether the values of `parts` are one address: all cut from the call's new address, or all in one object
        of c0 or of an earlier result."""
        if ctx.address is not None and all(ctx.address[address_part(p)] == ctx.bound[p] for p in parts):
            return True
        docs = [ctx.req.c0] + [h.call.result for h in ctx.req.history if h.call.ok]
        return any(all((key := _key_for(p, e)) is not None and e[key] == ctx.bound[p] for p in parts)
                   for doc in docs for e in index_of(doc).entities)

    def _address(self, ctx: _CallContext) -> dict[str, str]:
        """The call's new postal address, made once and around the address parts already bound (a city, state or
        ZIP area from c0 or from the user), in c0's way of writing the country."""
        if ctx.address is None:
            known = {address_part(p): v for p, v in ctx.bound.items() if address_part(p) and isinstance(v, str)}
            countries = c0_values("country", ctx.req.c0)
            ctx.address = us_address(ctx.req.rng, known.get("country") or (countries[0] if countries else "USA"),
                                     known.get("city"), known.get("state"), known.get("zip"))
        return ctx.address

    def _date(self, ctx: _CallContext) -> str:
        """An ISO date within the span of dates in c0, later than the dates already bound in this call."""
        lo, hi = self._date_span(ctx.req.c0) or ("2026-01-01", "2026-12-28")
        earlier = [v for v in ctx.bound.values() if isinstance(v, str) and _ISO_DATE.match(v)]
        start = dt.date.fromisoformat(max([lo] + earlier))
        end = dt.date.fromisoformat(hi)
        if earlier:
            start += dt.timedelta(days=1)
            end = min(end, start + dt.timedelta(days=6))
        span = max((end - start).days, 0)
        return (start + dt.timedelta(days=ctx.req.rng.randint(0, span))).isoformat()

    def _date_span(self, c0: dict[str, Any]) -> tuple[str, str] | None:
        """The scenario's calendar (`calendar`: c0's earliest and latest dates, dates of birth aside), or None when
        c0 holds no date (cached for the last c0 seen)."""
        cached_c0, span = self._date_cache  # one read: slot threads share the planner
        if cached_c0 is not c0:
            first, last = calendar(c0)
            span = None if first == last == REFERENCE_DATE else (first.isoformat(), last.isoformat())
            self._date_cache = (c0, span)
        return span
