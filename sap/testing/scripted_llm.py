"""ScriptedLLMServer: a local OpenAI-compatible chat-completions HTTP server that answers from a script."""
from __future__ import annotations

import json
import secrets
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """Answer 200 with this assistant content."""

    content: str


@dataclass(frozen=True)
class ToolCalls:
    """Answer 200 with an assistant message calling tools: (name, arguments) pairs, arguments as a dict (sent as
    JSON) or a raw string (sent as is), with optional content."""

    calls: tuple[tuple[str, dict[str, Any] | str], ...]
    content: str | None = None


@dataclass(frozen=True)
class Malformed:
    """Answer 200 with assistant content that holds no parseable JSON."""

    text: str = "Sure, here is the answer you asked for: {name: oops"


@dataclass(frozen=True)
class SchemaViolation:
    """Answer 200 with valid JSON of the wrong shape."""

    obj: Any


@dataclass(frozen=True)
class Status:
    """Answer with an HTTP error status and an OpenAI-style error body, optionally with a Retry-After header."""

    code: int
    retry_after: float | None = None
    message: str = "scripted error"
    echo_key: bool = False  # append the request's Authorization header, as a careless server's error text might


@dataclass(frozen=True)
class Hang:
    """Wait this many seconds, then answer as the responder would (the client has usually given up by then)."""

    seconds: float


@dataclass(frozen=True)
class Junk:
    """Answer 200 with a body that is not JSON at all (a proxy's HTML page, a half-started server)."""

    body: str = "<html><body>502 upstream not ready</body></html>"


@dataclass(frozen=True)
class CutOff:
    """Answer 200 as the responder would, but close the connection halfway through the body."""


Step = Reply | ToolCalls | Malformed | SchemaViolation | Status | Hang | Junk | CutOff
Responder = Callable[[dict[str, Any]], "str | ToolCalls"]


_SCHEMA_IN_PROMPT = "Reply with only a JSON object that matches this JSON schema:\n"
# what llama.cpp's server (builds without json_schema support) answers, with 400, to a json_schema response_format
LLAMA_CPP_REFUSAL = 'response_format type must be one of "text" or "json_object", but got: json_schema'


def request_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The response schema a chat request carries: in response_format (json_schema or json_object with schema),
    or else as the schema instruction of its system message; None if it has none."""
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        return response_format["json_schema"]["schema"]
    if "schema" in response_format:
        return response_format["schema"]
    system = next((m.get("content") for m in body.get("messages", []) if m.get("role") == "system"), None)
    if isinstance(system, str) and _SCHEMA_IN_PROMPT in system:
        return json.loads(system.split(_SCHEMA_IN_PROMPT, 1)[1])
    return None


class _QuietHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server that ignores clients hanging up (timeouts, closed keep-alive connections)."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _words(text: str) -> int:
    return len(text.split())


def _prompt_words(body: dict[str, Any]) -> int:
    total = 0
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            total += _words(content)
        elif isinstance(content, list):
            total += sum(_words(part.get("text", "")) for part in content if isinstance(part, dict))
    return total


class ScriptedLLMServer:
    """An OpenAI-compatible server on 127.0.0.1 that consumes one scripted step per chat-completions request.

    When the script is empty, `responder(request_json) -> content or ToolCalls` answers; without a responder the
    request gets a 400 naming the exhausted script. `latency` seconds are added to every answer.
    Usage is deterministic: prompt tokens = words in the request messages, completion tokens = words
    in the content. Every chat request body and its headers are recorded, in arrival order. With
    `refuse_json_schema` every request asking for a json_schema response_format gets llama.cpp's 400 (consuming no
    step), as a llama.cpp server without json_schema support does.
    """

    def __init__(self, steps: Iterable[Step] = (), responder: Responder | None = None, latency: float = 0.0,
                 refuse_json_schema: bool = False):
        self._steps: deque[Step] = deque(steps)
        self._refuse_json_schema = refuse_json_schema
        self._responder = responder
        self._latency = latency
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._requests: list[dict[str, Any]] = []
        self._headers: list[dict[str, str]] = []
        self._arrivals: list[float] = []
        self._in_flight = 0
        self._max_in_flight = 0
        # a prefix of its own, so that a later server on a reused port is a new endpoint to the process-wide limiters
        self._prefix = f"/s{secrets.token_hex(4)}"
        self._httpd = _QuietHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="scripted-llm", daemon=True)
        self._thread.start()

    @property
    def api_base(self) -> str:
        """The base URL to give LiteLLM, e.g. http://127.0.0.1:PORT/s1a2b3c4d/v1."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}{self._prefix}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Copies of the chat-completions request bodies received so far."""
        with self._lock:
            return json.loads(json.dumps(self._requests))

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The headers of each recorded request (lower-cased names), parallel to `requests`."""
        with self._lock:
            return [dict(h) for h in self._headers]

    @property
    def request_times(self) -> list[float]:
        """When each recorded request arrived (time.monotonic), parallel to `requests`."""
        with self._lock:
            return list(self._arrivals)

    @property
    def max_in_flight(self) -> int:
        """The largest number of chat requests that were being answered at the same time."""
        with self._lock:
            return self._max_in_flight

    def push(self, *steps: Step) -> None:
        """Append steps to the script."""
        with self._lock:
            self._steps.extend(steps)

    def clear(self) -> int:
        """Drop the steps not yet consumed (the responder answers from now on); how many there were."""
        with self._lock:
            dropped = len(self._steps)
            self._steps.clear()
            return dropped

    def close(self) -> None:
        """Stop serving; hanging and delayed answers are cut short."""
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def __enter__(self) -> ScriptedLLMServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _begin(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Step | None]:
        """Record a chat request; its number and the scripted step that answers it (None: the responder)."""
        with self._lock:
            self._requests.append(body)
            self._headers.append(headers)
            self._arrivals.append(time.monotonic())
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            if self._refuse_json_schema and (body.get("response_format") or {}).get("type") == "json_schema":
                return len(self._requests), Status(400, message=LLAMA_CPP_REFUSAL)
            return len(self._requests), (self._steps.popleft() if self._steps else None)

    def _end(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _answer(self, number: int, step: Step | None, body: dict[str, Any],
                authorization: str = "") -> tuple[int, dict[str, str], dict[str, Any]]:
        """The status, extra headers and JSON body for one chat request."""
        if isinstance(step, Hang):
            self._closing.wait(step.seconds)
            step = None
        if isinstance(step, Status):
            headers = {} if step.retry_after is None else {"Retry-After": f"{step.retry_after:g}"}
            message = f"{step.message} (you sent {authorization!r})" if step.echo_key else step.message
            return step.code, headers, {"error": {"message": message, "type": "scripted", "code": step.code}}
        if step is None and self._responder is not None:
            step = self._responder(body)
            step = Reply(step) if isinstance(step, str) else step
        if isinstance(step, ToolCalls):
            return 200, {}, self._completion(number, body, step.content, [
                {"id": f"call_{number}_{i}", "type": "function",
                 "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                for i, (name, args) in enumerate(step.calls)])
        if isinstance(step, Reply):
            content = step.content
        elif isinstance(step, Malformed):
            content = step.text
        elif isinstance(step, SchemaViolation):
            content = json.dumps(step.obj)
        else:
            message = "scripted server: the script is exhausted and there is no responder"
            return 400, {}, {"error": {"message": message, "type": "scripted", "code": 400}}
        return 200, {}, self._completion(number, body, content, [])

    @staticmethod
    def _completion(number: int, body: dict[str, Any], content: str | None,
                    tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
        """A chat.completion body; completion tokens count the words of the content and of the calls' JSON."""
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if tool_calls:
            message["tool_calls"] = tool_calls
        prompt_tokens = _prompt_words(body)
        completion_tokens = _words(content or "") + sum(_words(json.dumps(c["function"])) for c in tool_calls)
        return {
            "id": f"chatcmpl-scripted-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "finish_reason": "tool_calls" if tool_calls else "stop", "message": message}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms delayed-ACK stall

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send_json(self, status: int, headers: dict[str, str], doc: dict[str, Any],
                           cut: bool = False) -> None:
                self._send(status, headers, json.dumps(doc).encode(), "application/json", cut)

            def _send(self, status: int, headers: dict[str, str], payload: bytes, content_type: str,
                      cut: bool = False) -> None:
                """Send a response; `cut`: announce the whole body, send half of it and close the connection."""
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload[:len(payload) // 2] if cut else payload)
                    if cut:
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def do_GET(self) -> None:
                if self.path.rstrip("/") == f"{server._prefix}/v1/models":
                    self._send_json(200, {}, {"object": "list",
                                              "data": [{"id": "scripted", "object": "model", "owned_by": "sap"}]})
                else:
                    self._send_json(404, {}, {"error": {"message": f"no route {self.path}", "code": 404}})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path.rstrip("/") != f"{server._prefix}/v1/chat/completions":
                    self._send_json(404, {}, {"error": {"message": f"no route {self.path}", "code": 404}})
                    return
                body = json.loads(raw or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                number, step = server._begin(body, headers)
                try:
                    if server._latency:
                        server._closing.wait(server._latency)
                    if isinstance(step, Junk):
                        self._send(200, {}, step.body.encode(), "text/html")
                        return
                    cut = isinstance(step, CutOff)
                    status, extra, doc = server._answer(number, None if cut else step, body,
                                                        headers.get("authorization", ""))
                    self._send_json(status, extra, doc, cut)
                finally:
                    server._end()

        return Handler


class Outage:
    """A responder that answers as `answer` does and, once it has answered `good` requests, turns its server to
    `step` for every later request (until the server's steps are cleared): a server that breaks mid-run. Set
    `server` once the server exists."""

    def __init__(self, step: Step, good: int, answer: Responder) -> None:
        self.step, self.good, self.answer, self.answered = step, good, answer, 0
        self.server: ScriptedLLMServer | None = None

    def __call__(self, request: dict[str, Any]) -> str | ToolCalls:
        self.answered += 1
        if self.answered == self.good:
            self.server.push(*[self.step] * 10_000)
        return self.answer(request)
