"""LLM roles through real HTTP to a scripted OpenAI-compatible server: what is asked, what is fed back,
how answers become bindings, messages and verdicts; and a whole run with every role on the LLM."""
from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from sap.agents.config import AgentsConfigError, build_agents, build_agents_config
from sap.agents.judge import RuleJudge
from sap.agents.llm_common import LLMRole
from sap.agents.llm_judge import LLMJudge
from sap.agents.llm_messenger import LLMMessenger
from sap.agents.llm_planner import LLMPlanner
from sap.agents.planner import HistoryCall, PlanRequest, RulePlanner
from sap.api import synthesize
from sap.export.records import record_to_trajectory
from sap.llm import LLMClient, ModelConfig
from sap.model import ArgProvenance, Tag, ToolCall, Turn
from sap.prompts import prompt
from sap.testing.role_model import role_model
from sap.testing.scripted_llm import Reply, ScriptedLLMServer, request_schema
from sap.toolsets import load_toolset
from sap.validate import validate_record


def _role(server: ScriptedLLMServer, role: str) -> LLMRole:
    cfg = ModelConfig(model="openai/scripted", api_base=server.api_base, timeout=5, backoff_base=0.01,
                      input_cost_per_token=1e-6, output_cost_per_token=2e-6)
    return LLMRole(LLMClient(), cfg, role)


def _user_text(request: dict) -> str:
    return "\n".join(m["content"] for m in request["messages"] if m["role"] == "user")


@pytest.fixture()
def store():
    return load_toolset("store")


def _request(store, tool: str, **kw) -> PlanRequest:
    spec = next(t for t in store.tools if t.name == tool)
    return PlanRequest(spec=spec, tags={p: Tag.self_create for p in spec.required}, turn=0, index=0, history=[],
                       stated=[], c0=store.sample_config(3), rng=random.Random(1), **kw)


def _tool_with_string_arg(store):
    return next(t for t in store.tools if any(t.properties.get(p, {}).get("type") == "string"
                                               and "enum" not in t.properties[p] for p in t.required))


def test_planner_asks_only_for_open_arguments_and_uses_the_answer(store):
    spec = _tool_with_string_arg(store)
    name = next(p for p in spec.required if spec.properties[p].get("type") == "string")
    draft = RulePlanner().bind(_request(store, spec.name))  # same seed: the draft the LLM planner starts from
    values = {p: (f"llm-{p}" if p == name else draft.args_exec[p]) for p in draft.args_exec
              if draft.args_prov[p].effective_tag() == Tag.self_create}
    with ScriptedLLMServer(responder=role_model) as server:
        server.push(Reply(json.dumps(values)))
        binding = LLMPlanner(_role(server, "planner")).bind(_request(store, spec.name))
    assert binding.args_exec[name] == f"llm-{name}"
    assert binding.args_prov[name].tag == Tag.self_create
    assert len(server.requests) == 1
    assert f"- {name} (NEW, code's draft: " in _user_text(server.requests[0])


def test_planner_feeds_a_mistyped_value_back_naming_the_field(store):
    spec = _tool_with_string_arg(store)
    name = next(p for p in spec.required if spec.properties[p].get("type") == "string")
    with ScriptedLLMServer(responder=role_model) as server:
        server.push(Reply(json.dumps({name: 12345})))
        binding = LLMPlanner(_role(server, "planner")).bind(_request(store, spec.name))
    assert len(server.requests) == 2
    fed_back = server.requests[1]["messages"][-1]["content"]
    assert f"{name}: 12345 is not of type 'string'" in fed_back
    assert isinstance(binding.args_exec[name], str)


def test_planner_makes_no_call_when_code_binds_everything(store):
    spec = next(t for t in store.tools if t.required)
    out_call = ToolCall(call_id="c", name="x", args_exec={}, args_prov={}, result={p: "v1" for p in spec.required},
                        ok=True)
    req = PlanRequest(spec=spec, tags={p: Tag.prev_output for p in spec.required}, turn=1, index=0,
                      history=[HistoryCall(0, 0, out_call)], stated=[], c0={}, rng=random.Random(0))
    with ScriptedLLMServer(responder=role_model) as server:
        binding = LLMPlanner(_role(server, "planner")).bind(req)
    assert server.requests == []
    assert all(binding.args_prov[p].tag == Tag.prev_output for p in spec.required)


def _turn(store) -> tuple[Turn, dict]:
    specs = {t.name: t for t in store.tools}
    spec = _tool_with_string_arg(store)
    args = {p: f"value-{p}" for p in spec.required}
    call = ToolCall(call_id="call_0_0", name=spec.name, args_exec=args,
                    args_prov={p: ArgProvenance(tag=Tag.self_create) for p in args}, result={"ok": True}, ok=True)
    return Turn(index=0, state="s", transition=0, calls=[call]), specs


def test_messenger_feeds_back_a_missing_verbatim_value(store):
    turn, specs = _turn(store)
    with ScriptedLLMServer(responder=role_model) as server:
        server.push(Reply(json.dumps({"fragments": {"call_0": "please do the thing"}, "assistant_message": "ok"})))
        out = LLMMessenger(_role(server, "messenger")).write([turn], specs, random.Random(0))
    assert len(server.requests) == 2
    assert "fragments.call_0: 'please do the thing' does not match" in server.requests[1]["messages"][-1]["content"]
    for value in turn.calls[0].args_exec.values():
        assert value in out[0].user_message


def test_global_mode_writes_all_turns_in_one_call(store):
    turn, specs = _turn(store)
    second = turn.model_copy(update={"index": 1})
    with ScriptedLLMServer(responder=role_model) as server:
        out = LLMMessenger(_role(server, "messenger"), mode="global").write(
            [turn, second], specs, random.Random(0), narrative="Ann runs a shop.")
    assert len(server.requests) == 1
    assert "Ann runs a shop." in _user_text(server.requests[0])
    assert all(v in t.user_message for t in out for v in t.calls[0].args_exec.values())


def _accepted_trajectory(store):
    summary = synthesize(store, 1, seed=5)
    return record_to_trajectory(summary.records[0])


@pytest.mark.parametrize("kind,decision", [("text", "reject_text"), ("truth", "reject_truth")])
def test_judge_maps_the_models_diagnosis(store, kind, decision):
    traj = _accepted_trajectory(store)
    specs = {t.name: t for t in store.tools}
    finding = {"criterion": "reads_as_user", "turn": 0, "detail": "stilted", "kind": kind}
    with ScriptedLLMServer(responder=role_model) as server:
        server.push(Reply(json.dumps({"findings": [finding]})))
        verdict = LLMJudge(_role(server, "judge")).judge(traj, specs)
    assert verdict.decision == decision and verdict.reasons[0].detail == "stilted"


def test_judge_skips_the_model_when_the_rule_checks_reject(store):
    traj = _accepted_trajectory(store)
    traj.turns[0].user_message = "x"
    specs = {t.name: t for t in store.tools}
    assert not RuleJudge().judge(traj, specs).accepted
    with ScriptedLLMServer(responder=role_model) as server:
        verdict = LLMJudge(_role(server, "judge")).judge(traj, specs)
    assert not verdict.accepted and server.requests == []


@pytest.mark.parametrize("mode", ["per_turn", "global"])
def test_every_role_on_the_llm_makes_valid_records_with_fewer_calls_than_per_call(store, mode):
    with ScriptedLLMServer(responder=role_model) as server:
        cfg = build_agents_config(agents="llm", model_overrides={"model": "openai/scripted",
                                  "api_base": server.api_base, "input_cost_per_token": 1e-6,
                                  "output_cost_per_token": 2e-6}, message_mode=mode)
        client = LLMClient()
        summary = synthesize(store, 4, seed=11, **build_agents(cfg, client))
    assert summary.accepted == 4
    for record in summary.records:
        assert validate_record(record, store) == []
        meta = record["meta"]["agents"]
        assert meta["roles"]["planner"]["model"] == "openai/scripted"
        assert meta["roles"]["judge"]["prompts"] == {"judge": prompt("judge").sha}
    usage = client.ledger.snapshot()
    calls = sum(len(r["provenance"]) for r in summary.records)
    per_call_pattern = 2 * calls + len(summary.records)  # a planner and a message call per tool call, plus a judge
    # the slots' own calls: the FSM is drafted once per run, not per call (goal turns hold ~1.4 calls a turn here,
    # so the one-time draft and its retry decided this comparison)
    slot_calls = usage["total"]["calls"] - usage["roles"].get("fsm_builder", {}).get("calls", 0)
    assert 0 < slot_calls < per_call_pattern
    assert usage["total"]["cost_usd"] == pytest.approx(
        usage["total"]["prompt_tokens"] * 1e-6 + usage["total"]["completion_tokens"] * 2e-6)


def test_agents_config_from_toml_mixes_roles(tmp_path):
    path = tmp_path / "agents.toml"
    path.write_text('agents = "llm"\n[model]\nmodel = "openai/a"\ntemperature = 0.2\n'
                    '[roles.planner]\nagents = "rule"\n[roles.judge]\nmodel = "openai/judge"\ntemperature = 0.0\n')
    cfg = build_agents_config(path, role_models={"messenger": "openai/m"})
    assert cfg.roles["planner"].agents == "rule" and cfg.roles["planner"].model is None
    assert cfg.roles["judge"].model.model == "openai/judge" and cfg.roles["judge"].model.temperature == 0.0
    assert cfg.roles["messenger"].model.model == "openai/m" and cfg.roles["messenger"].model.temperature == 0.2


def test_agents_config_errors_name_the_problem(tmp_path):
    with pytest.raises(AgentsConfigError, match="command line: role planner uses agents 'llm' but no model"):
        build_agents_config(agents="llm")
    bad = tmp_path / "bad.toml"
    bad.write_text('[roles.planer]\nagents = "llm"\n')
    with pytest.raises(AgentsConfigError, match=r"bad.toml: unknown role\(s\) \['planer'\]"):
        build_agents_config(bad)
    bad.write_text('[model]\nmodel = "openai/x"\ntemperature = -1\n')
    with pytest.raises(AgentsConfigError, match="temperature"):
        build_agents_config(bad, agents="llm")


def test_roles_on_one_endpoint_must_agree_on_limits(tmp_path):
    path = tmp_path / "agents.toml"
    path.write_text('[model]\nmodel = "openai/a"\n[roles.judge]\nconcurrency = 2\n')
    with pytest.raises(AgentsConfigError, match="roles planner and judge use openai/a with different limits"):
        build_agents_config(path)


def test_clarification_that_states_a_withheld_value_is_fed_back(store):
    from sap.agents.messenger import ClarifyRequest

    req = ClarifyRequest(kind="miss_param", user_message="Please cancel my order.", missing=["order id"], task="",
                         hidden=["#W1234567"], tools=[t.name for t in store.tools], template="Which order?")
    leak = json.dumps({"assistant_message": "Shall I cancel order #W1234567?"})
    tool = json.dumps({"assistant_message": "I will call cancel_pending_order once you tell me the order id."})
    with ScriptedLLMServer(responder=role_model) as server:
        server.push(Reply(leak), Reply(tool))
        text = LLMMessenger(_role(server, "messenger")).clarify(req)
    assert len(server.requests) == 3
    assert "values the user has not given: \"#W1234567\"" in server.requests[1]["messages"][-1]["content"]
    assert "names a tool" in server.requests[2]["messages"][-1]["content"]
    assert text == "Happy to help. First, could you tell me the order id?"
    assert "Ask the user for: order id." in _user_text(server.requests[0])


@pytest.mark.parametrize("kind", ["miss_param", "miss_func"])
def test_llm_messenger_writes_the_rewrite_operators_assistant_turn(store, kind):
    with ScriptedLLMServer(responder=role_model) as server:
        cfg = build_agents_config(agents="rule", role_models={"messenger": "openai/scripted"},
                                  model_overrides={"api_base": server.api_base})
        summary = synthesize(store, 3, seed=4, mix={kind: 1.0}, **build_agents(cfg, LLMClient()))
        asked = [r for r in server.requests if "What the reply must do:" in _user_text(r)]
    variants = [r for r in summary.records if r["meta"]["kind"] == kind]
    assert variants and len(asked) >= len(variants)
    opener = "Happy to help. First, could you tell me the" if kind == "miss_param" else "I'm sorry, I can't"
    for record in variants:
        assert validate_record(record, store) == []
        replies = [m["content"] for m in record["messages"] if m["role"] == "assistant" and m.get("content")]
        assert any(text.startswith(opener) for text in replies)


def test_llm_messenger_writes_the_withheld_request_and_follow_up(store):
    with ScriptedLLMServer(responder=role_model) as server:
        cfg = build_agents_config(agents="rule", role_models={"messenger": "openai/scripted"},
                                  model_overrides={"api_base": server.api_base})
        summary = synthesize(store, 3, seed=4, mix={"miss_param": 1.0}, **build_agents(cfg, LLMClient()))
        withheld = [r for r in server.requests if "Values to leave out of user_message" in _user_text(r)]
    variants = [r for r in summary.records if r["meta"]["kind"] == "miss_param"]
    assert variants and len(withheld) >= len(variants)
    for record in variants:
        assert validate_record(record, store) == []
        users = [m["content"] for m in record["messages"] if m["role"] == "user"]
        reveal = next(i for i, text in enumerate(users) if text.startswith("Sorry, the "))  # the model's follow-up
        assert users[reveal - 1].startswith("Please ")  # and its request, with the value left out


def test_a_withheld_request_that_states_or_announces_the_value_is_fed_back(store):
    from sap.agents.withheld import WithheldRequest, WithheldValue

    spec = next(t for t in store.tools if t.name == "modify_user_address")
    args = {p: f"value-{p}" for p in spec.required}
    call = ToolCall(call_id="call_0_0", name=spec.name, args_exec=args, result={"ok": True},
                    args_prov={p: ArgProvenance(tag=Tag.self_create) for p in args})
    turn = Turn(index=0, state="s", transition=0, calls=[call])
    first = spec.required[0]
    req = WithheldRequest(turn=turn, earlier=[], withheld={(0, 0): frozenset({first})},
                          values=[WithheldValue((first,), "street", args[first])], specs={t.name: t for t in store.tools})
    kept = " ".join(v for p, v in args.items() if p != first)
    leak = json.dumps({"user_message": f"Please update the address: {kept} {args[first]}.",
                       "follow_up": f"Oh, it is {args[first]}."})
    announce = json.dumps({"user_message": f"Please update the address: {kept}; the street I'll tell you in a moment.",
                           "follow_up": f"Oh, it is {args[first]}."})
    with ScriptedLLMServer(responder=role_model) as server:
        server.push(Reply(leak), Reply(announce))
        user_k, follow_up = LLMMessenger(_role(server, "messenger")).withhold(req)
    assert len(server.requests) == 3
    assert "states values it must leave out" in server.requests[1]["messages"][-1]["content"]
    assert "announces the missing values" in server.requests[2]["messages"][-1]["content"]
    assert args[first] not in user_k and all(v in user_k for p, v in args.items() if p != first)
    assert follow_up == f"Sorry, the street is '{args[first]}'."


def _diff_request(seed: int) -> PlanRequest:
    """diff over three files an earlier listing showed: both names come from that result, code's ranking ties."""
    spec = next(t for t in load_toolset("filesystem").tools if t.name == "diff")
    listing = ToolCall(call_id="c", name="ls", args_exec={}, args_prov={}, ok=True, result={
        "files": [{"file_name": n} for n in ("a.txt", "b.txt", "c.txt")], "folders": []})
    return PlanRequest(spec=spec, tags={"file_name1": Tag.prev_output, "file_name2": Tag.prev_output}, turn=1,
                       index=0, history=[HistoryCall(0, 0, listing)], stated=[], c0={}, rng=random.Random(seed))


@pytest.mark.parametrize("seed", range(4))
def test_planner_chooses_among_codes_ties_only_and_binds_the_rest_around_the_choice(seed):
    def last_option(request):  # the model takes the last option of each choice: c.txt for both when offered
        schema = request_schema(request)
        return json.dumps({name: sub["enum"][-1] for name, sub in schema["properties"].items()})

    with ScriptedLLMServer(responder=last_option) as server:
        binding = LLMPlanner(_role(server, "planner")).bind(_diff_request(seed))
    (sent,) = server.requests
    offered = request_schema(sent)["properties"]
    code = RulePlanner().bind(_diff_request(seed)).args_exec  # the same seed: code's own binding
    assert offered["file_name1"]["enum"] == ["a.txt", "b.txt", "c.txt"]
    assert code["file_name1"] not in offered["file_name2"]["enum"]  # never the file the first argument took
    assert binding.args_exec["file_name1"] == "c.txt"  # the model's choice stands
    assert binding.args_exec["file_name2"] != "c.txt"  # and the second file is bound around it: no self-diff
    assert binding.args_prov["file_name2"].tag == Tag.prev_output


def test_a_turn_is_planned_in_one_request_and_its_calls_bind_without_asking_again(store):
    specs = [next(t for t in store.tools if t.name == name) for name in ("login_by_name_zip", "search_products")]
    reqs = [PlanRequest(spec=s, tags={p: Tag.self_create for p in s.required}, turn=0, index=i, history=[], stated=[],
                        c0=store.sample_config(3), rng=random.Random(i), key=f"0:{s.name}#0")
            for i, s in enumerate(specs)]
    with ScriptedLLMServer(responder=role_model) as server:
        planner = LLMPlanner(_role(server, "planner"))
        ahead = planner.ahead(reqs)
        assert len(server.requests) == 1
        sent = request_schema(server.requests[0])
        assert sent["required"] == ["call_0", "call_1"]
        assert sent["properties"]["call_0"]["required"] == specs[0].required
        bindings = [planner.bind(replace(r, rng=random.Random(r.index), answers=ahead.values[r.key])) for r in reqs]
        assert len(server.requests) == 1  # every open argument was answered ahead
    for r, b in zip(reqs, bindings):
        assert {p: b.args_exec[p] for p in r.spec.required} == ahead.values[r.key]


def test_an_answer_given_ahead_that_no_longer_fits_is_asked_again(store):
    spec = next(t for t in store.tools if t.name == "login_by_name_zip")
    req = PlanRequest(spec=spec, tags={p: Tag.self_create for p in spec.required}, turn=0, index=0, history=[],
                      stated=[], c0=store.sample_config(3), rng=random.Random(0), key="x#0",
                      answers={**{p: 12345 for p in spec.required}})  # mistyped for a string parameter
    with ScriptedLLMServer(responder=role_model) as server:
        binding = LLMPlanner(_role(server, "planner")).bind(req)
    assert len(server.requests) == 1
    assert all(isinstance(binding.args_exec[p], str) for p in spec.required)


def test_a_multi_line_value_is_shown_on_one_line_as_the_message_must_state_it():
    fs = load_toolset("filesystem")
    specs = {t.name: t for t in fs.tools}
    text = "First line of the note.\nSecond line, after a break.\n"
    call = ToolCall(call_id="call_0_0", name="echo", args_exec={"content": text, "file_name": "note.txt"},
                    args_prov={"file_name": ArgProvenance(tag=Tag.self_create),
                               "content": ArgProvenance(tag=Tag.self_create)}, result={"written": 52}, ok=True)
    turn = Turn(index=0, state="s", transition=0, calls=[call])
    with ScriptedLLMServer(responder=role_model) as server:
        (written,) = LLMMessenger(_role(server, "messenger")).write([turn], specs, random.Random(0))
    assert len(server.requests) == 1  # the first answer holds the value as the schema asks: no feedback round
    assert "content: \"First line of the note. Second line, after a break.\"" in _user_text(server.requests[0])
    assert "First line of the note. Second line, after a break." in written.user_message
