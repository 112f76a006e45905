"""The cache executor: validators first, then an O(1) lookup of the recorded response in the current state; a call
that was never recorded there gets the "no results" answer a search API gives, so nothing tells the caller it is a
cache."""
from __future__ import annotations

from typing import Any

from sap.cache.index import STATE_KEY, CacheIndex
from sap.cache.rules import ToolRules, ToolValidator
from sap.model import ExecResult, ToolCall, ToolSpec

NO_RESULTS = {"error": {"status": 404, "code": "no_results", "message": "No results found for the given parameters."}}


def _error(body: dict[str, Any]) -> ExecResult:
    """An error result carrying the structured body, with its message as the error text."""
    return ExecResult(ok=False, value=body, error=body["error"]["message"])


class CacheExecutor:
    """Answers calls from a CacheIndex. Its only state is the id of the recorded state it is in: reset takes it from
    c0 (`cache_state`; none for a stateless cache), and a call answered by a stateful entry moves to the state that
    call left, so after a recorded cancellation the booking is looked up as it was after it."""

    def __init__(self, index: CacheIndex, specs: list[ToolSpec], rules: dict[str, ToolRules] | None = None) -> None:
        self.index = index
        rules = rules or {}
        self.validators = {s.name: ToolValidator(s, rules.get(s.name)) for s in specs}
        self.current: str | None = None

    def reset(self, c0: dict[str, Any]) -> None:
        """Start in c0's recorded state (None: stateless entries only)."""
        self.current = c0.get(STATE_KEY)

    def execute(self, call: ToolCall) -> ExecResult:
        """Validate, then look the call up."""
        validator = self.validators.get(call.name)
        if validator is None:
            return _error({"error": {"status": 404, "code": "unknown_function",
                                     "message": f"no such function '{call.name}'"}})
        violation = validator.check(call.args_exec)
        if violation is not None:
            return _error(violation.response())
        entry = self.index.get(call.name, call.args_exec, self.current)
        if entry is None and self.current is None and call.name in self.index.stateful:
            return _error({"error": {"status": 409, "code": "state_required", "message": (
                f"{call.name} was recorded per initial state and this episode names none: its c0 needs "
                f"'{STATE_KEY}' (records made before cache states cannot be played on this cache)")}})
        if entry is None:
            return _error(NO_RESULTS)
        self.current = entry.after or self.current
        return ExecResult(ok=True, value=entry.response)

    def snapshot(self) -> str | None:
        return self.current

    def restore(self, snap: str | None) -> None:
        self.current = snap

    def state(self) -> dict[str, Any]:
        return {}
