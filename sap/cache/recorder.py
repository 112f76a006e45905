"""The recorder: runs calls on a live executor (a sap executor, or a Python callable that calls a real API) and
keeps every successful (function, arguments) -> response in a CacheIndex."""
from __future__ import annotations

from typing import Any, Callable

from sap.cache.index import CacheIndex
from sap.executors.failures import failure_text
from sap.jsonutil import json_copy
from sap.model import ExecResult, Executor, ToolCall

LiveFunction = Callable[[str, dict[str, Any]], Any]


class CallableExecutor:
    """A stateless executor over `fn(function, args) -> response`; a raised exception or an error-shaped
    response (`{"error": ...}`, an error list or "Error: ..." text) is an error result."""

    def __init__(self, fn: LiveFunction) -> None:
        self.fn = fn

    def reset(self, c0: dict[str, Any]) -> None:
        """A live API has no c0 to load."""

    def execute(self, call: ToolCall) -> ExecResult:
        try:
            value = self.fn(call.name, json_copy(call.args_exec))
        except Exception as exc:  # the live API failed: an error result, never a crash
            return ExecResult(ok=False, error=f"{call.name} raised {type(exc).__name__}: {exc}")
        problem = failure_text(call.name, value)
        if problem is not None:
            return ExecResult(ok=False, value=value, error=problem)
        return ExecResult(ok=True, value=value)

    def snapshot(self) -> None:
        return None

    def restore(self, snap: None) -> None:
        """Stateless."""

    def state(self) -> dict[str, Any]:
        return {}


class Recorder:
    """An Executor that delegates to `live` and records each successful call into `index`; `new` lists the ids
    added since it was made (the first response of a call is kept if the same call is made again)."""

    def __init__(self, live: Executor | LiveFunction, index: CacheIndex | None = None) -> None:
        self.live: Executor = live if isinstance(live, Executor) else CallableExecutor(live)
        self.index = index if index is not None else CacheIndex()
        self.new: list[int] = []

    def reset(self, c0: dict[str, Any]) -> None:
        self.live.reset(c0)

    def execute(self, call: ToolCall) -> ExecResult:
        res = self.live.execute(call)
        if res.ok:
            entry_id, added = self.index.add(call.name, json_copy(call.args_exec), res.value)
            if added:
                self.new.append(entry_id)
        return res

    def snapshot(self) -> Any:
        return self.live.snapshot()

    def restore(self, snap: Any) -> None:
        self.live.restore(snap)

    def state(self) -> dict[str, Any]:
        return self.live.state()

    def close(self) -> None:
        if hasattr(self.live, "close"):
            self.live.close()
