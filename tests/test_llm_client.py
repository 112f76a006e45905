"""sap.llm against the scripted OpenAI-compatible server over real HTTP (the direct OpenAI wire of an api_base)."""
from __future__ import annotations

import asyncio
import email.utils
import json
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from sap.llm import (Budget, BudgetExceeded, LimiterRegistry, LLMClient, LLMRoleError, ModelConfig, ModelLimiter,
                     StructuredOutputError, UsageLedger, extract_json, parse_structured, retry_after_seconds)
from sap.llm.config import load_litellm
from sap.llm.usage import response_cost
from sap.testing import CutOff, Hang, Junk, Malformed, Reply, SchemaViolation, ScriptedLLMServer, Status

USER = [{"role": "user", "content": "What is the weather in Paris for two days?"}]
WEATHER = '{"name": "forecast", "args": {"city": "Paris", "days": 2}}'


class Args(BaseModel):
    city: str
    days: int


class Call(BaseModel):
    name: str
    args: Args


def config(server: ScriptedLLMServer, **overrides: Any) -> ModelConfig:
    """A config for the scripted server with small timeouts and backoff."""
    settings: dict[str, Any] = {"model": "openai/scripted", "api_base": server.api_base, "timeout": 0.5,
                                "backoff_base": 0.05, "backoff_max": 2.0, "max_tokens": 64}
    return ModelConfig(**{**settings, **overrides})


def words(text: str) -> int:
    return len(text.split())


def test_valid_answer_is_parsed_and_the_request_carries_the_json_schema():
    with ScriptedLLMServer([Reply(WEATHER)]) as server:
        answer = LLMClient().complete("planner", config(server, temperature=0.2), USER, Call)
        assert answer == Call(name="forecast", args=Args(city="Paris", days=2))
        (body,) = server.requests
    assert body["model"] == "scripted"
    assert body["messages"] == USER
    assert body["temperature"] == 0.2 and body["max_tokens"] == 64
    schema = body["response_format"]["json_schema"]
    assert body["response_format"]["type"] == "json_schema"
    assert schema["name"] == "Call" and schema["strict"] is False
    assert schema["schema"] == Call.model_json_schema()


def test_malformed_answer_is_fed_back_and_the_next_answer_is_used():
    client = LLMClient()
    with ScriptedLLMServer([Malformed("not json at all"), Reply(WEATHER)]) as server:
        answer = client.complete("planner", config(server), USER, Call)
        first, second = server.requests
    assert answer.args.city == "Paris"
    assert first["messages"] == USER
    assert second["messages"][:-2] == USER
    assert second["messages"][-2] == {"role": "assistant", "content": "not json at all"}
    assert second["messages"][-1] == {"role": "user", "content": (
        "Your answer was invalid: no JSON object found in the answer. "
        "Reply with only a JSON object matching the schema.")}
    usage = client.ledger.snapshot()["roles"]["planner"]
    assert (usage["calls"], usage["validation_failures"], usage["failures"]) == (2, 1, 0)


def test_schema_violation_feedback_names_the_failing_fields():
    wrong = {"name": "forecast", "args": {"days": "soon"}}
    with ScriptedLLMServer([SchemaViolation(wrong), Reply(WEATHER)]) as server:
        LLMClient().complete("planner", config(server), USER, Call)
        feedback = server.requests[1]["messages"][-1]["content"]
    assert "args.city: Field required" in feedback
    assert 'args.days: Input should be a valid integer' in feedback and '(got "soon")' in feedback


def test_a_failed_role_check_is_fed_back_like_a_schema_error():
    def known_city(answer: Call) -> None:
        if answer.args.city != "Paris":
            raise ValueError(f"args.city must be a city the user named, not {answer.args.city!r}")

    wrong = WEATHER.replace("Paris", "Lyon")
    with ScriptedLLMServer([Reply(wrong), Reply(WEATHER)]) as server:
        answer = LLMClient().complete("planner", config(server), USER, Call, check=known_city)
        feedback = server.requests[1]["messages"][-1]["content"]
    assert answer.args.city == "Paris"
    assert feedback.startswith("Your answer was invalid: args.city must be a city the user named, not 'Lyon'.")


def test_validation_cap_raises_a_role_error_naming_role_model_and_last_error():
    client = LLMClient()
    with ScriptedLLMServer([Malformed(), SchemaViolation({"name": 1, "args": {}})]) as server:
        with pytest.raises(LLMRoleError) as caught:
            client.complete("judge", config(server, max_validation_retries=1), USER, Call)
        assert len(server.requests) == 2
    error = caught.value
    assert (error.role, error.model, error.kind) == ("judge", "openai/scripted", "invalid")
    assert "'judge'" in str(error) and "openai/scripted" in str(error) and "args.city: Field required" in str(error)
    usage = client.ledger.snapshot()["roles"]["judge"]
    assert (usage["validation_failures"], usage["failures"]) == (2, 1)


def test_rate_limit_waits_as_long_as_retry_after_says():
    client = LLMClient()
    with ScriptedLLMServer([Status(429, retry_after=0.2), Reply(WEATHER)]) as server:
        client.complete("planner", config(server), USER, Call)
        assert len(server.requests) == 2
    usage = client.ledger.snapshot()["roles"]["planner"]
    assert usage["transient_retries"] == 1
    # the computed wait is the server's, not the jittered backoff (0.05 to 0.1 s for a first retry)
    assert usage["retry_wait_s"] == pytest.approx(0.2)


def test_server_error_is_retried_with_backoff():
    client = LLMClient()
    with ScriptedLLMServer([Status(500), Reply(WEATHER)]) as server:
        client.complete("planner", config(server), USER, Call)
        assert len(server.requests) == 2
    usage = client.ledger.snapshot()["roles"]["planner"]
    assert usage["transient_retries"] == 1
    assert 0.05 <= usage["retry_wait_s"] <= 0.1


def test_retry_after_is_read_as_seconds_milliseconds_or_an_http_date():
    def error(headers: dict[str, str]) -> Exception:
        exc = Exception("429")
        exc.litellm_response_headers = headers  # type: ignore[attr-defined]
        return exc

    in_an_hour = email.utils.formatdate(time.time() + 3600, usegmt=True)
    assert retry_after_seconds(error({"Retry-After": "1.5"})) == 1.5
    assert retry_after_seconds(error({"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    assert 3590 <= retry_after_seconds(error({"retry-after": in_an_hour})) <= 3600  # type: ignore[operator]
    assert retry_after_seconds(error({"retry-after": "soon"})) is None
    assert retry_after_seconds(Exception("no headers")) is None


def test_neither_litellm_nor_the_openai_sdk_retries_on_its_own():
    with ScriptedLLMServer([Status(500), Reply(WEATHER)]) as server:
        with pytest.raises(LLMRoleError) as caught:
            LLMClient().complete("planner", config(server, max_retries=0), USER, Call)
        assert len(server.requests) == 1
    assert caught.value.kind == "transient" and "InternalServerError" in str(caught.value)


def test_a_hang_past_the_timeout_is_a_transient_error():
    # the retry gets what is left of 2 timeouts less 10% of one (about 0.8 s here): time for a loaded machine's reply
    with ScriptedLLMServer([Hang(30), Reply(WEATHER)]) as server:
        assert LLMClient().complete("planner", config(server, timeout=1.0), USER, Call).name == "forecast"
        assert len(server.requests) == 2
    with ScriptedLLMServer([Hang(30), Hang(30)]) as server:
        with pytest.raises(LLMRoleError) as caught:
            LLMClient().complete("planner", config(server, timeout=0.3, max_retries=1), USER, Call)
        assert len(server.requests) == 2
    assert caught.value.kind == "transient" and "Timeout" in str(caught.value)


@pytest.mark.parametrize("fault", [Junk(), CutOff()], ids=["junk body", "closed mid-body"])
def test_a_junk_body_or_a_connection_closed_mid_body_is_retried_as_transient(fault):
    with ScriptedLLMServer([fault, Reply(WEATHER)]) as server:
        assert LLMClient().complete("planner", config(server), USER, Call).name == "forecast"
        assert len(server.requests) == 2
    with ScriptedLLMServer([fault] * 3) as server:
        with pytest.raises(LLMRoleError) as caught:
            LLMClient().complete("planner", config(server, max_retries=2), USER, Call)
        assert len(server.requests) == 3
    assert caught.value.kind == "transient"


@pytest.mark.parametrize("status", [400, 401])
def test_non_transient_errors_fail_at_once(status: int):
    client = LLMClient()
    with ScriptedLLMServer([Status(status), Reply(WEATHER)]) as server:
        with pytest.raises(LLMRoleError) as caught:
            client.complete("planner", config(server), USER, Call)
        assert len(server.requests) == 1
    assert caught.value.kind == "rejected"
    usage = client.ledger.snapshot()["roles"]["planner"]
    assert (usage["transient_retries"], usage["failures"]) == (0, 1)


def test_auto_structured_falls_back_to_json_object_once_when_the_server_refuses_json_schema():
    """Like llama.cpp's server: a json_schema response_format gets a 400. The probe is made once per server; every
    structured request after it carries json_object with the schema."""
    client = LLMClient()
    with ScriptedLLMServer(responder=lambda body: WEATHER, refuse_json_schema=True) as server:
        cfg = config(server, structured="auto")
        for _ in range(2):
            assert client.complete("planner", cfg, USER, Call) == Call(name="forecast", args=Args(city="Paris", days=2))
        probe, first, second = server.requests
    assert probe["response_format"]["type"] == "json_schema" and probe["max_tokens"] == 16
    for body in (first, second):
        assert body["response_format"] == {"type": "json_object", "schema": Call.model_json_schema()}
    usage = client.ledger.snapshot()["roles"]["planner"]
    assert (usage["calls"], usage["failures"]) == (2, 0)  # the refused probe is no answered call, and no failure


def test_auto_structured_keeps_json_schema_where_the_server_takes_it_and_fails_other_errors_at_once():
    with ScriptedLLMServer(responder=lambda body: WEATHER) as server:
        LLMClient().complete("planner", config(server, structured="auto"), USER, Call)
        probe, request = server.requests
    assert probe["response_format"]["json_schema"]["name"] == "probe"
    assert request["response_format"]["json_schema"]["schema"] == Call.model_json_schema()
    with ScriptedLLMServer([Status(401, message="bad key")], responder=lambda body: WEATHER) as server:
        with pytest.raises(LLMRoleError) as caught:
            LLMClient().complete("planner", config(server, structured="auto"), USER, Call)
        assert len(server.requests) == 1  # the probe's 401 is the role's error: no fallback, no second request
    assert caught.value.kind == "rejected" and caught.value.status == 401 and "bad key" in str(caught.value)


def test_usage_and_user_priced_cost_are_accounted_per_role():
    client = LLMClient()
    answers = {"planner": WEATHER, "judge": '{"name": "verdict", "args": {"city": "ok", "days": 0}}'}
    with ScriptedLLMServer(responder=lambda body: answers[body["messages"][0]["content"]]) as server:
        cfg = config(server, input_cost_per_token=1e-6, output_cost_per_token=3e-6)
        for role in ["planner", "judge", "planner"]:
            client.complete(role, cfg, [{"role": "user", "content": role}], Call)
    snapshot = client.ledger.snapshot()
    planner, judge = snapshot["roles"]["planner"], snapshot["roles"]["judge"]
    assert (planner["calls"], planner["prompt_tokens"], planner["completion_tokens"]) == (2, 2, 2 * words(WEATHER))
    assert (judge["calls"], judge["prompt_tokens"], judge["completion_tokens"]) == (1, 1, words(answers["judge"]))
    assert planner["cost_usd"] == pytest.approx(2 * 1e-6 + 2 * words(WEATHER) * 3e-6, rel=1e-12)
    assert judge["cost_usd"] == pytest.approx(1e-6 + words(answers["judge"]) * 3e-6, rel=1e-12)
    assert snapshot["total"]["cost_usd"] == pytest.approx(planner["cost_usd"] + judge["cost_usd"], rel=1e-12)
    assert snapshot["total"]["calls"] == 3 and snapshot["total"]["priced"] is True
    restored = UsageLedger()
    restored.merge(json.loads(json.dumps(snapshot)))
    assert restored.snapshot() == snapshot


def test_cost_map_price_is_litellms_stamp_or_computed_and_unknown_models_stay_unpriced():
    litellm = load_litellm()
    response = litellm.ModelResponse(model="gpt-4o-mini", usage=litellm.Usage(
        prompt_tokens=10, completion_tokens=5, total_tokens=15))
    prices = litellm.model_cost["gpt-4o-mini"]
    expected = 10 * prices["input_cost_per_token"] + 5 * prices["output_cost_per_token"]
    known = ModelConfig(model="openai/gpt-4o-mini")
    response._hidden_params = {}  # not priced by LiteLLM yet: computed from the cost map
    cost, priced = response_cost(known, 10, 5, response)
    assert cost == pytest.approx(expected, rel=1e-9) and priced is True
    response._hidden_params = {"response_cost": 0.25}  # LiteLLM's own price of the response is taken as it is
    assert response_cost(known, 10, 5, response) == (0.25, True)
    response._hidden_params = {"response_cost": None}  # what LiteLLM stamps when its cost map lacks the model
    assert response_cost(ModelConfig(model="openai/no-such-model-x1"), 10, 5, response) == (0.0, False)
    own = ModelConfig(model="openai/no-such-model-x1", input_cost_per_token=1e-3, output_cost_per_token=2e-3)
    assert response_cost(own, 10, 5, response) == (pytest.approx(0.02), True)


def test_cost_comes_from_litellm_cost_map_and_unknown_models_are_marked_unpriced():
    client = LLMClient()
    with ScriptedLLMServer(responder=lambda body: WEATHER) as server:
        client.complete("known", config(server, model="openai/gpt-4o-mini"), USER, Call)
        client.complete("unknown", config(server), USER, Call)
    snapshot = client.ledger.snapshot()
    prices = load_litellm().model_cost["gpt-4o-mini"]
    expected = words(USER[0]["content"]) * prices["input_cost_per_token"] \
        + words(WEATHER) * prices["output_cost_per_token"]
    assert snapshot["roles"]["known"]["cost_usd"] == pytest.approx(expected, rel=1e-9)
    assert snapshot["roles"]["known"]["priced"] is True
    assert snapshot["roles"]["unknown"]["cost_usd"] == 0.0 and snapshot["roles"]["unknown"]["priced"] is False
    assert snapshot["total"]["priced"] is False


def test_budget_stops_before_a_request_is_sent():
    with ScriptedLLMServer(responder=lambda body: WEATHER) as server:
        cfg = config(server, input_cost_per_token=0.01, output_cost_per_token=0.01)
        client = LLMClient(budget=Budget(max_cost_usd=0.1))
        client.complete("planner", cfg, USER, Call)  # spent 0 < 0.1: sent; it costs 0.19
        with pytest.raises(BudgetExceeded) as caught:
            client.complete("planner", cfg, USER, Call)
        assert len(server.requests) == 1
    first_call_cost = (words(USER[0]["content"]) + words(WEATHER)) * 0.01
    assert str(caught.value) == f"LLM budget exhausted: spent ${first_call_cost:.6f} of the $0.100000 cap"


def test_api_key_is_read_from_the_environment_sent_and_never_leaked(monkeypatch):
    secret = "sk-secret-123"
    monkeypatch.setenv("SAP_TEST_KEY", secret)
    client = LLMClient()
    with ScriptedLLMServer([Reply(WEATHER), Status(401, message=f"invalid api key {secret}")]) as server:
        cfg = config(server, api_key_env="SAP_TEST_KEY")
        client.complete("planner", cfg, USER, Call)
        with pytest.raises(LLMRoleError) as caught:
            client.complete("planner", cfg, USER, Call)
        assert [h["authorization"] for h in server.request_headers] == [f"Bearer {secret}"] * 2
    error = caught.value
    shown = str(error) + repr(error) + "".join(traceback.format_exception(error))
    assert secret not in shown and "invalid api key ***" in str(error)
    assert secret not in json.dumps(client.ledger.snapshot())
    assert secret not in json.dumps(cfg.public()) and secret not in repr(cfg)
    assert cfg.public()["api_key_env"] == "SAP_TEST_KEY"


def test_a_missing_key_variable_fails_before_any_request(monkeypatch):
    monkeypatch.delenv("SAP_TEST_KEY", raising=False)
    with ScriptedLLMServer([Reply(WEATHER)]) as server:
        with pytest.raises(LLMRoleError) as caught:
            LLMClient().complete("planner", config(server, api_key_env="SAP_TEST_KEY"), USER, Call)
        assert server.requests == []
    assert caught.value.kind == "config" and "SAP_TEST_KEY is not set" in str(caught.value)


def test_prompt_mode_puts_the_schema_in_the_prompt_and_parses_fenced_text():
    fenced = "Here is the call:\n```json\n{'name': \"forecast\", 'args': {'city': \"Paris\", 'days': 2,},}\n```"
    messages = [{"role": "system", "content": "You plan tool calls."}, *USER]
    with ScriptedLLMServer([Reply(fenced)]) as server:
        answer = LLMClient().complete("planner", config(server, structured="prompt"), messages, Call)
        (body,) = server.requests
    assert answer == Call(name="forecast", args=Args(city="Paris", days=2))
    assert "response_format" not in body
    system = body["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You plan tool calls.\n\n")
    assert json.dumps(Call.model_json_schema()) in system["content"]
    assert body["messages"][1:] == USER
    assert messages[0]["content"] == "You plan tool calls."


def test_concurrency_limit_holds_requests_in_flight():
    async def ask_many(client: LLMClient, cfg: ModelConfig) -> list[Call]:
        return await asyncio.gather(*(client.acomplete("planner", cfg, USER, Call) for _ in range(6)))

    with ScriptedLLMServer(responder=lambda body: WEATHER, latency=0.1) as server:
        answers = asyncio.run(ask_many(LLMClient(), config(server, concurrency=2)))
        assert len(answers) == 6 and len(server.requests) == 6
        assert server.max_in_flight == 2


def test_sync_complete_from_many_threads_shares_the_limiter():
    def answer(body: dict[str, Any]) -> str:
        day = int(body["messages"][0]["content"])
        return json.dumps({"name": "forecast", "args": {"city": "Paris", "days": day}})

    client = LLMClient()
    with ScriptedLLMServer(responder=answer, latency=0.05) as server:
        cfg = config(server, concurrency=3)

        def ask(day: int) -> int:
            return client.complete("planner", cfg, [{"role": "user", "content": str(day)}], Call).args.days

        with ThreadPoolExecutor(max_workers=8) as pool:
            days = list(pool.map(ask, range(8)))
        assert days == list(range(8))
        assert server.max_in_flight == 3
    assert client.ledger.snapshot()["roles"]["planner"]["calls"] == 8


def test_rpm_and_tpm_windows_delay_admission():
    now = [0.0]
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    async def admit(limiter: ModelLimiter, tokens: int) -> float:
        async with limiter.slot(tokens):
            return now[0]

    async def scenario() -> tuple[list[float], list[float]]:
        by_requests = ModelLimiter(8, rpm=2, clock=lambda: now[0], sleep=fake_sleep)
        request_times = [await admit(by_requests, 0) for _ in range(3)]
        now[0] = 100.0
        by_tokens = ModelLimiter(8, tpm=100, clock=lambda: now[0], sleep=fake_sleep)
        token_times = [await admit(by_tokens, 60), await admit(by_tokens, 30), await admit(by_tokens, 20),
                       await admit(by_tokens, 500)]
        return request_times, token_times

    request_times, token_times = asyncio.run(scenario())
    assert request_times == [0.0, 0.0, 60.0]
    # 60 + 30 fit; 20 more waits for the 60 to leave the window; 500 alone waits until the window is empty
    assert token_times == [100.0, 100.0, 160.0, 220.0]


def test_limiter_registry_shares_one_limiter_per_endpoint_and_rejects_conflicting_limits():
    registry = LimiterRegistry()
    planner = ModelConfig(model="openai/m", api_base="http://h/v1", concurrency=4)
    judge = planner.model_copy(update={"temperature": 0.0})
    assert registry.get(planner) is registry.get(judge)
    assert registry.get(planner.model_copy(update={"api_base": "http://other/v1"})) is not registry.get(planner)
    with pytest.raises(ValueError, match="concurrency=4"):
        registry.get(planner.model_copy(update={"concurrency": 2}))


def test_structured_extraction_repairs_only_unambiguous_damage():
    assert extract_json('Sure!\n```\n[1, 2,]\n```') == [1, 2]
    assert extract_json('Plan: {draft} then {"a": "x}", "b": [1,],}.') == {"a": "x}", "b": [1]}
    assert extract_json("{'city': \"Paris\"}") == {"city": "Paris"}
    assert extract_json('{"text": "two\nlines\tand a tab"}') == {"text": "two\nlines\tand a tab"}  # raw, in the JSON
    with pytest.raises(StructuredOutputError, match="invalid JSON"):
        extract_json("{'it's': 1}")
    with pytest.raises(StructuredOutputError, match="no JSON object"):
        extract_json("I cannot help with that.")
    with pytest.raises(StructuredOutputError, match=r"^\(root\): Input should be a valid dictionary"):
        parse_structured("[1]", Call)


def test_config_needs_both_prices_and_keeps_only_the_key_variable_name():
    with pytest.raises(ValidationError, match="both input_cost_per_token and output_cost_per_token"):
        ModelConfig(model="openai/m", input_cost_per_token=1e-6)
    cfg = ModelConfig(model="openai/m", api_key_env="SAP_TEST_KEY")
    assert json.loads(json.dumps(cfg.public())) == cfg.public()
    with pytest.raises(ValidationError):
        ModelConfig(model="openai/m", api_key="sk-x")


def test_importing_sap_llm_does_not_import_litellm():
    code = "import sys, sap.llm, sap.testing; print('litellm' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
