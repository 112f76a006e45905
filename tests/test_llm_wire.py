"""The direct OpenAI wire (sap.llm.wire): the body it posts is the one LiteLLM's acompletion sends, LiteLLM's
parameter mapping is kept, and what it cannot post the same way goes through acompletion."""
from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from sap.llm import LLMClient, ModelConfig
from sap.llm.config import load_litellm
from sap.llm.wire import plan_for, wire_plan
from sap.testing import ScriptedLLMServer, ToolCalls

USER = [{"role": "system", "content": "You answer in JSON."}, {"role": "user", "content": "Is it on?"}]
TOOLS = [{"type": "function", "function": {"name": "switch", "description": "Turn it on or off.", "parameters": {
    "type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"]}}}]
_CALLBACK_LISTS = ("callbacks", "success_callback", "failure_callback", "input_callback", "_async_success_callback",
                   "_async_failure_callback", "_async_input_callback")


class Ok(BaseModel):
    ok: bool


def _via_litellm(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Register a LiteLLM callback (as a user's tracing would): requests then go through acompletion. Returns the
    list the callback appends each request's model to."""
    from litellm.integrations.custom_logger import CustomLogger

    seen: list[str] = []

    class Recorder(CustomLogger):
        def log_pre_api_call(self, model: str, messages: Any, kwargs: Any) -> None:
            seen.append(model)

    litellm = load_litellm()
    for name in _CALLBACK_LISTS:  # LiteLLM copies a registered callback into these: all are restored afterwards
        monkeypatch.setattr(litellm, name, list(getattr(litellm, name)))
    litellm.callbacks.append(Recorder())
    return seen


def _bodies(cfg: ModelConfig, server: ScriptedLLMServer, tools: bool) -> tuple[dict[str, Any], Any]:
    """The body the server received for one request of this kind, and the answer sap returned."""
    client = LLMClient()
    answer = client.chat("actor", cfg, USER, TOOLS) if tools else client.complete("judge", cfg, USER, Ok)
    return server.requests[-1], answer


@pytest.mark.parametrize("model,temperature", [("openai/scripted", 0.7), ("hosted_vllm/scripted", 0.7),
                                               ("openai/gpt-5-mini", 1.0)])
@pytest.mark.parametrize("kind", ["json_schema", "json_object", "tools"])
def test_the_wire_posts_the_body_litellm_would_send(monkeypatch, model: str, temperature: float, kind: str):
    """gpt-5-mini: LiteLLM sends max_completion_tokens for the config's max_tokens; the wire keeps that mapping."""
    def responder(body: dict[str, Any]) -> str | ToolCalls:
        return ToolCalls((("switch", {"on": True}),)) if "tools" in body else '{"ok": true}'

    with ScriptedLLMServer(responder=responder) as server:
        structured = "json_schema" if kind == "tools" else kind
        cfg = ModelConfig(model=model, api_base=server.api_base, temperature=temperature, max_tokens=64,
                          structured=structured)
        assert plan_for(cfg, {"temperature": temperature, "max_tokens": 64}) is not None
        wire_body, wire_answer = _bodies(cfg, server, tools=kind == "tools")
        with monkeypatch.context() as patched:
            seen = _via_litellm(patched)
            assert plan_for(cfg, {"temperature": temperature, "max_tokens": 64}) is None
            litellm_body, litellm_answer = _bodies(cfg, server, tools=kind == "tools")
        assert seen, "a registered LiteLLM callback saw no request: the request did not go through acompletion"
    assert wire_body == litellm_body
    if kind == "tools":
        assert wire_answer["tool_calls"][0]["function"] == litellm_answer["tool_calls"][0]["function"]
    else:
        assert wire_answer == litellm_answer == Ok(ok=True)
    if model.endswith("gpt-5-mini"):
        assert wire_body["max_completion_tokens"] == 64 and "max_tokens" not in wire_body


def test_requests_the_wire_cannot_post_as_litellm_would_go_through_acompletion():
    base = "http://127.0.0.1:9/v1"
    assert wire_plan("anthropic/claude-3-5-haiku-20241022", base, 0.7, 64, ()) is None  # not OpenAI's wire
    assert wire_plan("openai/scripted", None, 0.7, 64, ()) is None  # no server of the user's: the provider's SDK
    assert wire_plan("openai/o3-mini", base, 0.7, 64, ()) is None  # LiteLLM refuses the request: it says why
    assert wire_plan("openai/o3-mini", base, 1.0, 64, ()) is None  # LiteLLM sends its system message as a user's
    plan = wire_plan("openai/scripted", base, 0.2, 32, ("json_object",))
    assert plan is not None and plan.url == base + "/chat/completions"
    assert plan.fixed == {"model": "scripted", "temperature": 0.2, "max_tokens": 32}


def test_the_wire_prices_usage_from_the_cost_map_once_per_model():
    litellm = load_litellm()
    client = LLMClient()
    with ScriptedLLMServer(responder=lambda body: '{"ok": true}') as server:
        cfg = ModelConfig(model="openai/gpt-4o-mini", api_base=server.api_base)
        assert plan_for(cfg, {"temperature": cfg.temperature, "max_tokens": cfg.max_tokens}) is not None
        client.complete("judge", cfg, USER, Ok)
    usage = client.ledger.snapshot()["roles"]["judge"]
    prices = litellm.model_cost["gpt-4o-mini"]
    assert usage["prompt_tokens"] > 0 and usage["priced"] is True
    assert usage["cost_usd"] == pytest.approx(usage["prompt_tokens"] * prices["input_cost_per_token"]
                                              + usage["completion_tokens"] * prices["output_cost_per_token"])
