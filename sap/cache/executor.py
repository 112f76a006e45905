"""The cache executor: validators first, then an O(1) lookup of the recorded response; a call that was never
recorded gets the "no results" answer a search API gives, so nothing tells the caller it is a cache."""
from __future__ import annotations

from typing import Any

from sap.cache.index import CacheIndex
from sap.cache.rules import ToolRules, ToolValidator
from sap.model import ExecResult, ToolCall, ToolSpec

NO_RESULTS = {"error": {"status": 404, "code": "no_results", "message": "No results found for the given parameters."}}


def _error(body: dict[str, Any]) -> ExecResult:
    """An error result carrying the structured body, with its message as the error text."""
    return ExecResult(ok=False, value=body, error=body["error"]["message"])


class CacheExecutor:
    """Answers calls from a CacheIndex. It is stateless: reset, snapshot and restore change nothing."""

    def __init__(self, index: CacheIndex, specs: list[ToolSpec], rules: dict[str, ToolRules] | None = None) -> None:
        self.index = index
        rules = rules or {}
        self.validators = {s.name: ToolValidator(s, rules.get(s.name)) for s in specs}

    def reset(self, c0: dict[str, Any]) -> None:
        """Nothing to load: the cache does not depend on c0."""

    def execute(self, call: ToolCall) -> ExecResult:
        """Validate, then look the call up."""
        validator = self.validators.get(call.name)
        if validator is None:
            return _error({"error": {"status": 404, "code": "unknown_function",
                                     "message": f"no such function '{call.name}'"}})
        violation = validator.check(call.args_exec)
        if violation is not None:
            return _error(violation.response())
        entry = self.index.get(call.name, call.args_exec)
        if entry is None:
            return _error(NO_RESULTS)
        return ExecResult(ok=True, value=entry.response)

    def snapshot(self) -> None:
        return None

    def restore(self, snap: None) -> None:
        """Stateless: nothing to restore."""

    def state(self) -> dict[str, Any]:
        return {}
