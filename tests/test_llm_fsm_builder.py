"""The LLM FSM builder through real HTTP to a scripted OpenAI-compatible server: a valid draft is verified, the
schema refuses unknown tools, code fills missing tags, invalid drafts are fed back, and at the drafting cap the rule
FSM stands in (recorded) only when the fallback is on."""
from __future__ import annotations

import json

import pytest

import sap.graphs.synthesis as synthesis
from sap.agents.config import build_agents, build_agents_config
from sap.agents.llm_common import LLMRole
from sap.agents.llm_fsm_builder import LLMFSMBuilder
from sap.api import synthesize
from sap.fsm.build import RuleFSMBuilder
from sap.fsm.verify import FSMVerificationError, verify_fsm
from sap.graphs.fsm_graph import build_verified_fsm, fsm_dump, verified_fsm
from sap.llm import LLMClient, ModelConfig
from sap.testing.role_model import role_model
from sap.testing.scripted_llm import Malformed, Reply, ScriptedLLMServer
from sap.toolsets import load_toolset

LENGTHS = (3, 8)
# schema-valid but V_spec-failing: the only final state is one turn away and nothing loops
SHORT = {"states": [{"id": "start", "type": "INITIAL", "description": ""},
                    {"id": "end", "type": "COMPLETED", "description": ""}], "initial": "start",
         "finals": ["end"], "transitions": [{"from": "start", "to": "end", "action": ["pwd"], "tags": {}}]}


def _builder(server: ScriptedLLMServer, model: str = "openai/scripted", **kw) -> LLMFSMBuilder:
    cfg = ModelConfig(model=model, api_base=server.api_base, timeout=5, backoff_base=0.01)
    return LLMFSMBuilder(LLMRole(LLMClient(), cfg, "fsm_builder"), **kw)


@pytest.fixture(scope="module")
def filesystem():
    return load_toolset("filesystem")


@pytest.fixture(scope="module")
def rule_fsm(filesystem):
    return build_verified_fsm(RuleFSMBuilder(), filesystem, LENGTHS)


def test_a_valid_draft_becomes_the_verified_fsm(filesystem):
    with ScriptedLLMServer(responder=role_model) as server:
        fsm, fallback = verified_fsm(_builder(server), filesystem, LENGTHS)
    assert fallback is None and len(server.requests) == 1
    answer = json.loads(role_model(server.requests[0]))
    assert [s.id for s in fsm.states] == [s["id"] for s in answer["states"]]
    assert [(t.source, t.target, t.action) for t in fsm.transitions] == [
        (t["from"], t["to"], t["action"]) for t in answer["transitions"]]
    assert verify_fsm(fsm, {t.name: t for t in filesystem.tools}, LENGTHS) == []
    assert "- ls (read):" in server.requests[0]["messages"][1]["content"]


def test_the_schema_refuses_unknown_tools_and_code_fills_missing_tags_before_verification(filesystem):
    def sloppy(request: dict) -> str:
        draft = json.loads(role_model(request))
        for t in draft["transitions"]:
            t["tags"] = {}
        if len(request["messages"]) == 2:  # the first answer calls a tool the toolset does not have
            draft["transitions"].append({"from": "start", "to": "end", "action": ["teleport"], "tags": {}})
        return json.dumps(draft)

    with ScriptedLLMServer(responder=sloppy) as server:
        fsm, fallback = verified_fsm(_builder(server), filesystem, LENGTHS)
    specs = {t.name: t for t in filesystem.tools}
    assert fallback is None and len(server.requests) == 2
    assert "'teleport' is not one of" in server.requests[1]["messages"][-1]["content"]
    assert all("teleport" not in t.action for t in fsm.transitions)
    assert all(set(t.provenance_tag[a]) == set(specs[a].required) for t in fsm.transitions for a in t.action)
    assert any(t.provenance_tag[a] for t in fsm.transitions for a in t.action)


def test_an_invalid_draft_is_fed_back_naming_the_field(filesystem):
    bad = {**SHORT, "transitions": [{"from": "nowhere", "to": "end", "action": ["pwd"], "tags": {}}]}
    with ScriptedLLMServer(responder=role_model) as server:
        server.push(Reply(json.dumps(bad)))
        fsm, fallback = verified_fsm(_builder(server), filesystem, LENGTHS)
    assert len(server.requests) == 2 and fallback is None
    assert "transitions[0].from: 'nowhere' is not a state id" in server.requests[1]["messages"][-1]["content"]


def test_garbage_drafts_fall_back_to_the_rule_fsm_and_say_so(filesystem, rule_fsm):
    with ScriptedLLMServer() as server:
        server.push(*[Reply(json.dumps(SHORT))] * 3)
        builder = _builder(server)
        fsm, fallback = verified_fsm(builder, filesystem, LENGTHS)
    assert fsm_dump(fsm) == fsm_dump(rule_fsm)
    assert fallback["builder"] == builder.cache_key() and fallback["used"] == RuleFSMBuilder().cache_key()
    assert "after 3 rounds" in fallback["reason"] and "[path_length]" in fallback["reason"]
    assert len(server.requests) == 3
    regenerate = server.requests[1]["messages"][1]["content"]
    assert "[path_length]" in regenerate and "Your previous draft:" in regenerate


def test_unparsable_answers_fall_back_too(filesystem, rule_fsm):
    with ScriptedLLMServer() as server:
        server.push(*[Malformed()] * 3)
        fsm, fallback = verified_fsm(_builder(server), filesystem, LENGTHS)
    assert fsm_dump(fsm) == fsm_dump(rule_fsm) and "no valid answer" in fallback["reason"]


def test_without_the_fallback_garbage_raises(filesystem):
    with ScriptedLLMServer() as server:
        server.push(*[Reply(json.dumps(SHORT))] * 3)
        with pytest.raises(FSMVerificationError, match="after 3 rounds"):
            verified_fsm(_builder(server, fallback=None), filesystem, LENGTHS)


def test_the_fallback_reaches_record_meta_and_the_fsm_key_is_per_model(filesystem, monkeypatch):
    monkeypatch.setattr(synthesis, "_FSM_CACHE", {})
    with ScriptedLLMServer() as server:
        server.push(*[Reply(json.dumps(SHORT))] * 3)
        builder = _builder(server)
        summary = synthesize(filesystem, 2, seed=1, fsm_builder=builder)
        keys = {builder.cache_key(), _builder(server, model="openai/other").cache_key(),
                _builder(server, fallback=None).cache_key(), RuleFSMBuilder().cache_key()}
    assert len(keys) == 4
    assert all(r["meta"]["fsm_fallback"]["builder"] == builder.cache_key() for r in summary.records)
    assert all(builder.cache_key() in r["meta"]["fsm"] for r in summary.records)
    assert "fsm_fallback" not in synthesize(filesystem, 1, seed=1).records[0]["meta"]


def test_agents_config_sets_the_fallback(tmp_path):
    path = tmp_path / "agents.toml"
    path.write_text('fsm_fallback = "none"\n[model]\nmodel = "openai/a"\n')
    agents = build_agents(build_agents_config(path), LLMClient())
    assert isinstance(agents["fsm_builder"], LLMFSMBuilder) and agents["fsm_builder"].fallback is None
    agents = build_agents(build_agents_config(model_overrides={"model": "openai/a"}), LLMClient())
    assert agents["fsm_builder"].fallback == "rule" and agents["agents_meta"]["fsm_fallback"] == "rule"
    assert isinstance(build_agents(build_agents_config(), LLMClient())["fsm_builder"], RuleFSMBuilder)


def test_a_stored_run_builds_its_fsm_with_the_llm_and_keeps_the_fallback_note_and_usage(filesystem, monkeypatch,
                                                                                       tmp_path):
    from sap.runs.driver import RunDriver, run_config, start_run
    from sap.store.checkpoint import checkpointer_for
    from sap.store.runs import RunStore

    monkeypatch.setattr(synthesis, "_FSM_CACHE", {})
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = RunStore(url)
    with ScriptedLLMServer(responder=role_model) as server:
        server.push(*[Reply(json.dumps(SHORT))] * 3)  # three drafts that never verify: the rule FSM stands in
        agents = build_agents_config(agents="rule", role_models={"fsm_builder": "openai/scripted"},
                                     model_overrides={"api_base": server.api_base})
        run_id = start_run(store, filesystem, run_config(1, 2, None, {}, agents=agents))
        drafts = len(server.requests)
    assert drafts == 3
    assert store.fsm(run_id)["fallback_note"]["builder"].startswith("llm:openai/scripted:")
    assert store.usage(run_id).snapshot()["roles"]["fsm_builder"]["calls"] == 3
    with checkpointer_for(url) as saver:
        RunDriver(store, run_id, filesystem, saver).run()
    (record,) = store.records(run_id)
    assert record["meta"]["fsm_fallback"] == store.fsm(run_id)["fallback_note"]
