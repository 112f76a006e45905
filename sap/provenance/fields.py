"""Enumerate the fields of JSON values and match them to tool parameters by name and type."""
from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Iterator

from sap.provenance.jsonpath import key_path

_ID_KEYS = ("id", "name")
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_TRAILING_DIGITS = re.compile(r"_?\d+$")
_ONE_KEY = r'(?:\.[^.\[\]]+|\["(?:[^"\\]|\\.)*"\])'  # one `.key` or `["key"]` step of a path
_COLLECTION_SUFFIX = re.compile(r"_(?:list|queue|map|records?|history)$")
_TYPE_CHECKS: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


@dataclass(frozen=True)
class Field:
    """One value inside a JSON document, with the names a parameter may know it by."""

    path: str
    names: tuple[str, ...]
    value: Any
    siblings: frozenset[str] = frozenset()  # lower-cased string values beside it in the same object


def child_path(path: str, key: str) -> str:
    """`path.key`, or `path["key"]` when the key is not a plain identifier."""
    return f"{path}.{key}" if _PLAIN_KEY.match(key) else f"{path}[{json.dumps(key)}]"


def singular(word: str) -> str:
    """A plain English singular of a plural key (orders -> order, entries -> entry, ids -> id)."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 2:
        return word[:-1]
    return word


def _names(key: str, parent: str | None) -> tuple[str, ...]:
    """Names of a field: its key, and for id/name keys the parent-qualified form (hotels[].id -> hotel_id,
    ticket_queue[].id -> ticket_id)."""
    names = [key]
    if parent and key in _ID_KEYS:
        names.append(f"{singular(parent)}_{key}")
        bare = _COLLECTION_SUFFIX.sub("", parent)
        if bare != parent:
            names.append(f"{singular(bare)}_{key}")
    return tuple(names)


def key_name(parent: str) -> str:
    """The name the keys of a map of objects under `parent` answer to (`contents` -> `content_key`)."""
    return f"{singular(parent)}_key"


def iter_fields(doc: Any) -> Iterator[Field]:
    """Every keyed value in `doc` (scalars, and lists of scalars as a whole), depth first, in document order; and
    the keys of maps of objects ({"contents": {"a.txt": {...}}}), named by `key_name` at their `~` paths, with
    the entry's own short strings as siblings."""
    out: list[Field] = []
    _collect(doc, "$", None, None, frozenset(), out)
    return iter(out)


def _collect(doc: Any, path: str, key: str | None, parent: str | None, siblings: frozenset[str],
             out: list[Field]) -> None:
    """Append the fields of `doc`, found at `path` under `key` (whose own parent key is `parent`), to `out`."""
    if isinstance(doc, dict):
        near = frozenset(v.lower() for v in doc.values() if isinstance(v, str) and len(v) < 40) | frozenset(
            str(k).lower() for k, v in doc.items() if v is True)  # a flag that holds is said by its name: available
        # entries of a map keyed by id ({"tweets": {"3": {"id": 3}}}) take the map's key as their parent
        inner = parent if key is not None and key.isdigit() else key
        keyed = key is not None and bool(doc) and all(isinstance(v, dict) for v in doc.values())
        lookup = key is not None and key.endswith("_map") and bool(doc) and all(
            isinstance(v, (str, int)) for v in doc.values())  # {"user_map": {"Quinn": "USR001"}}: its keys are users
        status = any(isinstance(v, bool) and (str(k).endswith("status") or k == "success") for k, v in doc.items())
        for k, v in doc.items():
            k = str(k)
            if status and k == "message" and isinstance(v, str):
                continue  # {"sent_status": true, "message": "Message sent ..."}: a status text, never content
            if keyed:
                own = frozenset(x.lower() for x in v.values() if isinstance(x, str) and len(x) < 40)
                out.append(Field(key_path(child_path(path, k)), (key_name(key),), k, own))
            elif lookup:  # its keys are users, its values their ids
                out.append(Field(key_path(child_path(path, k)), (key[:-len("_map")],), k, near))
                out.append(Field(child_path(path, k), (f"{key[:-len('_map')]}_id",), v, near))
                continue
            _collect(v, child_path(path, k), k, inner, near, out)
    elif isinstance(doc, list):
        if key is not None and doc and all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in doc):
            out.append(Field(path, (key,), doc, siblings))
        for i, v in enumerate(doc):
            if isinstance(v, (dict, list)):
                _collect(v, f"{path}[{i}]", key, parent, frozenset(), out)
            elif key is not None:
                out.append(Field(f"{path}[{i}]", (singular(key),), v, siblings))
    elif key is not None and doc is not None:
        out.append(Field(path, _names(key, parent), doc, siblings))


def is_listing(container: Any, key: str | int | None) -> bool:
    """Whether a container's entries are alternatives of one kind: a list, or a keyed map of objects (under a key)."""
    if isinstance(container, list):
        return True
    return (key is not None and isinstance(container, dict) and len(container) > 1
            and all(isinstance(v, dict) for v in container.values()))


def _is_short_scalar(v: Any) -> bool:
    """A value that can identify an entity: a string, number or boolean (not a collection)."""
    return isinstance(v, (str, int, float)) and v is not None


def entities(doc: Any) -> list[dict[str, Any]]:
    """The objects of `doc` that each describe one thing (not listings), as their scalar fields plus those of their
    plain sub-objects (a user's `name.first_name` and `address.zip` belong to the user), in document order."""
    out: list[dict[str, Any]] = []

    def walk(node: Any, key: str | None) -> None:
        if isinstance(node, dict):
            if not is_listing(node, key):
                flat = {k: v for k, v in node.items() if _is_short_scalar(v)}
                for k, v in node.items():
                    if isinstance(v, dict) and not is_listing(v, k):
                        flat.update({kk: vv for kk, vv in v.items() if _is_short_scalar(vv) and kk not in flat})
                out.append(flat)
            for k, v in node.items():
                walk(v, str(k))
        elif isinstance(node, list):
            for v in node:
                walk(v, key)

    walk(doc, None)
    return out


def type_ok(value: Any, schema: dict[str, Any]) -> bool:
    """Whether `value` fits the JSON-schema type and enum of a parameter."""
    if "enum" in schema and value not in schema["enum"]:
        return False
    kind = schema.get("type")
    if kind is None:
        return True
    kinds = kind if isinstance(kind, list) else [kind]
    for k in kinds:
        allowed = _TYPE_CHECKS.get(k)
        if allowed is None:
            return True
        if isinstance(value, bool) and k != "boolean":
            continue
        if isinstance(value, allowed):
            if k == "array" and "items" in schema:
                return all(type_ok(x, schema["items"]) for x in value)
            return True
    return False


def match_score(param: str, names: tuple[str, ...]) -> int:
    """How well a field's names fit a parameter: 3 exact key, 2 qualified or numbered (file_name2), 1 suffix, 0 none."""
    if param == names[0]:
        return 3
    if param in names[1:] or _TRAILING_DIGITS.sub("", param) in names:
        return 2
    if any("_" in n and param.endswith("_" + n) for n in names):
        return 1
    return 0


@dataclass(frozen=True)
class Candidate:
    """A value that can fill a parameter, found at `path`, with its match score."""

    path: str
    value: Any
    score: int
    siblings: frozenset[str] = frozenset()


def path_pattern(pattern: str) -> re.Pattern[str]:
    """The paths a pattern such as `$.root.*.contents.*~` stands for: each `.*` is any one key."""
    return re.compile(_ONE_KEY.join(map(re.escape, pattern.split(".*"))) + r"\Z")


class FieldIndex:
    """The fields of one document by each name they answer to, in document order."""

    def __init__(self, doc: Any) -> None:
        self.by_name: dict[str, list[tuple[int, Field]]] = {}
        self.doc = doc
        self._entities: list[dict[str, Any]] | None = None
        self._siblings: dict[str, frozenset[str]] | None = None
        self._own: dict[str, frozenset[str]] = {}
        self.fields = list(iter_fields(doc))
        for order, f in enumerate(self.fields):
            for name in set(f.names):
                self.by_name.setdefault(name, []).append((order, f))

    def _sibling_maps(self) -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]]]:
        """`siblings_of` and `own_siblings_of`, both built in one pass over the fields on first use."""
        if self._siblings is None:
            self._siblings, self._own = {}, {}
            for f in self.fields:
                if isinstance(f.value, str) and f.siblings:
                    self._siblings[f.value] = self._siblings.get(f.value, frozenset()) | f.siblings
                    if not f.path.endswith("]"):
                        self._own[f.value] = self._own.get(f.value, frozenset()) | f.siblings
        return self._siblings, self._own

    @property
    def siblings_of(self) -> dict[str, frozenset[str]]:
        """string value -> the short strings beside it wherever it stands in the document (an order id's status in
        the user's order map), computed on first use."""
        return self._sibling_maps()[0]

    @property
    def own_siblings_of(self) -> dict[str, frozenset[str]]:
        """`siblings_of` where the value stands as a field of its own object, not as an item of a listing (an order's
        status beside its order id; not the user whose order list holds the id)."""
        return self._sibling_maps()[1]

    @property
    def entities(self) -> list[dict[str, Any]]:
        """`entities(doc)`, computed on first use."""
        if self._entities is None:
            self._entities = entities(self.doc)
        return self._entities

    def named(self, alias: str) -> list[tuple[int, Field]]:
        """Fields named `alias`, or, for an alias starting with `$`, the fields at the paths it stands for."""
        if not alias.startswith("$"):
            return self.by_name.get(alias, [])
        pattern = path_pattern(alias)
        return [(order, f) for order, f in enumerate(self.fields) if pattern.match(f.path)]

    def lookup(self, param: str) -> list[Field]:
        """Fields whose names could match `param`: exact, digit-stripped, or a `_`-suffix of it."""
        keys = {param, _TRAILING_DIGITS.sub("", param)}
        keys.update(param[i + 1:] for i, ch in enumerate(param) if ch == "_")
        hits = {order: f for k in keys for order, f in self.by_name.get(k, ())}
        return [hits[o] for o in sorted(hits)]


class IndexCache:
    """Field indexes by document identity, least recently used first out once they hold more than `max_fields`
    fields in all. Every reuse is within the slot that made the document (its c0 and results), so the bound keeps
    the slots in flight and memory stays flat in a run's size; a count of 4,096 indexes, cleared when full, held
    about 200 MB of store configs and results (peak RSS 1.7x from -n 200 to -n 2,000)."""

    def __init__(self, max_fields: int) -> None:
        self.max_fields, self.fields = max_fields, 0
        self._entries: OrderedDict[int, tuple[Any, FieldIndex]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, doc: Any) -> FieldIndex:
        """The index of `doc`: cached, or built and cached (the least recently used dropped past the bound)."""
        key = id(doc)  # the entry holds `doc`, so no other object takes its id while it is cached
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit[0] is doc:
                self._entries.move_to_end(key)
                return hit[1]
        index = FieldIndex(doc)
        with self._lock:
            if (old := self._entries.pop(key, None)) is not None:
                self.fields -= len(old[1].fields)
            self._entries[key] = (doc, index)
            self.fields += len(index.fields)
            while self.fields > self.max_fields and len(self._entries) > 1:
                self.fields -= len(self._entries.popitem(last=False)[1][1].fields)
        return index


_INDEX_CACHE = IndexCache(max_fields=50_000)


def index_of(doc: Any) -> FieldIndex:
    """The field index of `doc`, cached by identity (documents are results and configs, never mutated)."""
    return _INDEX_CACHE.get(doc)


def candidates(param: str, schema: dict[str, Any], doc: Any, aliases: tuple[str, ...] = ()) -> list[Candidate]:
    """Values in `doc` that can fill `param`, and (scored as qualified names) the fields `aliases` name, the other
    field names or `$` path patterns a tool declares for it; array parameters also take a single matching or
    aliased element as a one-item list (an aliased listing's elements only where the listing itself does not
    fit: "those stocks", not one of them as a list)."""
    out: list[Candidate] = []
    index = index_of(doc)
    for f in index.lookup(param):
        score = match_score(param, f.names)
        if score and type_ok(f.value, schema):
            out.append(Candidate(f.path, f.value, score, f.siblings))
    item_schema = schema.get("items", {}) if schema.get("type") == "array" else None
    aliased = sorted((o for alias in aliases for o in index.named(alias)), key=lambda o: o[0])
    wholes = {f.path for _, f in aliased if isinstance(f.value, list) and type_ok(f.value, schema)}
    for _, f in aliased:
        if type_ok(f.value, schema) and all(c.path != f.path for c in out):
            out.append(Candidate(f.path, f.value, 2, f.siblings))
        elif (item_schema is not None and not isinstance(f.value, list) and type_ok(f.value, item_schema)
              and f.path.rpartition("[")[0] not in wholes):  # an element of a listing the array takes whole
            out.append(Candidate(f.path, [f.value], 2, f.siblings))  # one aliased element as a one-item list
    if schema.get("type") == "array":
        item_schema, item = schema.get("items", {}), singular(param)
        for f in index.lookup(item):
            item_score = match_score(item, f.names)
            if item_score and not isinstance(f.value, list) and type_ok(f.value, item_schema):
                out.append(Candidate(f.path, [f.value], item_score, f.siblings))
    return out


def produces(param: str, schema: dict[str, Any], doc: Any, aliases: tuple[str, ...] = ()) -> bool:
    """Whether `doc` holds at least one value that can fill `param` (by its name or one of `aliases`)."""
    return bool(candidates(param, schema, doc, aliases))
