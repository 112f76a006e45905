"""Prompts within the model's budget: JSON views that stay valid however short, state and history summarised
until the prompt fits the model's context less its answer, and a clear failure when nothing more can go."""
from __future__ import annotations

import json
import random

import pytest

from sap.agents.llm_common import LLMRole, compact
from sap.agents.llm_planner import LLMPlanner
from sap.agents.planner import HistoryCall, PlanRequest
from sap.llm import LLMClient, LLMRoleError, ModelConfig
from sap.llm.budget import prompt_budget
from sap.llm.config import load_litellm
from sap.model import Tag, ToolCall
from sap.testing.role_model import role_model
from sap.testing.scripted_llm import ScriptedLLMServer
from sap.toolsets import load_toolset

BIG = {"users": [{"id": f"u{i}", "name": "x" * 300, "orders": list(range(50))} for i in range(40)],
       "note": "y" * 5000}


@pytest.mark.parametrize("limit", [20, 60, 200, 1000, 4000])
def test_a_summarised_json_value_parses_and_stays_within_its_limit(limit):
    text = compact(BIG, limit)
    assert len(text) <= limit
    json.loads(text)  # never cut in the middle of the JSON


def test_a_value_that_fits_is_shown_whole():
    assert json.loads(compact({"a": [1, 2, 3]}, 100)) == {"a": [1, 2, 3]}


def _request(store, c0: dict, calls: int) -> PlanRequest:
    spec = next(t for t in store.tools if t.name == "login_by_name_zip")
    history = [HistoryCall(0, k, ToolCall(call_id=f"c{k}", name="list_orders", args_exec={}, args_prov={}, ok=True,
                                          result={"orders": [{"order_id": f"#W{k}{j}", "text": "z" * 400}
                                                             for j in range(8)]})) for k in range(calls)]
    return PlanRequest(spec=spec, tags={p: Tag.self_create for p in spec.required}, turn=1, index=0, history=history,
                       stated=[], c0=c0, rng=random.Random(0))


def _prompt_chars(request: dict) -> int:
    return sum(len(m["content"]) for m in request["messages"])


def test_the_state_and_history_are_summarised_until_the_prompt_fits_the_models_context():
    store = load_toolset("store")
    roomy, tight = (ModelConfig(model="openai/x", api_base="", timeout=5, context_tokens=c, max_tokens=256)
                    for c in (32000, 1000))
    sent = []
    for cfg in (roomy, tight):
        with ScriptedLLMServer(responder=role_model) as server:
            LLMPlanner(LLMRole(LLMClient(), cfg.model_copy(update={"api_base": server.api_base}), "planner")).bind(
                _request(store, BIG, 6))
            sent.append(server.requests[0])
    assert _prompt_chars(sent[1]) < _prompt_chars(sent[0])
    tokens = load_litellm().token_counter(model="openai/x", messages=sent[1]["messages"])
    assert tokens <= prompt_budget(tight) < load_litellm().token_counter(model="openai/x", messages=sent[0]["messages"])
    assert "turn 0 call 5: list_orders" in sent[1]["messages"][1]["content"]  # the newest call stays


def test_a_prompt_that_cannot_fit_fails_the_role_naming_its_size_and_the_budget():
    store = load_toolset("store")
    cfg = ModelConfig(model="openai/x", api_base="http://127.0.0.1:9", timeout=5, context_tokens=400,
                      max_tokens=256)
    with pytest.raises(LLMRoleError, match=r"planner_bind prompt holds \d+ tokens, over the model's budget of 144"):
        LLMPlanner(LLMRole(LLMClient(), cfg, "planner")).bind(_request(store, BIG, 6))


def test_context_tokens_must_leave_room_for_the_answer():
    with pytest.raises(ValueError, match="context_tokens 512 leaves no room"):
        ModelConfig(model="openai/x", context_tokens=512, max_tokens=1024)
