"""Executor over a tau2-bench domain environment: c0 records overlaid on the domain database, calls run through the
tau2 `Environment`, and the end state compared by tau2's own database hash."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel, TypeAdapter

from sap.executors.base import ExecResult
from sap.jsonutil import json_copy
from sap.model import ToolCall

_JSON = TypeAdapter(Any)


@dataclass(frozen=True)
class Tau2Domain:
    """What the executor needs from one tau2 domain: its database class, the database as plain JSON (the shipped
    db.json, loaded once per process), and the domain's `get_environment(db)`."""

    name: str
    db_class: type[BaseModel]
    base: dict[str, dict[str, Any]]
    get_environment: Callable[..., Any]


class Tau2Executor:
    """Runs calls through a tau2 `Environment` whose database is the domain's db.json with c0's records put over it.

    c0 maps a database collection (users, orders, reservations, ...) to records by id, in tau2's own JSON shape;
    a record in c0 replaces the database record of the same id, so a repair patch to c0 reaches the database.
    A call that raises gives an error result (text as tau2 gives it: "Error: ..."); a failed write call is rolled
    back by replay. `state()` is tau2's database hash, recomputed only after a write tool succeeded (tau2 declares
    each tool's type: read tools never change the database).
    """

    def __init__(self, domain: Tau2Domain) -> None:
        self.domain = domain
        self._c0: dict[str, Any] = {}
        self._log: list[tuple[str, dict[str, Any]]] = []
        self._hash: str | None = None
        self.env: Any = None

    def reset(self, c0: dict[str, Any]) -> None:
        """A fresh database from db.json with c0's records overlaid; unknown collections raise ValueError."""
        unknown = sorted(set(c0) - set(self.domain.base))
        if unknown:
            raise ValueError(f"c0 of tau2/{self.domain.name} has unknown collection(s) {unknown}; "
                             f"known: {sorted(self.domain.base)}")
        self._c0 = json_copy(c0)
        self._log = []
        self._build()

    def _build(self) -> None:
        """The environment over base + c0 (validation builds new containers, so the shared base stays untouched)."""
        data = {coll: {**records, **self._c0.get(coll, {})} for coll, records in self.domain.base.items()}
        self.env = self.domain.get_environment(db=self.domain.db_class.model_validate(data))
        self._hash = None

    def _writes(self, name: str) -> bool:
        """Whether tau2 declares `name` a write tool (an unknown name counts as one: it is rolled back)."""
        tools = self.env.tools
        return not tools.has_tool(name) or tools.tool_type(name).value == "write"

    def _run(self, name: str, args: dict[str, Any]) -> Any:
        """One call through the environment, as tau2's orchestrator makes it, then the tools' sync."""
        value = self.env.make_tool_call(name, requestor="assistant", **json_copy(args))
        self.env.sync_tools()
        return value

    def execute(self, call: ToolCall) -> ExecResult:
        """Run one call; an exception or a non-JSON result is an error result and leaves the database as it was."""
        if self.env is None:
            return ExecResult(ok=False, error="executor not reset: no database loaded")
        writes = self._writes(call.name)
        try:
            value = _JSON.dump_python(self._run(call.name, call.args_exec), mode="json")
        except Exception as exc:  # a tool error (ValueError, bad arguments, ...) must not crash the run
            if writes:
                self.restore(self.snapshot())
            return ExecResult(ok=False, error=f"Error: {exc}" if str(exc) else f"Error: {type(exc).__name__}")
        self._log.append((call.name, json_copy(call.args_exec)))
        if writes:
            self._hash = None
        return ExecResult(ok=True, value=value)

    def snapshot(self) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
        """The replay log: c0 and the calls that succeeded since."""
        return self._c0, list(self._log)

    def restore(self, snap: tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]) -> None:
        """Rebuild the database from c0 and re-run the logged calls."""
        self._c0, log = snap
        self._build()
        for name, args in log:
            self._run(name, args)
        self._log = list(log)

    def state_hash(self) -> str:
        """tau2's hash of the current database (`Environment.get_db_hash`)."""
        if self._hash is None:
            self._hash = self.env.get_db_hash()
        return self._hash

    def state(self) -> dict[str, Any]:
        """The comparable end state: tau2's database hash."""
        return {"db_hash": self.state_hash()}
