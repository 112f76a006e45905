"""The recorder: runs calls on a live executor (a sap executor, or a Python callable that calls a real API) and
keeps every successful (function, arguments) -> response in a CacheIndex, under the id of the executor state it
was made in when the executor has state."""
from __future__ import annotations

from typing import Any, Callable

from sap.cache.index import CacheIndex
from sap.executors.base import end_state_hash
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


def state_id(executor: Executor) -> str:
    """The short id of an executor's current state (the first 16 hex digits of its state hash)."""
    return end_state_hash(executor)[:16]


class Recorder:
    """An Executor that delegates to `live` and records each successful call into `index`; `new` lists the ids
    added since it was made (the first response of a call in one state is kept if the same call is made again).

    Once reset on a c0 whose state is not empty, every response is recorded with the id of the state the call was
    made in and of the state it left, so a booking looked up after a cancellation is a different entry from the
    same lookup before it, and one configuration's booking B1 never answers for another's. A live API (empty
    state) records stateless entries."""

    def __init__(self, live: Executor | LiveFunction, index: CacheIndex | None = None) -> None:
        self.live: Executor = live if isinstance(live, Executor) else CallableExecutor(live)
        self.index = index if index is not None else CacheIndex()
        self.new: list[int] = []
        self.current: str | None = None  # the live executor's state id (None: stateless)

    def reset(self, c0: dict[str, Any]) -> None:
        self.live.reset(c0)
        self.current = state_id(self.live) if self.live.state() else None

    def execute(self, call: ToolCall) -> ExecResult:
        res = self.live.execute(call)
        before = self.current
        if before is not None:
            self.current = state_id(self.live)
        if res.ok:
            self.record(call, res.value, before)
        return res

    def record(self, call: ToolCall, value: Any, before: str | None) -> None:
        """Keep a successful call's response in the index, made in state `before` and leaving the current one."""
        entry_id, added = self.index.add(call.name, json_copy(call.args_exec), value, state=before,
                                         after=self.current)
        if added:
            self.new.append(entry_id)

    def snapshot(self) -> Any:
        return self.live.snapshot(), self.current

    def restore(self, snap: Any) -> None:
        self.live.restore(snap[0])
        self.current = snap[1]

    def state(self) -> dict[str, Any]:
        return self.live.state()

    def close(self) -> None:
        if hasattr(self.live, "close"):
            self.live.close()
