"""The environments over HTTP, for any trainer out of process: a JSON API with one session per episode.

    GET  /tasks   -> {"tasks": [{index, task_id, toolset, turns, tools}, ...]}
    POST /reset   {"task_id": ...} or {"index": ...}, optional "max_steps"
                  -> {"session", "task_id", "messages": [system, first user], "tools": OpenAI tools of the turn}
    POST /step    {"session", "message": an OpenAI assistant message}
                  -> {"messages": [tool results, next user message], "tools", "done", "reward"}
    POST /close   {"session"} -> {"closed": true}

A finished episode's session is closed by its last step (its reward is in that answer). Bad input answers 400,
an unknown session or task 404, a full server 503, each as {"error": "..."} naming the field and value."""
from __future__ import annotations

import json
import threading
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sap.envs.catalog import TaskCatalog
from sap.envs.episode import ToolEnv
from sap.errors import SapError

MAX_BODY = 16 * 1024 * 1024


class RequestError(SapError):
    """A request the server refuses: its HTTP status and message."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class Sessions:
    """Open episodes by session id, each with its own lock (requests of one session run one at a time)."""

    def __init__(self, catalog: TaskCatalog, max_sessions: int, max_steps: int) -> None:
        self.catalog, self.max_sessions, self.max_steps = catalog, max_sessions, max_steps
        self.lock = threading.Lock()
        self.open: dict[str, tuple[threading.Lock, ToolEnv]] = {}

    def reset(self, body: dict[str, Any]) -> dict[str, Any]:
        """Open a session on the task the body names and start its episode."""
        max_steps = body.get("max_steps", self.max_steps)
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise RequestError(HTTPStatus.BAD_REQUEST, f"max_steps: {max_steps!r} is not a positive integer")
        try:
            task = self.catalog.get(body.get("task_id"), body.get("index"))
        except KeyError as exc:
            raise RequestError(HTTPStatus.NOT_FOUND, exc.args[0]) from None
        env = ToolEnv(task, max_steps=max_steps)
        with self.lock:
            if len(self.open) >= self.max_sessions:
                raise RequestError(HTTPStatus.SERVICE_UNAVAILABLE, f"{len(self.open)} sessions are open, the most "
                                   "this server keeps; finish or POST /close some")
            session = uuid.uuid4().hex
            self.open[session] = (threading.Lock(), env)
        try:
            messages = env.reset()
        except BaseException:
            self.drop(session)
            raise
        if env.done:
            self.drop(session)
        return {"session": session, "task_id": task.id, "messages": messages, "tools": env.tools(),
                "done": env.done, "reward": env.reward}

    def _session(self, body: dict[str, Any]) -> tuple[str, threading.Lock, ToolEnv]:
        session = body.get("session")
        if not isinstance(session, str):
            raise RequestError(HTTPStatus.BAD_REQUEST, f"session: expected the id /reset returned, got {session!r}")
        with self.lock:
            if session not in self.open:
                raise RequestError(HTTPStatus.NOT_FOUND, f"session: no open session {session!r} (finished, closed, "
                                   "or never opened)")
            return (session, *self.open[session])

    def step(self, body: dict[str, Any]) -> dict[str, Any]:
        """One assistant message into its session's episode."""
        session, lock, env = self._session(body)
        if "message" not in body:
            raise RequestError(HTTPStatus.BAD_REQUEST, "message: missing (an OpenAI assistant message)")
        with lock:
            step = env.step(body["message"])
        if step.done:
            self.drop(session)
        return {"messages": step.messages, "tools": env.tools(), "done": step.done, "reward": step.reward}

    def close(self, body: dict[str, Any]) -> dict[str, Any]:
        """Close a session before its episode is over."""
        session, lock, env = self._session(body)
        with lock:
            env.close()
        self.drop(session)
        return {"closed": True}

    def drop(self, session: str) -> None:
        """Forget a session."""
        with self.lock:
            self.open.pop(session, None)


class EnvHandler(BaseHTTPRequestHandler):
    """Routes the JSON API to the server's Sessions."""

    server: EnvServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Quiet: a trainer makes thousands of requests."""

    def _answer(self, status: HTTPStatus, body: dict[str, Any]) -> None:
        data = json.dumps(body, ensure_ascii=False, default=str).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise RequestError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body: {length} bytes, more than {MAX_BODY}")
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RequestError(HTTPStatus.BAD_REQUEST, f"body: not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise RequestError(HTTPStatus.BAD_REQUEST, f"body: expected a JSON object, got {type(body).__name__}")
        return body

    def _serve(self, routes: dict[str, Any], with_body: bool) -> None:
        try:
            body = self._body() if with_body else {}  # read first: the connection stays usable after an error
            route = routes.get(self.path.split("?", 1)[0])
            if route is None:
                raise RequestError(HTTPStatus.NOT_FOUND, f"path: no {self.command} {self.path}; "
                                   f"try {', '.join(f'{self.command} {r}' for r in routes)}")
            self._answer(HTTPStatus.OK, route(body))
        except RequestError as exc:
            self._answer(exc.status, {"error": str(exc)})
        except (ValueError, TypeError) as exc:
            self._answer(HTTPStatus.BAD_REQUEST, {"error": str(exc)})

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        """GET /tasks."""
        self._serve({"/tasks": lambda _: {"tasks": self.server.catalog.summary()}}, with_body=False)

    def do_POST(self) -> None:  # noqa: N802 - the base class's name
        """POST /reset, /step, /close."""
        sessions = self.server.sessions
        self._serve({"/reset": sessions.reset, "/step": sessions.step, "/close": sessions.close}, with_body=True)


class EnvServer(ThreadingHTTPServer):
    """A threading HTTP server of a task catalog's environments (`serve_forever()`, `shutdown()`)."""

    daemon_threads = True

    def __init__(self, catalog: TaskCatalog, host: str = "127.0.0.1", port: int = 0, max_sessions: int = 1024,
                 max_steps: int = 8) -> None:
        if max_sessions < 1 or max_steps < 1:
            raise ValueError(f"max_sessions and max_steps must be at least 1, got {max_sessions}, {max_steps}")
        self.catalog = catalog
        self.sessions = Sessions(catalog, max_sessions, max_steps)
        super().__init__((host, port), EnvHandler)

    @property
    def url(self) -> str:
        """The server's base URL."""
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"
