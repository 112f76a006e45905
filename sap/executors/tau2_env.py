"""Executor over a tau2-bench domain environment: c0 records overlaid on the domain database, calls run through the
tau2 `Environment`, and the end state compared by tau2's own database hash."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from pydantic import BaseModel, TypeAdapter, ValidationError

from sap.executors.base import ReplayLog
from sap.executors.failures import FailureShape, failure_text
from sap.jsonutil import json_copy
from sap.model import ExecResult, ToolCall

_JSON = TypeAdapter(Any)

TAU2_FAILURE_SHAPES: tuple[FailureShape, ...] = ()
"""tau2's soft failures: none. Its tools fail by raising (ValueError "Order not found", "Non-pending order cannot
be modified", ...), which tau2's orchestrator shows as "Error: ..." text and this executor as an error result;
a returned error-shaped value ("Error: ..." text, {"error": ...}) fails as with every executor."""


@dataclass
class Tau2Domain:
    """What the executor needs from one tau2 domain: its database class, the shipped db.json validated once per
    process (`base`, shared by every executor and never changed), and the domain's `get_environment(db)`."""

    name: str
    db_class: type[BaseModel]
    base: BaseModel
    get_environment: Callable[..., Any]
    params: dict[str, type[BaseModel]]  # tool name -> tau2's pydantic model of its arguments
    _dumps: dict[tuple[str, str], Any] = field(default_factory=dict)  # (collection, id) -> base record as JSON

    @property
    def collections(self) -> list[str]:
        """The database's collections (users, orders, reservations, flights, products)."""
        return list(type(self.base).model_fields)

    def records(self, collection: str) -> dict[str, Any]:
        """The shared base records of `collection` by id (read them, never change them)."""
        return getattr(self.base, collection)

    def record_json(self, collection: str, key: str) -> Any:
        """A base record as JSON (cached): what a record must differ from to count as a change."""
        if (collection, key) not in self._dumps:
            record = self.records(collection).get(key)
            self._dumps[(collection, key)] = None if record is None else record.model_dump(mode="json")
        return self._dumps[(collection, key)]


class CopyOnAccess(dict):
    """One database collection: the shared base records until a tool reaches one, then a private deep copy.

    Lookups (`[]`, `get`) copy the record they return; iteration copies every record while a write tool runs
    (tau2's read tools iterate to search; the write tools of tau2 26.3 look records up by id). Serialization
    (model_dump) reads the entries directly: copies where taken, base records elsewhere, which are equal.
    """

    def __init__(self, base: dict[str, Any]) -> None:
        super().__init__(base)
        self.copied: set[str] = set()
        self.writing = False

    def _own(self, key: str) -> Any:
        value = dict.__getitem__(self, key)
        if key not in self.copied:
            value = value.model_copy(deep=True)
            dict.__setitem__(self, key, value)
            self.copied.add(key)
        return value

    def __getitem__(self, key: str) -> Any:
        return self._own(key)

    def get(self, key: str, default: Any = None) -> Any:
        return self._own(key) if key in self else default

    def __setitem__(self, key: str, value: Any) -> None:
        dict.__setitem__(self, key, value)
        self.copied.add(key)

    def __delitem__(self, key: str) -> None:
        dict.__delitem__(self, key)
        self.copied.add(key)

    def pop(self, key: str, *default: Any) -> Any:
        self.copied.add(key)
        return dict.pop(self, key, *default)

    def _own_all(self) -> None:
        if self.writing:
            for key in list(dict.keys(self)):
                self._own(key)

    def values(self) -> Any:
        self._own_all()
        return dict.values(self)

    def items(self) -> Any:
        self._own_all()
        return dict.items(self)

    def __iter__(self) -> Iterator[str]:
        self._own_all()
        return dict.__iter__(self)


def _decoded(value: Any) -> Any:
    """A tool result that is JSON text of an object or list (tau2 tools return some as `json.dumps` strings) as
    that JSON, so the tool message holds what tau2's own message holds; any other value as it is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


class Tau2Executor(ReplayLog):
    """Runs calls through a tau2 `Environment` whose database is the domain's db.json with c0's records put over it.

    c0 maps a database collection (users, orders, reservations, ...) to records by id, in tau2's own JSON shape;
    a record in c0 replaces the database record of the same id, so a repair patch to c0 reaches the database.
    Records are copied when a tool first reaches them, so a reset costs no copy of the whole database. Arguments
    are checked against the tool's declared parameters (tau2 itself passes them on unchecked); a call that does
    not fit them or that raises gives an error result (text as tau2 gives it: "Error: ...") and a failed write
    call is rolled back by replay. `state()` lists the records that differ from db.json; `state_hash()` is tau2's
    own hash of the whole database (`Environment.get_db_hash`).
    """

    def __init__(self, domain: Tau2Domain) -> None:
        self.domain = domain
        self._c0: dict[str, Any] = {}
        self._log: list[tuple[str, dict[str, Any]]] = []
        self._tables: dict[str, CopyOnAccess] = {}
        self.env: Any = None

    def reset(self, c0: dict[str, Any]) -> None:
        """A fresh database from db.json with c0's records overlaid; an unknown collection or a record tau2's
        data model rejects raises ValueError."""
        unknown = sorted(set(c0) - set(self.domain.collections))
        if unknown:
            raise ValueError(f"c0 of tau2/{self.domain.name} has unknown collection(s) {unknown}; "
                             f"known: {self.domain.collections}")
        self._c0 = json_copy(c0)
        self._log = []
        self._build()

    def _build(self) -> None:
        """The environment over base + c0."""
        fields = type(self.domain.base).model_fields
        self._tables = {}
        for coll in self.domain.collections:
            table = CopyOnAccess(self.domain.records(coll))
            for key, record in TypeAdapter(fields[coll].annotation).validate_python(self._c0.get(coll, {})).items():
                table[key] = record
            self._tables[coll] = table
        self.env = self.domain.get_environment(db=self.domain.db_class.model_construct(**self._tables))

    def _writes(self, name: str) -> bool:
        """Whether tau2 declares `name` a write tool (an unknown name counts as one: it is rolled back)."""
        tools = self.env.tools
        return not tools.has_tool(name) or tools.tool_type(name).value == "write"

    def _run(self, name: str, args: dict[str, Any], writes: bool) -> Any:
        """One call through the environment, as tau2's orchestrator makes it, then the tools' sync."""
        for table in self._tables.values():
            table.writing = writes
        try:
            value = self.env.make_tool_call(name, requestor="assistant", **json_copy(args))
            self.env.sync_tools()
            return value
        finally:
            for table in self._tables.values():
                table.writing = False

    def execute(self, call: ToolCall) -> ExecResult:
        """Run one call; an exception or a non-JSON result is an error result and leaves the database as it was."""
        if self.env is None:
            return ExecResult(ok=False, error="executor not reset: no database loaded")
        writes = self._writes(call.name)
        params = self.domain.params.get(call.name)
        if params is not None:  # tau2 passes arguments on unchecked; a value off the declared schema is an error
            try:
                params.model_validate(call.args_exec)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "arguments"
                return ExecResult(ok=False, error=f"Error: invalid arguments for {call.name}: {where}: {first['msg']}")
        try:
            value = _JSON.dump_python(self._run(call.name, call.args_exec, writes), mode="json", warnings=False)
        except Exception as exc:  # a tool error (ValueError, bad arguments, ...) must not crash the run
            if writes:
                self.restore(self.snapshot())
            return ExecResult(ok=False, error=f"Error: {exc}" if str(exc) else f"Error: {type(exc).__name__}")
        value = _decoded(value)
        problem = failure_text(call.name, value, TAU2_FAILURE_SHAPES)
        if problem is not None:
            if writes:
                self.restore(self.snapshot())
            return ExecResult(ok=False, value=value, error=problem)
        self._log.append((call.name, json_copy(call.args_exec)))
        return ExecResult(ok=True, value=value)

    def _rebuild(self) -> None:
        """The database from db.json and c0."""
        self._build()

    def _rerun(self, name: str, args: dict[str, Any]) -> None:
        """One logged call again, on the database."""
        self._run(name, args, self._writes(name))

    def state(self) -> dict[str, Any]:
        """The comparable state: per collection, the records that differ from db.json (None: deleted)."""
        out: dict[str, Any] = {}
        for coll, table in self._tables.items():
            for key in sorted(table.copied):
                now = dict.get(table, key)
                now = None if now is None else now.model_dump(mode="json")
                if now != self.domain.record_json(coll, key):
                    out.setdefault(coll, {})[key] = now
        return out

    def state_hash(self) -> str:
        """tau2's hash of the whole current database (`Environment.get_db_hash`)."""
        return self.env.get_db_hash()
