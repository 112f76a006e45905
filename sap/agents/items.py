"""Arrays of whole objects bound item by item: each item is one object of an earlier result (a flight of a search,
a passenger or payment method of a profile), each of its fields recorded with its own provenance."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from sap.model import ArgProvenance, Tag, ToolCall
from sap.provenance.fields import candidates

_ITEM_COUNT_WHOLE = 0.5  # chance of taking every object of the chosen one's listing (a whole itinerary)


def object_items(schema: dict[str, Any]) -> tuple[dict[str, Any], list[str]] | None:
    """(item properties, required item fields) of an array-of-objects parameter schema, else None."""
    items = schema.get("items") if schema.get("type") == "array" else None
    if not isinstance(items, dict) or items.get("type") != "object" or not items.get("properties"):
        return None
    return items["properties"], list(items.get("required") or items["properties"])


@dataclass(frozen=True)
class SourceObject:
    """An object inside an earlier result that can be one item: where it is, and the item fields it holds."""

    doc: tuple[int, int] | None  # (turn, call) of the result; None for an object of c0
    path: str  # JSON path of the object in the result
    listing: str | None  # path of the list the object is an element of
    fields: dict[str, tuple[str, Any]]  # item field -> (JSON path in the result, value)
    scalars: dict[str, Any]  # the object's own scalar fields (an origin and destination beside a flight number)


def _objects(node: Any, path: str, listing: str | None, out: list[tuple[str, str | None, dict[str, Any]]]) -> None:
    """Append every object of `node` (with its path and the listing it is an element of) to `out`."""
    if isinstance(node, dict):
        out.append((path, listing, node))
        for k, v in node.items():
            _objects(v, f"{path}.{k}" if str(k).isidentifier() else f'{path}["{k}"]', None, out)
    elif isinstance(node, list):
        for i, v in enumerate(node):  # a result's own top list holds alternatives, not one whole (a search's hits)
            _objects(v, f"{path}[{i}]", path if path != "$" else None, out)


def source_objects(calls: list[tuple[tuple[int, int], ToolCall]], props: dict[str, Any], required: list[str],
                   aliases: dict[str, tuple[str, ...]]) -> list[SourceObject]:
    """The objects of the calls' successful results holding at least half the required item fields (a field
    found in the object itself or its plain sub-objects, not inside its listings), in document order."""
    return [o for doc, call in calls if call.ok for o in _holding(doc, call.result, props, required, aliases)]


def config_objects(c0: dict[str, Any], props: dict[str, Any], required: list[str],
                   aliases: dict[str, tuple[str, ...]]) -> list[SourceObject]:
    """The objects of c0 that can be items, as `source_objects` finds them in results (a file of c0 whose
    `content` is the text an edit replaces)."""
    return _holding(None, c0, props, required, aliases)


def _holding(doc: tuple[int, int] | None, value: Any, props: dict[str, Any], required: list[str],
             aliases: dict[str, tuple[str, ...]]) -> list[SourceObject]:
    """The objects of `value` (the document `doc`) holding at least half the required item fields."""
    found = []
    nodes: list[tuple[str, str | None, dict[str, Any]]] = []
    _objects(value, "$", None, nodes)
    for path, listing, obj in nodes:
        fields = {}
        for name in required:
            own = [c for c in candidates(name, props[name], obj, aliases.get(name, ()))
                   if "[" not in c.path and not isinstance(c.value, list)]
            if own:
                best = max(own, key=lambda c: (c.score, -c.path.count(".")))
                fields[name] = (path + best.path[1:], best.value)
        if fields and 2 * len(fields) >= len(required):
            scalars = {k: v for k, v in obj.items() if isinstance(v, (str, int, float)) and str(k).isidentifier()}
            found.append(SourceObject(doc, path, listing, fields, scalars))
    return found


def choose_items(pool: list[SourceObject], rng: random.Random) -> list[SourceObject]:
    """The objects the array is made of: one of the newest result's (usually) or any, alone or with the rest of the
    list it is in (a whole itinerary, a connection's two flights, every passenger), now and then one of those
    swapped for another source's object."""
    newest = max((o.doc for o in pool), key=lambda d: d or (-1, -1))
    first = rng.choice([o for o in pool if o.doc == newest] if rng.random() < 0.6 else pool)
    chosen = [first]
    if first.listing is not None and rng.random() < _ITEM_COUNT_WHOLE:
        chosen = [o for o in pool if o.doc == first.doc and o.listing == first.listing]
    others = [o for o in pool if o not in chosen and len(o.fields) == len(first.fields)]
    if others and len(chosen) > 1 and rng.random() < 0.5:
        chosen[rng.randrange(len(chosen))] = rng.choice(others)
    return chosen


def output_provenance(obj: SourceObject, field_name: str) -> tuple[Any, ArgProvenance]:
    """The value of an item field found in its source object, as a prev_output reference (selector set later), or
    for an object of c0 as an initial_state one."""
    path, value = obj.fields[field_name]
    if obj.doc is None:
        return value, ArgProvenance(tag=Tag.initial_state, path=path)
    return value, ArgProvenance(tag=Tag.prev_output, turn=obj.doc[0], call=obj.doc[1], path=path)


def inherited(call: ToolCall, field_name: str, src_turn: int, turn: int) -> tuple[Any, ArgProvenance] | None:
    """A field the source object lacks but the call of turn `src_turn` that produced it was given (a search's date
    for its flights): that argument's value with its provenance, a value stated in an earlier turn than `turn`
    becoming a restatement of it there."""
    prov = call.args_prov.get(field_name)
    if prov is None or field_name not in call.args_exec:
        return None
    value, tag = call.args_exec[field_name], prov.effective_tag()
    if tag == Tag.prev_output:
        return value, prov
    if tag in (Tag.self_create, Tag.initial_state):
        return value, ArgProvenance(tag=Tag.self_create) if src_turn == turn else \
            ArgProvenance(tag=Tag.prev_user_msg, turn=src_turn)
    if tag == Tag.prev_user_msg:
        return value, ArgProvenance(tag=Tag.prev_user_msg, turn=prov.turn)
    return None
