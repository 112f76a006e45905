"""Recorded mode: a live executor behind a cache of a database, so a call recorded there is answered from the cache
and a new one is made live and recorded (in memory and in the database at once)."""
from __future__ import annotations

import atexit
import sys
import threading
from collections.abc import Callable
from typing import Any

from sap.cache.recorder import Recorder
from sap.cache.store import CacheStore
from sap.jsonutil import json_copy
from sap.model import ExecResult, Executor, ToolCall, ToolSpec
from sap.store.runs import RunStore


class RecordedCache:
    """One cache of one database as the recording executors of a toolset share it: its index (loaded once, grown by
    every executor), the store each new entry goes to at once, and how many calls were answered from it or made
    live (printed at exit)."""

    def __init__(self, db_url: str, name: str, specs: list[ToolSpec]) -> None:
        self.store = CacheStore(RunStore(db_url))
        self.name, self.db_url = name, db_url
        self.store.save_tools(name, specs)
        self.index = self.store.load(name).index
        self.lock = threading.Lock()
        self.answered = self.live = 0
        atexit.register(self.report)

    def count(self, answered: bool) -> None:
        """One more call answered from the cache (`answered`) or made live."""
        with self.lock:
            if answered:
                self.answered += 1
            else:
                self.live += 1

    def report(self) -> None:
        """One line on stderr: the calls answered from the cache and made live in this process, if any."""
        if self.answered or self.live:
            print(f"sap: recorded mode, cache {self.name} ({self.db_url}): {self.answered} calls answered from the "
                  f"cache, {self.live} made live; {len(self.index)} entries", file=sys.stderr, flush=True)


class ReadThrough(Recorder):
    """A Recorder that asks its cache first. A call recorded in the state it is made in is answered from the cache
    when that is safe: always on a stateless server (its state view empty), and on a stateful one only if the
    entry left its state unchanged (a read), since the live servers must stay in step for the calls after it.
    Anything else runs live, and a success is recorded and stored before the result is returned. On a stateless
    server a restore calls nothing again (there is no state to put back)."""

    def __init__(self, live: Executor, cache: RecordedCache) -> None:
        super().__init__(live, cache.index)
        self.cache = cache

    def execute(self, call: ToolCall) -> ExecResult:
        entry = self.index.get(call.name, call.args_exec, self.current)
        if entry is not None and entry.state == self.current and entry.after == self.current:
            self.cache.count(answered=True)
            return ExecResult(ok=True, value=json_copy(entry.response))
        self.cache.count(answered=False)
        return super().execute(call)

    def record(self, call: ToolCall, value: Any, before: str | None) -> None:
        """Recorded as the Recorder does, and a new entry stored in the database too."""
        with self.cache.lock:
            known = len(self.new)
            super().record(call, value, before)
            if len(self.new) > known:
                self.cache.store.save_index(self.cache.name, [self.index.entries[self.new[-1]]])

    def restore(self, snap: Any) -> None:
        if self.current is None and snap[1] is None:  # stateless: the live calls since need not run again
            return
        super().restore(snap)


def recording(factory: Callable[[], Executor], db_url: str, name: str,
              specs: list[ToolSpec]) -> Callable[[], ReadThrough]:
    """An executor factory running `factory`'s executors behind the cache `name` of the database `db_url` (opened
    now, with the tools' specs saved, so the cache can be synthesized from and templates derived from it)."""
    cache = RecordedCache(db_url, name, specs)
    return lambda: ReadThrough(factory(), cache)
