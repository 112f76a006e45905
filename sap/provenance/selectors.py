"""Selectors: how a reference singles out its value when it is one among several (elements of a listing, results
of the same tool, values the user stated for one parameter), shared by the planner and the code check."""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from sap.jsonutil import objects
from sap.model import Selector
from sap.provenance.fields import is_listing, match_score, singular
from sap.provenance.jsonpath import KEY_OF, PathError, resolve
from sap.provenance.jsonpath import steps as path_steps

_ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"]
_RECENT_WORDS = ("most recent", "latest", "last")  # recency words a reader (and `sap audit`) takes as "which one"
_SHORT = 40  # longest string a field selector may quote


def ordinal(n: int) -> str:
    """1 -> "first", 12 -> "12th"."""
    if n <= len(_ORDINALS):
        return _ORDINALS[n - 1]
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _at(doc: Any, steps: Sequence[str | int], key_of: bool) -> Any:
    """The value at `steps` in `doc` (its last key itself when `key_of`); PathError if absent."""
    cur = doc
    for s in steps:
        try:
            cur = cur[s]
        except (KeyError, IndexError, TypeError) as exc:
            raise PathError(str(s)) from exc
    return steps[-1] if key_of else cur


def _entries(container: Any) -> list[str | int]:
    """The indices or keys of a listing, in document order."""
    return list(range(len(container))) if isinstance(container, list) else list(container)


def _scalar(v: Any) -> bool:
    """A value a selector may quote: a short string or a number."""
    return (isinstance(v, str) and 0 < len(v) <= _SHORT) or (isinstance(v, (int, float)) and not isinstance(v, bool))


def _changed_since(entry: dict[str, Any], key: str, value: Any, later: Sequence[Any]) -> bool:
    """Whether a later result shows the same thing (an object sharing one of the entry's ids) with another value
    at `key`: an order listed as pending and cancelled since is no longer "the pending order"."""
    ids = {(k, json.dumps(v)) for k, v in entry.items() if str(k).lower().endswith("id") and _scalar(v)}
    return bool(ids) and any(key in node and node[key] != value
                             and ids & {(k, json.dumps(v)) for k, v in node.items()} for node in objects(list(later)))


def _field_criterion(entry: Any, others: list[Any], own: str | int | None, value: Any,
                     later: Sequence[Any] = ()) -> tuple[str, Any] | None:
    """A field of `entry` whose value appears nowhere in any other entry (under no key: "origin MIA" does not
    name a flight when another one lands in MIA): not the bound field, nor one that restates the bound value (a
    path holding the file name); strings before numbers, ids last; a field of an object inside the entry (a
    variant's options) counts as the entry's own; not a field a `later` result shows changed (a status)."""
    if not isinstance(entry, dict):
        return None
    bound = str(value).lower()
    fields = [(k, v) for k, v in entry.items() if k != own] + [  # an option of a variant ("color": "white") too
        (k, v) for d, sub in entry.items() if d != own and isinstance(sub, dict) for k, v in sub.items()]
    keys = [(k, v) for k, v in fields if _scalar(v) and str(v).lower() not in bound and bound not in str(v).lower()]
    keys.sort(key=lambda kv: (str(kv[0]).lower().endswith("id"), not isinstance(kv[1], str)))
    for k, v in keys:
        shown = json.dumps(v)
        if all(shown not in json.dumps(o, default=str) for o in others) and not _changed_since(entry, k, v, later):
            return str(k), v
    return None


def _recurs(doc: Any, value: Any) -> bool:
    """Whether a scalar `value` occurs at two or more places of `doc` (as a value, not a key)."""
    if isinstance(value, (dict, list)):
        return False
    shown = json.dumps(value)
    count = 0
    stack = [doc]
    while stack and count < 2:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        else:
            count += json.dumps(node) == shown
    return count >= 2


def _object_listings(doc: Any, key: str | None = None) -> list[tuple[str | None, list[Any]]]:
    """(key, list) for every list of 2+ objects inside `doc`, in document order."""
    out: list[tuple[str | None, list[Any]]] = []
    if isinstance(doc, list):
        if len(doc) >= 2 and all(isinstance(e, dict) for e in doc):
            out.append((key, doc))
        for e in doc:
            out += _object_listings(e, key)
    elif isinstance(doc, dict):
        for k, v in doc.items():
            out += _object_listings(v, str(k))
    return out


def _members_selector(result: Any, value: list[Any]) -> Selector | None:
    """For a list value whose members are a field of entries of a listing of 2+ objects in `result` (an order's
    item ids beside its items): those entries by a field whose value each alone holds, all of them ("the items
    called Tea Kettle and Desk Lamp"); None if no listing holds every member or no field tells them apart."""
    wanted = {json.dumps(v) for v in value}
    for key, listing in _object_listings(result):
        for own in listing[0]:
            picked = [e for e in listing if json.dumps(e.get(own)) in wanted]
            if {json.dumps(e.get(own)) for e in picked} != wanted:
                continue
            rest = [json.dumps(e, default=str) for e in listing]
            fields = sorted((f for f in picked[0] if f != own), key=lambda f: (str(f).lower().endswith("id"),
                                                                             not isinstance(picked[0][f], str)))
            for f in fields:
                names = [e.get(f) for e in picked]
                if all(_scalar(n) and sum(json.dumps(n) in r for r in rest) == 1 for n in names):
                    return Selector(noun=humanize_key(key) if key else "entry", field=f, value=names)
    return None


def output_selector(result: Any, path: str, value: Any, same_turn: bool,
                    earlier_same_tool: Sequence[Any] = (), later: Sequence[Any] = ()) -> Selector | None:
    """How to single out the value at `path` in `result`, or None if nothing else competes with it.

    Within `result`, the innermost listing whose other entries hold a different value at the same place names
    the element by a field value no sibling shares, else by its position (or, when the user cannot have seen the
    listing yet, `same_turn`, by the value itself). A value that sits in a listing of 2+ entries and also at another
    place of the result (a connecting airport, a date every leg shares) is named by the value itself: a field of one
    element would not say which of its places is meant; but an element's own id (`item_id` of an item the order also
    lists in `item_ids`) is named by a field of it no sibling shares ("the Running Shoes"), where one exists.
    `earlier_same_tool` are earlier results of the same tool: if one holds a different value at `path` (or none),
    the reference is to the most recent result, unless a field names the element and no other result holds that
    field's value. `later` are the results between the source and the reference: a field they show changed names
    nothing."""
    key_of = path.endswith(KEY_OF)
    steps = path_steps(path[:-len(KEY_OF)] if key_of else path)
    sel: Selector | None = None
    for depth in range(len(steps) - 1, -1, -1):
        try:
            container = _at(result, steps[:depth], False)
        except PathError:
            return None
        if not is_listing(container, steps[depth - 1] if depth else None):
            continue
        rest = steps[depth + 1:]
        alts = []
        for e in _entries(container):
            if e == steps[depth]:
                continue
            try:
                alts.append((e, _at(container, [e, *rest], key_of and not rest) if rest or not key_of else e))
            except PathError:
                continue
        noun = humanize_key(steps[depth - 1]) if depth and isinstance(steps[depth - 1], str) else "entry"
        own_id = len(rest) == 1 and isinstance(rest[0], str) and re.search(r"(?:^|_)id$", rest[0]) is not None
        recurs = bool(alts) and _recurs(result, value)
        if recurs and not own_id:  # also in other places of the result: no field of one element pins it
            sel = Selector(noun=noun, named=True)
            break
        if not any(v != value for _, v in alts):
            if recurs:
                sel = Selector(noun=noun, named=True)
                break
            continue
        others = [container[e] for e in _entries(container) if e != steps[depth]]
        crit = _field_criterion(container[steps[depth]], others, rest[0] if rest else None, value, later)
        if crit is not None:  # an element's own id is that element's wherever else the result lists it
            sel = Selector(noun=noun, field=crit[0], value=crit[1])
        elif recurs or same_turn:
            sel = Selector(noun=noun, named=True)
        else:
            sel = Selector(noun=noun, position=_entries(container).index(steps[depth]) + 1)
        break
    if sel is None and isinstance(value, list) and value:  # a list of ids of listed things: say which things
        sel = _members_selector(result, value)
    competing = False
    for other in earlier_same_tool:
        if sel is not None and sel.field is not None and not _holds(other, sel.value):
            continue  # the element the field names is in no other result ("the Running Shoes": one order has them)
        try:
            competing |= resolve(other, path) != value
        except PathError:  # no value there at all is another value too
            competing = True
    if competing and sel is None and (own := _place_field(result, steps, key_of, earlier_same_tool)) is not None:
        return own  # "London": the one result that holds its city, as the user names it, not "the latest"
    if competing:
        sel = (sel or Selector(noun="result")).model_copy(update={"latest": True})
    return sel


_PLACE_FIELDS = ("city",)  # fields that name the place an element is, as people name it


def _place_of(result: Any, steps: Sequence[str | int]) -> tuple[str, str] | None:
    """(field, city) of the object whose one id is the value at `steps` (`$.routes[2].destination_location_id`,
    `$.destination.location_id`), if it holds a city field itself; None otherwise (a hotel has its own id beside
    its location's, and a city in an object inside the element may be another place's)."""
    if not steps or not isinstance(steps[-1], str) or not _ID_FIELD.search(steps[-1]):
        return None
    try:
        element = _at(result, steps[:-1], False)
    except PathError:
        return None
    if not isinstance(element, dict) or [k for k in element if _ID_FIELD.search(str(k))] != [steps[-1]]:
        return None
    return next(((f, element[f]) for f in _PLACE_FIELDS if isinstance(element.get(f), str) and element[f]), None)


def _place_field(result: Any, steps: Sequence[str | int], key_of: bool, others: Sequence[Any]) -> Selector | None:
    """The city of the object holding the value (its one id) where no other result holds it: it says which
    result's place is meant where several results of the tool hold other values there."""
    place = None if key_of else _place_of(result, steps)
    if place is None or any(_holds(other, place[1]) for other in others):
        return None
    noun = next((humanize_key(s) for s in reversed(steps[:-1]) if isinstance(s, str)), "result")
    return Selector(noun=noun, field=place[0], value=place[1])


def place_name(result: Any, path: str | None, sel: Selector | None) -> str | None:
    """The city a reference's value is the place of, said instead of "the destination from the route with city
    Berlin" or "the departure location you found" (`_place_of`), where the reference needs no other selector
    than that city; None otherwise."""
    if sel is not None and (sel.field not in _PLACE_FIELDS or sel.latest or not isinstance(sel.value, str)):
        return None
    place = _place_of(result, path_steps(path)) if path and not path.endswith(KEY_OF) else None
    return place[1] if place is not None and (sel is None or place[1] == sel.value) else None


_ID_FIELD = re.compile(r"(?:^|_)id$")  # a field holding one thing's own id


def _holds(doc: Any, value: Any) -> bool:
    """Whether a JSON document holds the value (each of a list of values) somewhere."""
    text = json.dumps(doc, sort_keys=True)
    return all(json.dumps(v) in text for v in (value if isinstance(value, list) else [value]))


def humanize_key(key: str) -> str:
    """A listing's key as a singular noun in words for one of its entries: `stock_list` -> "stock"; a compound list
    name (`watchlist`) or a container's contents (`current_directory_content`) says nothing of what it lists:
    "entry"."""
    if key.endswith("_list"):
        key = key[:-len("_list")]
    elif key.lower().endswith("list") or re.search(r"_contents?$", key):  # a folder's contents: "entry"
        return "entry"
    return singular(key).replace("_", " ")


def stated_selector(param: str, value: Any, statements: Sequence[tuple[int, str, Any]]) -> Selector | None:
    """How to single out `value` among the different values the user stated earlier for `param` (statements are
    (turn, param, value)): the most recent one, else its place in the order they were first stated."""
    firsts: dict[str, tuple[int, Any]] = {}
    last: tuple[int, Any] | None = None
    for turn, name, v in sorted(statements, key=lambda s: s[0]):
        if not match_score(param, (name,)):
            continue
        firsts.setdefault(json.dumps(v, sort_keys=True, default=str), (turn, v))
        last = (turn, v)
    if len(firsts) < 2 or last is None:
        return None
    noun = param.replace("_", " ")
    if last[1] == value:
        return Selector(noun=noun, latest=True)
    order = [v for _, v in sorted(firsts.values(), key=lambda tv: tv[0])]
    return Selector(noun=noun, position=order.index(value) + 1) if value in order else None


def selector_words(sel: Selector) -> list[tuple[str, ...]]:
    """What a message must say to convey `sel`: one of the alternatives of every group."""
    groups: list[tuple[str, ...]] = []
    if sel.field is not None:  # several elements (a list value): each one's value
        groups += [(str(v),) for v in sel.value] if isinstance(sel.value, list) else [(str(sel.value),)]
    if sel.position is not None:
        groups.append((ordinal(sel.position), f"{sel.position}{ordinal(sel.position)[-2:]}"
                       if sel.position <= len(_ORDINALS) else ordinal(sel.position)))
    if sel.latest:
        groups.append(_RECENT_WORDS)
    return groups

