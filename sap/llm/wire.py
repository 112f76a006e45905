"""The direct OpenAI-wire transport: LiteLLM plans a model's request body once, sap posts each request with httpx."""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any, NoReturn

import httpx

from sap.llm.config import ModelConfig, load_litellm

# Providers whose chat endpoint is OpenAI's own wire format at the config's api_base (an OpenAI-compatible server:
# vLLM, llama.cpp, SGLang, LM Studio, a proxy). Every other provider, and any of these without an api_base, is
# called through litellm.acompletion.
OPENAI_WIRE = frozenset({"openai", "hosted_vllm"})
# The body keys a request may carry beyond what the plan fixes; each is checked to reach the server as it is given
_PASSED_THROUGH = ("messages", "response_format", "tools")
_PROBE_MESSAGES = [{"role": "system", "content": "probe"}, {"role": "user", "content": "probe"}]
_PROBE_VALUES: dict[str, Any] = {
    "json_schema": {"type": "json_schema", "json_schema": {"name": "probe", "strict": False, "schema": {
        "type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}},
    "json_object": {"type": "json_object", "schema": {"type": "object"}},
    "tools": [{"type": "function", "function": {"name": "probe", "description": "probe",
                                                "parameters": {"type": "object", "properties": {}}}}],
}


@dataclass(frozen=True)
class WirePlan:
    """How one kind of request to one model is posted: the URL, LiteLLM's provider and model names, and the body
    fields LiteLLM maps from the config (model, temperature, max_tokens or what the model takes instead)."""

    url: str
    provider: str
    model: str
    fixed: dict[str, Any]


@dataclass(frozen=True)
class WireAnswer:
    """One answered request: the assistant message as an OpenAI message dict, and the tokens it used."""

    message: dict[str, Any]
    prompt_tokens: int
    completion_tokens: int


def request_shape(request: dict[str, Any]) -> tuple[str, ...]:
    """What kind of request this is, as far as the body LiteLLM builds for it can differ: its response format's
    type and whether it offers tools."""
    shape = []
    if "response_format" in request:
        shape.append(request["response_format"]["type"])
    if "tools" in request:
        shape.append("tools")
    return tuple(shape)


def user_callbacks() -> bool:
    """Whether LiteLLM callbacks (logging, tracing, cost hooks) are registered: they run only inside acompletion."""
    litellm = load_litellm()
    return any(getattr(litellm, name, None) for name in (
        "callbacks", "success_callback", "failure_callback", "input_callback"))


@functools.lru_cache(maxsize=128)
def wire_plan(model: str, api_base: str | None, temperature: float, max_tokens: int,
              shape: tuple[str, ...]) -> WirePlan | None:
    """The plan of requests of this shape, or None where they go through acompletion: a provider off the OpenAI
    wire, no api_base, or a body LiteLLM changes beyond the fixed fields (messages, response format or tools not
    sent as given). LiteLLM builds one probe request's body without sending it (`return_raw_request`); the fields
    it maps from the config are kept and reused."""
    if api_base is None:
        return None
    litellm = load_litellm()
    from litellm.types.utils import CallTypes

    try:
        name, provider, _, _ = litellm.get_llm_provider(model=model, api_base=api_base)
    except Exception:  # LiteLLM raises on model strings it cannot map to a provider: acompletion says why
        return None
    if provider not in OPENAI_WIRE:
        return None
    probe: dict[str, Any] = {"model": model, "api_base": api_base, "messages": _PROBE_MESSAGES,
                             "temperature": temperature, "max_tokens": max_tokens}
    for kind in shape:
        probe["tools" if kind == "tools" else "response_format"] = _PROBE_VALUES[kind]
    raw = litellm.utils.return_raw_request(CallTypes.completion, probe)
    body = raw.get("raw_request_body") if not raw.get("error") else None
    if not isinstance(body, dict) or body.pop("extra_body", {}) != {}:
        return None
    if any(body.get(key) != probe[key] for key in _PASSED_THROUGH if key in probe):
        return None
    url = str(raw.get("raw_request_api_base") or api_base).rstrip("/")
    if not url.endswith("/chat/completions"):
        url += "/chat/completions"
    return WirePlan(url=url, provider=provider, model=name,
                    fixed={key: value for key, value in body.items() if key not in _PASSED_THROUGH})


def plan_for(cfg: ModelConfig, request: dict[str, Any]) -> WirePlan | None:
    """The wire plan of this request to cfg's model, or None (acompletion; also whenever LiteLLM callbacks are
    registered, so that they see every request)."""
    if cfg.api_base is None or user_callbacks():
        return None
    return wire_plan(cfg.model, cfg.api_base, request["temperature"], request["max_tokens"], request_shape(request))


def assistant_message(content: str | None, calls: list[tuple[str | None, str, str | None]]) -> dict[str, Any]:
    """An assistant message as an OpenAI message dict: its content and, if it called tools, `tool_calls` (id, type,
    function {name, arguments as a JSON string, "{}" when none}) from (id, name, arguments) triples."""
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        out["tool_calls"] = [{"id": call_id, "type": "function", "function": {"name": name, "arguments": args or "{}"}}
                             for call_id, name, args in calls]
    return out


async def post(http: httpx.AsyncClient, plan: WirePlan, request: dict[str, Any], api_key: str | None,
               timeout: float) -> WireAnswer:
    """Post one request as planned. Errors are LiteLLM's exception classes, mapped by LiteLLM from the HTTP status
    or the transport error, so that retries and failure kinds are the same as through acompletion."""
    body = {**plan.fixed, **{key: request[key] for key in _PASSED_THROUGH if key in request}}
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    try:
        response = await http.post(plan.url, content=json.dumps(body), headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        _raise_mapped(plan, exc)
    if response.status_code >= 400:
        from litellm.llms.openai.common_utils import OpenAIError

        _raise_mapped(plan, OpenAIError(status_code=response.status_code, message=response.text,
                                        headers=response.headers))
    try:
        data = response.json()
        message = data["choices"][0]["message"]
        usage = data.get("usage") or {}
        calls = [(c.get("id"), c["function"]["name"], c["function"].get("arguments"))
                 for c in message.get("tool_calls") or []]
        return WireAnswer(assistant_message(message.get("content"), calls), int(usage.get("prompt_tokens") or 0),
                          int(usage.get("completion_tokens") or 0))
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise load_litellm().InternalServerError(
            message=f"the server answered {response.status_code} with no chat completion: {response.text[:200]!r}",
            llm_provider=plan.provider, model=plan.model) from exc


def _raise_mapped(plan: WirePlan, exc: Exception) -> NoReturn:
    """Raise LiteLLM's exception class for a failed request, mapped by LiteLLM itself (`exception_type`)."""
    load_litellm()
    from litellm.litellm_core_utils.exception_mapping_utils import exception_type

    exception_type(model=plan.model, original_exception=exc, custom_llm_provider="openai")
    raise exc  # exception_type always raises; kept for type checkers
