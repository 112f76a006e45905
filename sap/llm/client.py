"""LLMClient: structured LLM answers per role via LiteLLM, with limits, retries, error feedback and accounting."""
from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

import httpx
from pydantic import BaseModel
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from sap.errors import SapError
from sap.llm.config import ModelConfig, load_litellm
from sap.llm.limits import LimiterRegistry, ModelLimiter
from sap.llm.schema import ResponseSchema, strict_ready
from sap.llm.secrets import holds_secret, redact
from sap.llm.structured import ResponseT, StructuredOutputError, parse_structured
from sap.llm.usage import Budget, UsageLedger, response_cost, token_cost
from sap.llm.wire import assistant_message, plan_for, post

Check = Callable[[Any], None]  # a role's own validation of a parsed answer; raises ValueError

FailureKind = Literal["config", "rejected", "transient", "invalid"]

# Sent to OpenAI-compatible servers (api_base set, no key configured): the openai SDK refuses to send no key at all.
_PLACEHOLDER_KEY = "sk-none"
_TRANSIENT_STATUS = frozenset({408, 409, 429})
HANG_TIMEOUTS = 2  # a request that timed out this many times is given up: a hanging server costs 2 timeouts, not 6
HANG_MARGIN = 0.1  # of a request timeout: kept from a hang's budget of HANG_TIMEOUTS timeouts for its own handling
_CHARS_PER_TOKEN = 4
# `structured = "auto"` asks once whether a server takes json_schema: a request this small, refused with one of these
PROBE_SCHEMA = ResponseSchema("probe", {"type": "object", "properties": {"ok": {"type": "boolean"}},
                                        "required": ["ok"], "additionalProperties": False})
PROBE_REFUSED_STATUS = frozenset({400, 422})  # llama.cpp: 400 'response_format type must be one of "text" or ...'
log = logging.getLogger(__name__)


class LLMRoleError(SapError, RuntimeError):
    """A role's LLM call gave up. `kind`: config (no key), rejected (a non-transient error such as 400/401),
    transient (retries exhausted) or invalid (no valid answer after the validation retries); `timed_out` when a
    transient failure was the server not answering within the request timeout (a hang); `status`: the HTTP status
    the server answered with, if any."""

    def __init__(self, role: str, model: str, kind: FailureKind, reason: str, timed_out: bool = False,
                 status: int | None = None):
        super().__init__(f"LLM role {role!r} ({model}) failed, {kind}: {reason}")
        self.role, self.model, self.kind, self.reason, self.timed_out = role, model, kind, reason, timed_out
        self.status = status  # the server's HTTP status, when it answered with one


def is_transient(exc: BaseException) -> bool:
    """Whether a LiteLLM error is worth retrying: rate limits, timeouts, connection errors and 5xx."""
    litellm = load_litellm()
    transient_classes = (litellm.RateLimitError, litellm.Timeout, litellm.APIConnectionError,
                         litellm.InternalServerError, litellm.BadGatewayError, litellm.ServiceUnavailableError)
    if isinstance(exc, transient_classes):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(exc, litellm.APIError) and isinstance(status, int) and (
        status in _TRANSIENT_STATUS or status >= 500)


def retry_after_seconds(exc: BaseException) -> float | None:
    """The wait a server asked for in Retry-After (seconds or an HTTP date) or retry-after-ms, if any."""
    headers = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    values = {name.lower(): value for name, value in headers.items()}
    if "retry-after-ms" in values:
        with contextlib.suppress(ValueError):
            return max(0.0, float(values["retry-after-ms"]) / 1000)
    if "retry-after" not in values:
        return None
    try:
        return max(0.0, float(values["retry-after"]))
    except ValueError:
        when = email.utils.parsedate_tz(values["retry-after"])
        return None if when is None else max(0.0, email.utils.mktime_tz(when) - time.time())


class LLMClient:
    """Structured LLM calls per role, sharing one process-wide event loop thread, its limiters, and one ledger."""

    def __init__(self, ledger: UsageLedger | None = None, budget: Budget | None = None):
        self.ledger = UsageLedger() if ledger is None else ledger
        self.budget = budget

    async def acomplete(self, role: str, cfg: ModelConfig, messages: list[dict[str, Any]],
                        response_model: type[ResponseT], check: Check | None = None,
                        schema: ResponseSchema | None = None) -> ResponseT:
        """The model's answer to `messages` as a `response_model`; raises LLMRoleError or BudgetExceeded.

        `schema` is this request's exact response schema (default: the model's own): it is sent (strict where the
        provider supports it and the schema meets strict mode) and every answer is validated against it before
        `response_model` parses it. `check` validates what the schema cannot (values the role needs): a
        ValueError it raises is fed back to the model like a schema error."""
        loop_thread = _llm_loop_thread()
        call = self._call(role, cfg, messages, response_model, loop_thread.limiters, check, schema)
        if asyncio.get_running_loop() is loop_thread.loop:
            return await call
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call, loop_thread.loop))

    def complete(self, role: str, cfg: ModelConfig, messages: list[dict[str, Any]],
                 response_model: type[ResponseT], check: Check | None = None,
                 schema: ResponseSchema | None = None) -> ResponseT:
        """The blocking form of `acomplete`, safe to call from many threads at once."""
        return _run_blocking("complete", lambda limiters: self._call(
            role, cfg, messages, response_model, limiters, check, schema))

    def chat(self, role: str, cfg: ModelConfig, messages: list[dict[str, Any]],
             tools: list[dict[str, Any]]) -> dict[str, Any]:
        """One plain chat turn with OpenAI `tools` offered: the assistant message as a dict, with `content` and,
        if the model called tools, `tool_calls` (id, type, function {name, arguments as a JSON string}).

        Limits, transient retries, usage and the budget apply as for `complete`; there is no validation loop:
        the caller judges the answer. Blocking and thread-safe; raises LLMRoleError or BudgetExceeded."""
        async def call(limiters: LimiterRegistry) -> dict[str, Any]:
            try:
                api_key = _api_key(role, cfg)
                request = {**_base_request(cfg, api_key), "messages": [dict(m) for m in messages]}
                if tools:
                    request["tools"] = tools
                return await self._request(role, cfg, limiters.get(cfg), request, api_key)
            except LLMRoleError:
                self.ledger.record_failure(role)
                raise

        return _run_blocking("chat", call)

    async def _call(self, role: str, cfg: ModelConfig, messages: list[dict[str, Any]],
                    response_model: type[ResponseT], limiters: LimiterRegistry, check: Check | None,
                    schema: ResponseSchema | None) -> ResponseT:
        try:
            return await self._answer(role, cfg, messages, response_model, limiters, check, schema)
        except LLMRoleError:
            self.ledger.record_failure(role)
            raise

    async def _answer(self, role: str, cfg: ModelConfig, messages: list[dict[str, Any]],
                      response_model: type[ResponseT], limiters: LimiterRegistry, check: Check | None,
                      schema: ResponseSchema | None) -> ResponseT:
        """Ask until the answer parses and validates, feeding each invalid answer's error back."""
        api_key = _api_key(role, cfg)
        exact = schema or ResponseSchema(_schema_name(response_model), json.loads(_schema_json(response_model)))
        request = _base_request(cfg, api_key)
        limiter = limiters.get(cfg)
        mode = await self._structured_mode(role, cfg, limiter, api_key) if cfg.structured == "auto" \
            else cfg.structured
        if mode == "json_schema":
            request["response_format"] = {"type": "json_schema", "json_schema": {
                "name": exact.name, "schema": exact.schema, "strict": sends_strict(cfg.model, exact.schema)}}
            conversation = [dict(m) for m in messages]
        else:
            conversation = _with_schema_in_prompt(messages, json.dumps(exact.schema))
            if mode == "json_object":
                request["response_format"] = {"type": "json_object", "schema": exact.schema}
        last_error: StructuredOutputError | None = None
        for _ in range(cfg.max_validation_retries + 1):
            text = (await self._request(role, cfg, limiter, {**request, "messages": conversation}, api_key))[
                "content"] or ""
            try:
                answer = parse_structured(text, response_model, None if schema is None else schema.schema)
                if check is not None:
                    try:
                        check(answer)
                    except ValueError as exc:
                        raise StructuredOutputError(str(exc)) from exc
                return answer
            except StructuredOutputError as exc:
                self.ledger.record_validation_failure(role)
                last_error = exc
                conversation = [*conversation, {"role": "assistant", "content": text}, {"role": "user", "content": (
                    f"Your answer was invalid: {exc}. Reply with only a JSON object matching the schema.")}]
        raise LLMRoleError(role, cfg.model, "invalid", redact(
            f"no valid answer after {cfg.max_validation_retries + 1} attempts; last error: {last_error}", api_key))

    async def _structured_mode(self, role: str, cfg: ModelConfig, limiter: ModelLimiter, api_key: str | None) -> str:
        """The mode of a `structured = "auto"` config: json_schema if its server takes a tiny json_schema request,
        json_object if it refuses one (400/422, as llama.cpp's server does); asked once per (model, api_base) in
        this process, the probe counted as one of `role`'s calls. Any other failure is the role's, as for a
        request."""
        modes = _llm_loop_thread().structured_modes
        key = (cfg.model, cfg.api_base)
        async with modes.lock:  # the first role to ask probes; the others wait for its answer
            if key not in modes.known:
                probe = {**_base_request(cfg, api_key), "max_tokens": 16, "messages": [
                    {"role": "user", "content": 'Reply with the JSON object {"ok": true}.'}],
                    "response_format": {"type": "json_schema", "json_schema": {
                        "name": PROBE_SCHEMA.name, "schema": PROBE_SCHEMA.schema,
                        "strict": sends_strict(cfg.model, PROBE_SCHEMA.schema)}}}
                try:
                    await self._request(role, cfg, limiter, probe, api_key)
                    modes.known[key] = "json_schema"
                except LLMRoleError as exc:
                    if exc.kind != "rejected" or exc.status not in PROBE_REFUSED_STATUS:
                        raise
                    log.info("%s at %s refused a json_schema request (%s): structured answers use json_object",
                             cfg.model, cfg.api_base or "its provider", exc.reason)
                    modes.known[key] = "json_object"
            return modes.known[key]

    async def _request(self, role: str, cfg: ModelConfig, limiter: ModelLimiter, request: dict[str, Any],
                       api_key: str | None) -> dict[str, Any]:
        """Send one request, retrying transient errors; record its usage and return the answer's message as an
        OpenAI message dict. A request to an OpenAI-compatible server goes out on the direct wire (sap.llm.wire:
        LiteLLM planned its body once), every other one through litellm.acompletion."""
        litellm = load_litellm()
        plan = plan_for(cfg, request)
        estimated_tokens = _estimated_tokens(request["messages"], cfg.max_tokens) if cfg.tpm else 0
        policy = _TransientPolicy(cfg)
        retrying = AsyncRetrying(
            retry=retry_if_exception(is_transient), stop=policy.stop, wait=policy.wait, reraise=True,
            before_sleep=lambda state: self.ledger.record_transient_retry(role, state.upcoming_sleep))
        try:
            async for attempt in retrying:
                with attempt:
                    async with limiter.slot(estimated_tokens) as grant:
                        if self.budget is not None:
                            self.budget.check(self.ledger)
                        if plan is None:
                            response = await litellm.acompletion(**{**request, "timeout": policy.begin()})
                            usage = getattr(response, "usage", None)
                            message = _message_dict(response.choices[0].message)
                            prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
                            completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
                        else:
                            answer = await post(_llm_loop_thread().http, plan, request, api_key, policy.begin())
                            message = answer.message
                            prompt_tokens, completion_tokens = answer.prompt_tokens, answer.completion_tokens
                        grant.tokens = prompt_tokens + completion_tokens
        except tuple(litellm.LITELLM_EXCEPTION_TYPES) as exc:
            transient = is_transient(exc)
            retries = retrying.statistics.get("attempt_number", 1) - 1
            reason = redact(f"{'after ' + str(retries) + ' retries, ' if transient else ''}"
                               f"{type(exc).__name__}: {exc}", api_key)
            status = getattr(exc, "status_code", None)
            error = LLMRoleError(role, cfg.model, "transient" if transient else "rejected", reason,
                                 timed_out=isinstance(exc, litellm.Timeout),
                                 status=status if isinstance(status, int) else None)
            # A server may echo a key in its error text: then the original exception is not chained.
            raise error from (None if holds_secret(str(exc), api_key) else exc)
        # the wire's requests are priced by sap from the cost map's prices, looked up once per config
        cost, priced = response_cost(cfg, prompt_tokens, completion_tokens, response) if plan is None \
            else token_cost(cfg, prompt_tokens, completion_tokens)
        self.ledger.record_response(role, prompt_tokens, completion_tokens, cost, priced)
        return message


class StructuredModes:
    """The structured mode each (model, api_base) of a `structured = "auto"` config settled on, and the lock its
    one probe is made under (used on the LLM loop thread only)."""

    def __init__(self) -> None:
        self.known: dict[tuple[str, str | None], str] = {}
        self.lock = asyncio.Lock()


class _LLMLoopThread:
    """The process-wide event loop thread that runs every LLM request, the limiters bound to it, the structured
    modes `auto` configs settled on and the pooled HTTP client of the direct wire."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.http = httpx.AsyncClient(limits=httpx.Limits(max_connections=None, max_keepalive_connections=None))
        self.limiters = LimiterRegistry()
        self.structured_modes = StructuredModes()
        self.thread = threading.Thread(target=self.loop.run_forever, name="sap-llm-loop", daemon=True)
        self.thread.start()


_loop_thread: _LLMLoopThread | None = None
_loop_thread_lock = threading.Lock()


def _llm_loop_thread() -> _LLMLoopThread:
    """The loop thread, started on first use; LiteLLM is imported first, on the caller's thread, so that its
    seconds-long import never stalls the loop."""
    global _loop_thread
    load_litellm()
    with _loop_thread_lock:
        if _loop_thread is None:
            _loop_thread = _LLMLoopThread()
        return _loop_thread


def _forget_loop_thread_after_fork() -> None:
    """A forked child has no copy of the loop thread: it starts its own on first use."""
    global _loop_thread, _loop_thread_lock
    _loop_thread, _loop_thread_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_loop_thread_after_fork)


def _run_blocking(method: str, make_call: Callable[[LimiterRegistry], Any]) -> Any:
    """Run the coroutine `make_call(limiters)` on the LLM loop thread and wait for its result."""
    loop_thread = _llm_loop_thread()
    if threading.current_thread() is loop_thread.thread:
        raise RuntimeError(f"LLMClient.{method}() was called on the LLM event loop thread, where it would block the "
                           f"loop; await acomplete() there")
    future = asyncio.run_coroutine_threadsafe(make_call(loop_thread.limiters), loop_thread.loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise


def sends_strict(model: str, schema: dict[str, Any]) -> bool:
    """Whether a json_schema request to `model` carries `strict: true`: LiteLLM knows the model to support response
    schemas (OpenAI's, Azure's, ...) and the schema meets strict mode's rules."""
    return strict_ready(schema) and _supports_response_schema(model)


@functools.lru_cache(maxsize=64)
def _supports_response_schema(model: str) -> bool:
    """LiteLLM's word on whether `model` takes a json_schema response_format (False for models it does not know)."""
    try:
        return bool(load_litellm().supports_response_schema(model=model))
    except Exception:  # LiteLLM raises on model names it cannot map to a provider
        return False


def _base_request(cfg: ModelConfig, api_key: str | None) -> dict[str, Any]:
    """The LiteLLM arguments every request of `cfg` carries."""
    request: dict[str, Any] = {
        "model": cfg.model, "api_base": cfg.api_base, "api_key": api_key, "temperature": cfg.temperature,
        "max_tokens": cfg.max_tokens, "timeout": cfg.timeout,
        "num_retries": 0, "max_retries": 0,  # LiteLLM's and the openai SDK's own retries: tenacity retries here
    }
    if cfg.input_cost_per_token is not None:  # LiteLLM prices the response itself without a cost-map search
        request.update(input_cost_per_token=cfg.input_cost_per_token, output_cost_per_token=cfg.output_cost_per_token)
    return request


def _message_dict(message: Any) -> dict[str, Any]:
    """A LiteLLM assistant message as a plain OpenAI message dict."""
    return assistant_message(message.content, [(c.id, c.function.name, c.function.arguments)
                                               for c in getattr(message, "tool_calls", None) or []])


def _api_key(role: str, cfg: ModelConfig) -> str | None:
    """The key from cfg.api_key_env, read now; a placeholder for a keyless api_base; else None (LiteLLM's default)."""
    if cfg.api_key_env is None:
        return _PLACEHOLDER_KEY if cfg.api_base else None
    key = os.environ.get(cfg.api_key_env)
    if not key:
        raise LLMRoleError(role, cfg.model, "config", f"environment variable {cfg.api_key_env} is not set")
    return key


class _TransientPolicy:
    """Tenacity's stop and wait for one request's transient errors, and each attempt's timeout. Stop: after
    max_retries retries, or once the request has timed out HANG_TIMEOUTS times (each timeout waits a whole `timeout`,
    so retrying a hang max_retries times multiplied the wait by 6), or when its hang budget is spent. Wait: the
    server's Retry-After if it sent one, else exponential backoff with jitter, at most backoff_max; none after a
    timeout. The hang budget, from the start of the first attempt that timed out, is HANG_TIMEOUTS timeouts less
    HANG_MARGIN of one; a retry after a timeout gets what is left of it (a timeout fires a little late, most of all on
    a busy machine), so that a hanging server fails within HANG_TIMEOUTS request timeouts, its handling included."""

    def __init__(self, cfg: ModelConfig) -> None:
        self.cfg, self.timeouts = cfg, 0
        self.started = 0.0  # when the latest attempt began (time.monotonic)
        self.hang_end: float | None = None  # when the hang budget runs out, once an attempt has timed out
        self.attempts = stop_after_attempt(cfg.max_retries + 1)
        self.backoff = wait_exponential_jitter(multiplier=cfg.backoff_base, max=cfg.backoff_max,
                                               jitter=cfg.backoff_base)
        self.timeout_class = load_litellm().Timeout

    def begin(self) -> float:
        """The timeout of the attempt starting now: the request timeout, within what is left of the hang budget (at
        least HANG_MARGIN of a timeout: a backoff after another error may have spent the rest)."""
        self.started = time.monotonic()
        if self.hang_end is None:
            return self.cfg.timeout
        return max(HANG_MARGIN * self.cfg.timeout, min(self.cfg.timeout, self.hang_end - self.started))

    def _timed_out(self, state: RetryCallState) -> bool:
        """Whether the attempt that just ended timed out."""
        return state.outcome is not None and isinstance(state.outcome.exception(), self.timeout_class)

    def stop(self, state: RetryCallState) -> bool:
        """Whether to give up after the attempt that just ended (tenacity calls this once per failed attempt)."""
        if self._timed_out(state):
            self.timeouts += 1
            if self.hang_end is None:
                self.hang_end = self.started + (HANG_TIMEOUTS - HANG_MARGIN) * self.cfg.timeout
        hang_spent = self.hang_end is not None and self.hang_end - time.monotonic() <= HANG_MARGIN * self.cfg.timeout
        return self.attempts(state) or self.timeouts >= HANG_TIMEOUTS or hang_spent

    def wait(self, state: RetryCallState) -> float:
        """Seconds before the next attempt."""
        if self._timed_out(state):
            return 0.0  # the request already waited a whole timeout
        exc = state.outcome.exception() if state.outcome is not None else None
        requested = retry_after_seconds(exc) if exc is not None else None
        return min(requested, self.cfg.backoff_max) if requested is not None else self.backoff(state)


@functools.lru_cache(maxsize=256)
def _schema_json(response_model: type[BaseModel]) -> str:
    return json.dumps(response_model.model_json_schema())


def _schema_name(response_model: type[BaseModel]) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", response_model.__name__)[:64]


def _with_schema_in_prompt(messages: list[dict[str, Any]], schema: str) -> list[dict[str, Any]]:
    """The messages with the schema instruction appended to the leading system message (or as a new one)."""
    instruction = f"Reply with only a JSON object that matches this JSON schema:\n{schema}"
    first = messages[0] if messages else None
    if first is not None and first.get("role") == "system" and isinstance(first.get("content"), str):
        return [{**first, "content": f"{first['content']}\n\n{instruction}"}, *(dict(m) for m in messages[1:])]
    return [{"role": "system", "content": instruction}, *(dict(m) for m in messages)]


def _estimated_tokens(messages: list[dict[str, Any]], max_tokens: int) -> int:
    """A request's worst-case token count for the tpm window: rough prompt size plus the whole completion budget."""
    return sum(len(str(m.get("content") or "")) for m in messages) // _CHARS_PER_TOKEN + max_tokens
