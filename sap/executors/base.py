"""Replay: rebuilding an executor from c0 and committed calls, and the replay-log snapshots of executors whose state
lives outside Python (MCP servers, tau2's database)."""
from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Iterable

from sap.errors import SapError
from sap.model import ExecResult, Executor, ToolCall


ReplayLogSnapshot = tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]


class ReplayLog:
    """Snapshots as replay logs: c0 and the calls that succeeded since; restore rebuilds from c0 (`_rebuild`) and
    re-runs each logged call (`_rerun`)."""

    _c0: dict[str, Any]
    _log: list[tuple[str, dict[str, Any]]]

    def _rebuild(self) -> None:
        """A fresh state from `self._c0`."""
        raise NotImplementedError

    def _rerun(self, name: str, args: dict[str, Any]) -> None:
        """Run one logged call again on the rebuilt state."""
        raise NotImplementedError

    def snapshot(self) -> ReplayLogSnapshot:
        """The replay log: c0 and the calls that succeeded since."""
        return self._c0, list(self._log)

    def restore(self, snap: ReplayLogSnapshot) -> None:
        """Rebuild from c0 and re-run the logged calls."""
        self._c0, log = snap
        self._log = []
        self._rebuild()
        for name, args in log:
            self._rerun(name, args)
        self._log = list(log)


class ReplayMismatch(SapError, RuntimeError):
    """A committed call gave a different result when replayed."""


def same_result(executor: Executor | None, recorded: Any, replayed: Any) -> bool:
    """Whether a replayed result (or error) is the recorded one, as `executor` compares them: an executor with a
    `comparable(value)` method (the MCP executor's masks: clock times a server reports) compares what it returns
    for both; any other, or none, compares them as they are."""
    comparable = getattr(executor, "comparable", None)
    return recorded == replayed if comparable is None else comparable(recorded) == comparable(replayed)


def check_replayed(call: ToolCall, res: ExecResult, executor: Executor | None = None) -> None:
    """Raise ReplayMismatch if the replayed result `res` differs from the one `call` recorded (as `executor`
    compares results, `same_result`)."""
    replayed, recorded = (res.value if res.ok else res.error), (call.result if call.ok else call.error)
    if res.ok != call.ok or not same_result(executor, recorded, replayed):
        raise ReplayMismatch(f"replay of call {call.call_id} ({call.name}) gave {res!r}, recorded {call.result!r}")


def replay(executor: Executor, c0: dict[str, Any], calls: Iterable[ToolCall], check: bool = True) -> Executor:
    """Reset `executor` to c0 and re-run `calls`; with `check`, raise if any result differs from the recorded one."""
    executor.reset(c0)
    for call in calls:
        res = executor.execute(call)
        if check:
            check_replayed(call, res, executor)
    return executor


def replay_fresh(factory: Callable[[], Executor], c0: dict[str, Any], calls: list[ToolCall]) -> tuple[dict[str, Any], str | None]:
    """Replay `calls` from c0 on a new executor: its end state, and the first result mismatch (None if all match)."""
    ex = factory()
    try:
        try:
            replay(ex, c0, calls)
            return ex.state(), None
        except ReplayMismatch as exc:
            replay(ex, c0, calls, check=False)
            return ex.state(), str(exc)
    finally:
        if hasattr(ex, "close"):
            ex.close()


def end_state_hash(executor: Executor) -> str:
    """A hash of the executor's current state: its own `state_hash()` if it has one (tau2: the database hash;
    Python executors: this hash, kept until the state changes), else sha256 of the canonical JSON of `state()`."""
    own = getattr(executor, "state_hash", None)
    if callable(own):
        return own()
    return hashlib.sha256(json.dumps(executor.state(), sort_keys=True, default=repr).encode()).hexdigest()
