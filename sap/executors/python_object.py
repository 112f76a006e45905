"""Executor over plain Python objects whose public methods are the tools (BFCL style)."""
from __future__ import annotations

import ctypes
import hashlib
import inspect
import json
import queue
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable

from sap.errors import SapError
from sap.executors.failures import FailureShape, failure_text
from sap.jsonutil import json_copy
from sap.model import ExecResult, ToolCall


class ToolTimeout(BaseException):
    """Raised inside a tool thread that ran past its time limit (a BaseException, so `except Exception` won't eat it)."""


class ToolHung(SapError):
    """A tool call did not return within the executor's time limit: the trajectory cannot go on (its slot fails)."""


def _interrupt_thread(thread: threading.Thread) -> None:
    """Ask a runaway tool thread to stop at its next bytecode (it cannot be killed outright)."""
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(ToolTimeout))


class ToolThread:
    """A daemon thread running one tool call at a time. A call that hangs in a blocking call is abandoned with its
    thread, which never keeps the process alive (a ThreadPoolExecutor's worker is joined at exit)."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[tuple[Future, Callable[..., Any], dict[str, Any]] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name="sap-tool", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        """Run queued calls until told to stop (None) or interrupted."""
        try:
            while (item := self._calls.get()) is not None:
                future, fn, args = item
                try:
                    future.set_result(fn(**args))
                except BaseException as exc:  # the caller re-raises it (a ToolTimeout: nobody waits any more)
                    future.set_exception(exc)
        except ToolTimeout:  # arrived between calls
            return

    def submit(self, fn: Callable[..., Any], args: dict[str, Any]) -> Future:
        """Queue fn(**args); its future."""
        future: Future = Future()
        self._calls.put((future, fn, args))
        return future

    def abandon(self) -> None:
        """Interrupt the running call at its next bytecode and let the thread end after it."""
        self._calls.put(None)
        _interrupt_thread(self.thread)

    def stop(self) -> None:
        """Let the thread end once its queued calls are done."""
        self._calls.put(None)


class PythonObjectExecutor:
    """Runs calls as method calls on instances of `classes`, each loaded from c0 by `_load_scenario`.

    With one class, c0 is that class's configuration; with several, c0 maps class name -> configuration.
    A failed call leaves the state as it was. A tool that raises or returns non-JSON gives an error result and is
    rolled back; so is an error-shaped result (`{"error": ...}`, an error list or "Error: ..." text, or one of the
    declared `failure_shapes`, see sap.executors.failures) unless `trust_error_results` says the classes are known
    (tested) to change nothing when they return one. A call that runs past `timeout` seconds is rolled back and
    raises ToolHung (its slot fails). Snapshots are replay logs (c0 plus the calls run since), so taking one is
    cheap and restoring one rebuilds fresh instances that a runaway thread cannot touch.
    """

    def __init__(self, classes: list[type], timeout: float = 5.0, trust_error_results: bool = False,
                 failure_shapes: tuple[FailureShape, ...] = ()) -> None:
        self.classes = list(classes)
        self.timeout = timeout
        self.trust_error_results = trust_error_results
        self.failure_shapes = failure_shapes
        self.instances: dict[str, Any] = {}
        self._c0: dict[str, Any] = {}
        self._log: list[tuple[str, dict[str, Any]]] = []
        self._tool_thread: ToolThread | None = None
        self._changes = 0  # counts resets and calls: the state hash is kept until the next one
        self._hashed: tuple[int, str] | None = None

    def reset(self, c0: dict[str, Any]) -> None:
        """Create fresh instances and load c0 into each; the executor keeps its own copy of c0."""
        self._load(json_copy(c0))

    def _load(self, c0: dict[str, Any]) -> None:
        """Create fresh instances from the executor's private c0 (each loader gets a copy of its part)."""
        self._c0 = c0
        self._log = []
        self._changes += 1
        self.instances = {}
        for cls in self.classes:
            self.instances[cls.__name__] = self._new_instance(cls, c0)

    def _new_instance(self, cls: type, c0: dict[str, Any]) -> Any:
        """An instance of `cls` loaded with its part of c0 (all of c0 when it is the only class)."""
        inst = cls()
        config = c0 if len(self.classes) == 1 else c0.get(cls.__name__, {})
        loader = getattr(inst, "_load_scenario", None)
        if loader is not None:
            loader(json_copy(config))
        return inst

    def _method(self, name: str) -> Any:
        """The bound public method called `name`, or None."""
        if name.startswith("_"):
            return None
        for inst in self.instances.values():
            fn = getattr(inst, name, None)
            if callable(fn):
                return fn
        return None

    def _run_in_worker(self, name: str, fn: Any, args: dict[str, Any]) -> Any:
        """Call fn(**args) on the tool thread, waiting at most `timeout` seconds (else ToolHung, and the thread is
        abandoned)."""
        if self._tool_thread is None:
            self._tool_thread = ToolThread()
        try:
            return self._tool_thread.submit(fn, args).result(timeout=self.timeout)
        except FutureTimeout:
            self._tool_thread.abandon()
            self._tool_thread = None
            raise ToolHung(f"tool {name!r} did not return within {self.timeout:g} s (the call is abandoned)") from None

    def execute(self, call: ToolCall) -> ExecResult:
        """Run one call; failures become error results, except a call that hangs (ToolHung)."""
        fn = self._method(call.name)
        if fn is None:
            return ExecResult(ok=False, error=f"unknown tool {call.name!r}")
        try:
            inspect.signature(fn).bind(**call.args_exec)
        except TypeError as exc:
            return ExecResult(ok=False, error=f"{call.name}: bad arguments: {exc}")
        before = self.snapshot()
        self._changes += 1
        try:
            value = self._run_in_worker(call.name, fn, json_copy(call.args_exec))
        except ToolHung:
            self.restore(before)
            raise
        except Exception as exc:  # a tool bug must not crash the run
            self.restore(before)
            return ExecResult(ok=False, error=f"{call.name} raised {type(exc).__name__}: {exc}")
        try:
            value = json.loads(json.dumps(value))
        except (TypeError, ValueError) as exc:
            self.restore(before)
            return ExecResult(ok=False, error=f"{call.name} returned a non-JSON value: {exc}")
        self._log.append((call.name, json_copy(call.args_exec)))
        problem = failure_text(call.name, value, self.failure_shapes)
        if problem is not None:
            if not self.trust_error_results:
                self.restore(before)
            return ExecResult(ok=False, value=value, error=problem)
        return ExecResult(ok=True, value=value)

    def close(self) -> None:
        """Stop the tool thread."""
        if self._tool_thread is not None:
            self._tool_thread.stop()
            self._tool_thread = None

    def snapshot(self) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
        """The replay log: c0 and the calls that ran to completion since."""
        return self._c0, list(self._log)

    def restore(self, snap: tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]) -> None:
        """Rebuild fresh instances from c0 and re-run the logged calls."""
        c0, log = snap
        self._load(c0)
        for name, args in log:
            self._run_in_worker(name, self._method(name), json_copy(args))
        self._log = list(log)

    def state_hash(self) -> str:
        """`end_state_hash`'s sha256 of the canonical JSON of `state()`, computed once per state: kept until the next
        reset or call (a write's before-hash is the previous call's after-hash)."""
        if self._hashed is None or self._hashed[0] != self._changes:
            text = json.dumps(self.state(), sort_keys=True, default=repr)
            self._hashed = (self._changes, hashlib.sha256(text.encode()).hexdigest())
        return self._hashed[1]

    def state(self) -> dict[str, Any]:
        """Each instance's `_state()` (or its public attributes), by class name, as a JSON copy (`_state()` may return
        the instance's live structures)."""
        out: dict[str, Any] = {}
        for name, inst in self.instances.items():
            getter = getattr(inst, "_state", None)
            raw = getter() if callable(getter) else {k: v for k, v in vars(inst).items() if not k.startswith("_")}
            out[name] = json.loads(json.dumps(raw, default=repr))
        return out
