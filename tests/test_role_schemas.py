"""Exact per-request response schemas (issue 16): for each LLM role the schema of a sample request; its minimal
instance, generated from the schema itself, is accepted by the role's parse; an answer missing a key is refused
before any post-hoc check; `strict` goes only to providers LiteLLM says support it; and a stand-in model that
answers every request with the minimal instance of its schema makes `sap synthesize --agents llm` accept records."""
from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, replace
from typing import Any

import pytest
from pydantic import BaseModel

from sap.agents.judge import task_words
from sap.agents.llm_common import LLMRole
from sap.agents.llm_fsm_builder import FSMDraft, draft_schema
from sap.agents.llm_judge import JudgeAnswer, judge_schema
from sap.agents.llm_messenger import (CLARIFY_SCHEMA, ClarifyAnswer, GlobalAnswer, LLMMessenger, TurnAnswer,
                                      WithheldAnswer, global_schema, turn_schema, withheld_schema)
from sap.agents.llm_planner import NARRATIVE_SCHEMA, LLMPlanner, NarrativeAnswer, PlannerAnswer, TurnPlanAnswer
from sap.agents.planner import HistoryCall, NarrativeRequest, PlanRequest
from sap.agents.repair import REPAIR_SCHEMA, RepairAnswer
from sap.agents.withheld import WithheldRequest, WithheldValue
from sap.agents.replanner import ReplanAnswer, replan_schema
from sap.cache import CacheIndex
from sap.cache.query import QueryAnswer, query_schema
from sap.cache.sampling import Sampler
from sap.cache.templates import parse_templates
from sap.cli.main import main
from sap.fsm.build import classify, stated_params
from sap.fsm.probe import probe
from sap.llm import LLMClient, ModelConfig, ResponseSchema, parse_structured, schema_errors, sends_strict
from sap.llm.schema import MESSAGE_RUN, containing, text_run
from sap.cache.query import QUERY_RUN
from sap.model import ArgProvenance, Tag, ToolCall, ToolSpec, Turn
from sap.testing.minimal_model import minimal_instance, minimal_model, pattern_literals
from sap.testing.role_model import role_model
from sap.testing.scripted_llm import Reply, ScriptedLLMServer
from sap.toolsets import load_toolset

from helpers import HOTEL_SPECS as SPECS
from helpers import HOTEL_TEMPLATES as TEMPLATES
from sap.validate import validate_record


@dataclass(frozen=True)
class Case:
    """One role's sample request: its exact schema, the model its answer parses into, and whether the schema
    meets OpenAI strict mode."""

    schema: dict[str, Any]
    model: type[BaseModel]
    strict_ready: bool


@pytest.fixture(scope="module")
def store():
    return load_toolset("store")


@pytest.fixture(scope="module")
def filesystem():
    return load_toolset("filesystem")


def _role(server: ScriptedLLMServer, role: str, model: str = "openai/x", **kw: Any) -> LLMRole:
    return LLMRole(LLMClient(), ModelConfig(model=model, api_base=server.api_base, timeout=5, backoff_base=0.01, **kw),
                   role)


def _sent_schema(request: dict[str, Any]) -> dict[str, Any]:
    return request["response_format"]["json_schema"]["schema"]


def _cancel_request(store) -> PlanRequest:
    """cancel_pending_order with a NEW reason (an enum parameter) and an order id the results of two tools offer
    (of several results of one tool only the newest may be referred to)."""
    spec = next(t for t in store.tools if t.name == "cancel_pending_order")
    history = [HistoryCall(0, k, ToolCall(call_id=f"c{k}", name=tool, args_exec={}, args_prov={},
                                          result={"order_id": order}, ok=True))
               for k, (tool, order) in enumerate([("get_order_details", "#W1"), ("modify_pending_order_address", "#W2")])]
    return PlanRequest(spec=spec, tags={"order_id": Tag.prev_output, "reason": Tag.self_create}, turn=1, index=0,
                       history=history, stated=[], c0={}, rng=random.Random(0))


def _planner_schema(store) -> dict[str, Any]:
    with ScriptedLLMServer(responder=role_model) as server:
        LLMPlanner(_role(server, "planner")).bind(_cancel_request(store))
        return _sent_schema(server.requests[0])


def _turn_plan_schema(store) -> dict[str, Any]:
    """The planner's request for a turn of two calls: cancel_pending_order (as `_cancel_request`) and a login with
    the user's name and zip, with the trajectory's narrative asked along."""
    login = next(t for t in store.tools if t.name == "login_by_name_zip")
    reqs = [replace(_cancel_request(store), key="1:cancel_pending_order#0"),
            PlanRequest(spec=login, tags={p: Tag.self_create for p in login.required}, turn=1, index=1, history=[],
                        stated=[], c0={}, rng=random.Random(0), key="1:login_by_name_zip#0")]
    with ScriptedLLMServer(responder=role_model) as server:
        LLMPlanner(_role(server, "planner")).ahead(reqs, NarrativeRequest("store", {}, [["cancel an order"]]))
        return _sent_schema(server.requests[0])


def _turn(store) -> tuple[Turn, dict[str, ToolSpec]]:
    spec = next(t for t in store.tools if t.name == "modify_user_address")
    args = {p: f"value-{p}" for p in spec.required}
    call = ToolCall(call_id="call_0_0", name=spec.name, args_exec=args,
                    args_prov={p: ArgProvenance(tag=Tag.self_create) for p in args}, result={"ok": True}, ok=True)
    return Turn(index=0, state="s", transition=0, calls=[call]), {t.name: t for t in store.tools}


def _withheld_request(turn: Turn, specs: dict[str, ToolSpec]) -> WithheldRequest:
    """The turn of `_turn` with its first argument left out."""
    first = next(iter(turn.calls[0].args_exec))
    return WithheldRequest(turn=turn, earlier=[], withheld={(0, 0): frozenset({first})},
                           values=[WithheldValue((first,), "address", turn.calls[0].args_exec[first])], specs=specs)


def _hotel_sample():
    index = CacheIndex()
    index.add("search_hotels", {"city": "Oslo", "nights": 3}, {"hotels": [{"id": "H1"}]})
    index.add("get_hotel", {"hotel_id": "H1"}, {"hotel_id": "H1", "rooms": 4})
    template = parse_templates(TEMPLATES, {s.name: s for s in SPECS})[0]
    return Sampler(index).sample(template, random.Random(0))


@pytest.fixture(scope="module")
def cases(store, filesystem) -> dict[str, Case]:
    roles = classify(filesystem, probe(filesystem, seeds=3))
    turn, specs = _turn(store)
    return {
        "planner_bind": Case(_planner_schema(store), PlannerAnswer, True),
        "planner_turn": Case(_turn_plan_schema(store), TurnPlanAnswer, True),
        "planner_narrative": Case(NARRATIVE_SCHEMA, NarrativeAnswer, True),
        "fsm_draft": Case(draft_schema(roles, stated_params(roles)), FSMDraft, False),  # which tools are tagged is open
        "judge": Case(judge_schema(3), JudgeAnswer, True),
        "messenger_turn": Case(turn_schema(turn, specs, []), TurnAnswer, True),
        "messenger_global": Case(global_schema([turn, turn.model_copy(update={"index": 1})], specs, []),
                                 GlobalAnswer, True),
        "messenger_clarify": Case(CLARIFY_SCHEMA, ClarifyAnswer, True),
        "messenger_withhold": Case(withheld_schema(_withheld_request(turn, specs)), WithheldAnswer, True),
        "repair": Case(REPAIR_SCHEMA, RepairAnswer, False),  # a patch value may be any JSON value
        "replan": Case(replan_schema([2, 5, 7], 1, 3), ReplanAnswer, True),
        "cache_query": Case(query_schema(_hotel_sample(), {s.name: s for s in SPECS}), QueryAnswer, True),
    }


ROLES = ["planner_bind", "planner_turn", "planner_narrative", "fsm_draft", "judge", "messenger_turn", "messenger_global",
         "messenger_clarify", "messenger_withhold", "repair", "replan", "cache_query"]


def test_the_minimal_instance_takes_first_choices_lowest_numbers_and_required_keys_only():
    schema = {"type": "object", "required": ["a", "b", "c", "d", "e", "f"], "additionalProperties": False,
              "properties": {"a": {"enum": ["x", "y"]}, "b": {"type": "integer", "minimum": 3, "maximum": 9},
                             "c": {"type": "array", "items": {"type": "string"}},
                             "d": {"type": "array", "items": {"type": "integer", "enum": [4, 5]}, "minItems": 2},
                             "e": {"anyOf": [{"type": "null"}, {"type": "string"}]},
                             "f": {"type": "string", "minLength": 20, "pattern": "^{0}(find|look){0}a\\.b{0}$".format(text_run(40))},
                             "optional": {"type": "string"}}}
    assert minimal_instance(schema) == {"a": "x", "b": 3, "c": [], "d": [4, 4], "e": None,
                                      "f": "find a.b " + "a" * 12}
    assert schema_errors(minimal_instance(schema), schema) == []
    with pytest.raises(ValueError, match="not of the form"):
        pattern_literals("^[a-z]+$")


def test_sample_request_schemas_say_exactly_what_is_needed(cases, store, filesystem):
    planner = cases["planner_bind"].schema
    reason = next(t for t in store.tools if t.name == "cancel_pending_order").properties["reason"]
    assert planner["required"] == ["reason", "order_id"] and planner["additionalProperties"] is False
    assert planner["properties"] == {"reason": reason, "order_id": {"enum": ["#W1", "#W2"]}}

    fsm = cases["fsm_draft"].schema
    transition = fsm["properties"]["transitions"]["items"]["properties"]
    assert transition["action"]["items"]["enum"] == [t.name for t in filesystem.tools]
    mv = transition["tags"]["properties"]["mv"]
    assert mv["required"] == ["file_name", "destination"] and mv["additionalProperties"] is False
    assert set(mv["properties"]["file_name"]["enum"]) <= {"initial_state", "prev_output", "self_create",
                                                          "prev_user_msg"}
    assert "INITIAL" in fsm["properties"]["states"]["items"]["properties"]["type"]["enum"]

    finding = cases["judge"].schema["properties"]["findings"]["items"]["properties"]
    assert finding["turn"] == {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 2}, {"type": "null"}]}

    turn, specs = _turn(store)
    fragment = cases["messenger_turn"].schema["properties"]["fragments"]
    assert fragment["required"] == ["call_0"]
    pattern = fragment["properties"]["call_0"]["pattern"]
    size = int(re.search(r"\{0,(\d+)\}", pattern).group(1))
    run = text_run(size)
    words = task_words(specs["modify_user_address"])
    assert pattern.startswith("^" + run + "(" + "|".join(words) + ")" + run + "value-address1" + run)
    # the runs are cut so that the pattern alone keeps within maxLength (a grammar converter drops the maxLength)
    values = [f"value-{p}" for p in ("address1", "address2", "city", "state", "zip")]
    assert size <= MESSAGE_RUN and 7 * size + max(map(len, words)) + sum(map(len, values)) <= fragment["properties"][
        "call_0"]["maxLength"] < 7 * (size + 1) + max(map(len, words)) + sum(map(len, values))
    assert cases["messenger_global"].schema["properties"]["turns"]["required"] == ["turn_0", "turn_1"]

    assert cases["replan"].schema["properties"]["transitions"] == {
        "type": "array", "items": {"type": "integer", "enum": [2, 5, 7]}, "minItems": 1, "maxItems": 3}
    echo = cases["cache_query"].schema["properties"]["echo"]["properties"]
    assert echo["step_0"]["properties"]["function"] == {"const": "search_hotels"}
    assert echo["step_0"]["properties"]["arguments"]["required"] == ["city", "nights"]
    assert echo["step_1"]["properties"]["arguments"]["required"] == []
    assert cases["cache_query"].schema["properties"]["query"]["pattern"] == "^{0}Oslo{0}3{0}$".format(text_run(QUERY_RUN))


@pytest.mark.parametrize("role", ROLES)
def test_the_minimal_instance_of_each_role_schema_is_accepted_by_its_parse(cases, role):
    case = cases[role]
    answer = minimal_instance(case.schema)
    assert schema_errors(answer, case.schema) == []
    parse_structured(json.dumps(answer), case.model, case.schema)


def _without_a_required_key(schema: dict[str, Any], answer: Any) -> tuple[Any, str]:
    """The answer with its deepest-first required key removed from the first object that has one, and that key."""
    for key in schema.get("required", []):
        inner = schema["properties"][key]
        if isinstance(answer.get(key), dict) and inner.get("required"):
            smaller, name = _without_a_required_key(inner, answer[key])
            return {**answer, key: smaller}, name
    key = schema["required"][0]
    return {k: v for k, v in answer.items() if k != key}, key


@pytest.mark.parametrize("role", ROLES)
def test_an_answer_missing_a_key_is_refused_before_any_post_hoc_check(cases, role):
    case = cases[role]
    answer = minimal_instance(case.schema)
    broken, key = _without_a_required_key(case.schema, answer)
    checked: list[Any] = []
    with ScriptedLLMServer([Reply(json.dumps(broken)), Reply(json.dumps(answer))]) as server:
        cfg = ModelConfig(model="openai/x", api_base=server.api_base, timeout=5, backoff_base=0.01)
        LLMClient().complete(role, cfg, [{"role": "user", "content": "go"}], case.model, check=checked.append,
                             schema=ResponseSchema(role, case.schema))
        fed_back = server.requests[1]["messages"][-1]["content"]
    assert len(checked) == 1  # the post-hoc check saw only the second, complete answer
    assert f"'{key}' is a required property" in fed_back


@pytest.mark.parametrize("role", ROLES)
def test_strict_goes_only_to_models_litellm_says_support_it_and_only_with_a_strict_ready_schema(cases, role):
    case = cases[role]
    assert sends_strict("openai/gpt-4o-mini", case.schema) is case.strict_ready
    assert sends_strict("openai/x", case.schema) is False
    assert sends_strict("hosted_vllm/x", case.schema) is False


def test_the_request_body_carries_strict_json_schema_or_the_schema_for_a_grammar(cases):
    judge = cases["judge"]
    answer = json.dumps(minimal_instance(judge.schema))
    bodies = {}
    for model, structured in [("openai/gpt-4o-mini", "json_schema"), ("openai/x", "json_schema"),
                              ("hosted_vllm/x", "json_schema"), ("openai/x", "json_object")]:
        with ScriptedLLMServer([Reply(answer)]) as server:
            cfg = ModelConfig(model=model, api_base=server.api_base, timeout=5, structured=structured)
            LLMClient().complete("judge", cfg, [{"role": "user", "content": "go"}], JudgeAnswer,
                                 schema=ResponseSchema("judge", judge.schema))
            bodies[model, structured] = server.requests[0]
    strict = bodies["openai/gpt-4o-mini", "json_schema"]["response_format"]
    assert strict == {"type": "json_schema", "json_schema": {"name": "judge", "schema": judge.schema, "strict": True}}
    for key in [("openai/x", "json_schema"), ("hosted_vllm/x", "json_schema")]:
        assert bodies[key]["response_format"]["json_schema"]["strict"] is False
        assert bodies[key]["response_format"]["json_schema"]["schema"] == judge.schema
    assert bodies["openai/x", "json_object"]["response_format"] == {"type": "json_object", "schema": judge.schema}
    with ScriptedLLMServer([Reply(json.dumps(minimal_instance(cases["fsm_draft"].schema)))]) as server:
        cfg = ModelConfig(model="openai/gpt-4o-mini", api_base=server.api_base, timeout=5)
        LLMClient().complete("fsm_builder", cfg, [{"role": "user", "content": "go"}], FSMDraft,
                             schema=ResponseSchema("fsm_draft", cases["fsm_draft"].schema))
        assert server.requests[0]["response_format"]["json_schema"]["strict"] is False


def test_roles_take_the_minimal_answer_in_one_request(store):
    turn, specs = _turn(store)
    with ScriptedLLMServer(responder=minimal_model) as server:
        binding = LLMPlanner(_role(server, "planner")).bind(_cancel_request(store))
        written = LLMMessenger(_role(server, "messenger")).write([turn], specs, random.Random(0))
        assert len(server.requests) == 2
    reason = next(t for t in store.tools if t.name == "cancel_pending_order").properties["reason"]["enum"][0]
    assert binding.args_exec == {"order_id": "#W1", "reason": reason}
    assert binding.args_prov["order_id"].path is not None
    assert all(v in written[0].user_message for v in turn.calls[0].args_exec.values())


def test_the_minimal_stand_in_model_makes_synthesize_accept_valid_records(tmp_path, filesystem, capsys):
    out = tmp_path / "out.jsonl"
    with ScriptedLLMServer(responder=minimal_model) as server:
        code = main(["synthesize", "--toolset", "filesystem", "-n", "3", "--max-slots", "8", "-o", str(out),
                     "--agents", "llm", "--model", "openai/x", "--api-base", server.api_base,
                     "--db", f"sqlite:///{tmp_path / 'sap.db'}"])
    assert code == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records and all(validate_record(r, filesystem) == [] for r in records)
    rejections = (tmp_path / "out.jsonl.rejections.jsonl").read_text().splitlines()
    assert not [r for r in rejections if "no valid answer" in r or "required property" in r]


def test_literals_escape_every_special_character_as_a_hex_class_that_matches_only_itself():
    literal = "a.b$c^d]e\\f(g)|h*i+j?k[l]{m}"
    pattern = containing([literal, ["x.y", "z"]])["pattern"]
    assert "\\." not in pattern and "\\^" not in pattern and "\\$" not in pattern  # escapes llama.cpp refuses
    assert not re.search(r"\\x[0-9a-f]{2}(?!\])", pattern)  # a bare \xNN its converter may split before ) or |
    assert re.fullmatch(pattern, f"say {literal} then x.y")
    assert not re.fullmatch(pattern, f"say {literal.replace('.', '!')} then x.y")
    assert pattern_literals(pattern) == [literal, "x.y"]


_GBNF_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_GBNF_ESCAPE = re.compile(r'\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[nrt\\"\[\]])')


def _gbnf_escape_errors(grammar: str) -> list[str]:
    """Escapes llama.cpp's GBNF parser refuses, in the string literals of `grammar` (it takes \\xNN, \\uNNNN,
    \\UNNNNNNNN and \\n \\r \\t \\\\ \\" \\[ \\])."""
    errors = []
    for line in grammar.splitlines():
        for literal in _GBNF_STRING.findall(line):
            rest = _GBNF_ESCAPE.sub("", literal)
            if "\\" in rest:
                errors.append(f"{literal!r} in {line!r}")
    return errors


def test_llama_cpp_grammars_of_every_answer_schema_have_only_escapes_its_parser_takes(cases):
    """llama.cpp's server turns a json_object schema into GBNF; an escape its parser refuses kills the server. The
    converter's output for every answer schema sap sends, and for literals full of regex specials, holds none."""
    grammar = pytest.importorskip("llama_cpp.llama_grammar")
    literal = "a.b$c^d]e\\f(g)|h*i+j?k[l]{m}"
    schemas = {name: case.schema for name, case in cases.items()}
    schemas["repair"] = REPAIR_SCHEMA
    schemas["literals"] = {"type": "object", "properties": {"m": containing([literal, ["x.y", "z$"], "w^"])},
                           "required": ["m"]}
    for name, schema in schemas.items():
        gbnf = grammar.json_schema_to_gbnf(json.dumps(schema))
        assert _gbnf_escape_errors(gbnf) == [], name
    broken = '"z\\x2" "4"'  # what a bare \x24 before ")" became: the check sees it
    assert _gbnf_escape_errors(broken)


def test_the_prompts_state_the_bounds_the_answer_schemas_hold():
    """The text-run and reply bounds live in code (schemas) and in prompt text (what the model is told): one number."""
    from sap.agents.llm_messenger import REPLY_CHARS
    from sap.prompts import prompt

    for name in ("messenger_turn", "messenger_global", "messenger_withhold"):
        assert f"at most {MESSAGE_RUN} characters before, between and after" in prompt(name).system, name
    for name in ("messenger_turn", "messenger_global", "messenger_clarify"):
        assert f"within {REPLY_CHARS} characters" in prompt(name).system, name
    assert f"at most {QUERY_RUN} characters before, between and after" in prompt("cache_query").system
