"""One MCP server connection run from synchronous code: the server process (stdio) or endpoint (streamable HTTP),
its session on a private event-loop thread, calls with time limits, and no orphaned server processes."""
from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from sap.errors import SapError

# A server writing lines that are not JSON-RPC makes the SDK log each one with a traceback; sap reports them itself.
logging.getLogger("mcp.client.stdio").setLevel(logging.CRITICAL)

PID_LINE = b"sap-mcp-pid "  # the shim's first stderr line: the server's pid (= its process group: a new session)
STDERR_KEPT = 2000  # characters of a server's stderr kept for error messages
# Run before the server on Linux: the kernel kills the server when the thread that started it (the connection's
# event-loop thread, alive as long as the connection) or the whole parent process dies; then exec the server.
_DEATH_SIGNAL_SHIM = ("import ctypes, os, signal, sys\n"
                      "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)\n"
                      "os.getppid() == int(sys.argv[1]) or os._exit(1)\n"
                      "sys.stderr.write(f'sap-mcp-pid {os.getpid()}\\n'); sys.stderr.flush()\n"
                      "os.execvp(sys.argv[2], sys.argv[2:])")


class ProtocolViolation(SapError, ValueError):
    """A server answer that breaks the protocol; its message says where (raised by a request's coroutine)."""


class ServerFailure(SapError, RuntimeError):
    """An MCP server that could not be started, listed or called; the message names the server and the reason."""


@dataclass(frozen=True)
class ServerParams:
    """How to reach one server: a command to run over stdio, or a streamable HTTP url."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None


_LIVE: weakref.WeakSet[McpConnection] = weakref.WeakSet()


def _kill_live() -> None:
    """At interpreter exit (also after Ctrl-C): kill the process group of every server still running."""
    for conn in list(_LIVE):
        conn.kill()


atexit.register(_kill_live)


class StderrTail:
    """The read end of a server's stderr pipe, drained by a thread that keeps only the last STDERR_KEPT characters
    (a server flooding stderr neither blocks nor fills memory)."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.writer = os.fdopen(write_fd, "w")
        self._chunks: deque[str] = deque()
        self._size = 0
        self.pid: int | None = None
        self.pid_known = threading.Event()
        self._thread = threading.Thread(target=self._drain, args=(read_fd,), daemon=True, name="sap-mcp-stderr")
        self._thread.start()

    def _drain(self, read_fd: int) -> None:
        """Read until every writer has closed the pipe."""
        with os.fdopen(read_fd, "rb") as reader:
            first = reader.readline(200)
            if first.startswith(PID_LINE):
                self.pid = int(first[len(PID_LINE):])
                first = b""
            self.pid_known.set()
            if first:
                self._chunks.append(first.decode("utf-8", "replace"))
                self._size = len(self._chunks[0])
            while chunk := reader.read1(65536):
                self._chunks.append(chunk.decode("utf-8", "replace"))
                self._size += len(self._chunks[-1])
                while self._size - len(self._chunks[0]) >= STDERR_KEPT:
                    self._size -= len(self._chunks.popleft())

    def text(self) -> str:
        """The last characters written, on one line."""
        return " | ".join("".join(self._chunks)[-STDERR_KEPT:].strip().splitlines()[-5:])

    def close_writer(self) -> None:
        """Close sap's copy of the write end (the server holds its own)."""
        if not self.writer.closed:
            self.writer.close()


def _stdio_command(params: ServerParams) -> tuple[str, list[str]]:
    """The command and arguments to start a stdio server with, behind the death-signal shim on Linux."""
    assert params.command is not None
    if sys.platform != "linux":
        return params.command, list(params.args)
    return sys.executable, ["-c", _DEATH_SIGNAL_SHIM, str(os.getpid()), params.command, *params.args]


class McpConnection:
    """A started server with an initialized session, driven from any thread through a private event loop.

    `start` raises ServerFailure when the server cannot be started or initialized within `start_timeout` seconds;
    `request` runs one session coroutine within a time limit and raises ServerFailure when the server times out,
    dies or answers with something that is not JSON-RPC. `close` (also at interpreter exit, on Ctrl-C, and by the
    kernel when the parent dies) stops the server and its process group.
    """

    def __init__(self, params: ServerParams, start_timeout: float = 60.0) -> None:
        self.params = params
        self.start_timeout = start_timeout
        self.session: Any = None
        self.pid: int | None = None
        self.bad_lines = 0
        self._portal_cm: Any = None
        self._portal: BlockingPortal | None = None
        self._stop: anyio.Event | None = None
        self._done: Any = None
        self._stderr: StderrTail | None = None

    def describe(self, reason: str) -> str:
        """`server NAME: reason`, with the server's last stderr lines when it wrote any."""
        tail = self._stderr.text() if self._stderr is not None else ""
        return f"MCP server {self.params.name!r}: {reason}" + (f" (stderr: {tail})" if tail else "")

    def start(self) -> None:
        """Start the server and initialize its session."""
        self._portal_cm = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        self._stop = self._portal.call(anyio.Event)
        ready: threading.Event = threading.Event()
        failure: list[BaseException] = []
        self._done = self._portal.start_task_soon(self._serve, ready, failure)
        if not ready.wait(self.start_timeout) or failure:
            reason = (f"did not start within {self.start_timeout:g} s" if not failure
                      else f"failed to start: {type(failure[0]).__name__}: {failure[0]}")
            self.close()
            raise ServerFailure(self.describe(reason))
        _LIVE.add(self)

    async def _on_message(self, message: Any) -> None:
        """Count what the server wrote that is not a JSON-RPC message."""
        if isinstance(message, Exception):
            self.bad_lines += 1

    async def _serve(self, ready: threading.Event, failure: list[BaseException]) -> None:
        """Hold the transport and the session open until `close`."""
        from mcp import ClientSession, StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client
        try:
            if self.params.url is not None:
                transport = streamable_http_client(self.params.url)
            else:
                self._stderr = StderrTail()
                command, args = _stdio_command(self.params)
                transport = stdio_client(StdioServerParameters(command=command, args=args, env=self.params.env,
                                                               cwd=self.params.cwd), errlog=self._stderr.writer)
            async with transport as streams:
                if self._stderr is not None:
                    self._stderr.close_writer()
                async with ClientSession(streams[0], streams[1], message_handler=self._on_message) as session:
                    await session.initialize()
                    self.session = session
                    if self._stderr is not None and await anyio.to_thread.run_sync(self._stderr.pid_known.wait, 5):
                        self.pid = self._stderr.pid
                    ready.set()
                    assert self._stop is not None
                    await self._stop.wait()
        except Exception as exc:  # any start failure is reported by `start`
            failure.append(exc)
        finally:
            if self._stderr is not None:
                self._stderr.close_writer()
            ready.set()

    def request(self, make: Callable[[Any], Any], timeout: float, what: str) -> Any:
        """Await `make(session)` on the loop within `timeout` seconds; a timeout, a closed connection or lines
        that are not JSON-RPC raise ServerFailure naming the server and `what`."""
        if self._portal is None or self.session is None:
            raise ServerFailure(self.describe(f"{what}: server is not running"))
        bad_before = self.bad_lines

        async def bounded() -> Any:
            with anyio.fail_after(timeout):
                return await make(self.session)
        try:
            return self._portal.call(bounded)
        except TimeoutError:
            garbage = self.bad_lines - bad_before
            extra = f" (it wrote {garbage} line(s) that are not JSON-RPC)" if garbage else ""
            raise ServerFailure(self.describe(f"{what} timed out after {timeout:g} s{extra}")) from None
        except ProtocolViolation as exc:
            raise ServerFailure(self.describe(f"{what}: {exc}")) from None
        except Exception as exc:  # MCPError, a closed stream, a result off the protocol: all are failed calls
            if self._done is not None and self._done.done():
                raise ServerFailure(self.describe(f"{what}: server exited ({type(exc).__name__}: {exc})")) from None
            raise ServerFailure(self.describe(f"{what}: {type(exc).__name__}: {exc}")) from None

    def kill(self) -> None:
        """Kill the server's process group at once (interpreter exit; `close` stops it gently first)."""
        if self.pid is not None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def close(self) -> None:
        """Stop the server (stdin closed, then the SDK's terminate and kill of its process tree) and the loop."""
        _LIVE.discard(self)
        if self._portal is not None:
            try:
                if self._stop is not None:
                    self._portal.call(self._stop.set)
                if self._done is not None:
                    self._done.result(timeout=10)
            except Exception:  # a server that will not stop is killed
                self.kill()
            self._portal_cm.__exit__(None, None, None)
        self._portal = self._portal_cm = None
        self.pid = None
        self.session = None
        if self._stderr is not None:
            self._stderr.close_writer()

