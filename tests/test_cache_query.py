"""Query generation: the rule writer's echo matches, a wrong echo rejects the sample (in the graph too), and the
LLM writer gets echo problems fed back."""
from __future__ import annotations

import json
import random

from sap.agents.llm_common import LLMRole
from sap.cache import CacheIndex
from sap.cache.query import EchoCall, LLMQueryWriter, QueryDraft, RuleQueryWriter, echo_problems
from sap.cache.sampling import Sampler
from sap.cache.store import LoadedCache
from sap.cache.templates import parse_templates
from sap.graphs.cache_synthesis import CacheSynthesisContext, cache_synthesis_graph
from sap.llm import LLMClient, ModelConfig
from sap.testing.scripted_llm import Reply, ScriptedLLMServer

from helpers import HOTEL_SPECS as SPECS
from helpers import HOTEL_TEMPLATES as TEMPLATES

def _cache() -> LoadedCache:
    cache = LoadedCache("hotels", SPECS, {}, CacheIndex())
    cache.index.add("search_hotels", {"city": "Oslo", "nights": 3}, {"hotels": [{"id": "H1"}]})
    cache.index.add("get_hotel", {"hotel_id": "H1"}, {"hotel_id": "H1", "rooms": 4})
    return cache


def _sample():
    cache = _cache()
    template = parse_templates(TEMPLATES, {s.name: s for s in SPECS})[0]
    return Sampler(cache.index).sample(template, random.Random(0))


class WrongEchoWriter(RuleQueryWriter):
    """The rule query, with an echo that misreads the number of nights."""

    def write(self, sample, specs, rng, feedback=()):
        draft = super().write(sample, specs, rng, feedback)
        draft.echo[0].arguments["nights"] = "3"
        return draft


def test_rule_writer_states_values_verbatim_and_echoes_them():
    sample = _sample()
    draft = RuleQueryWriter().write(sample, {s.name: s for s in SPECS}, random.Random(1))
    assert '"Oslo"' in draft.query and "nights 3" in draft.query and "H1" not in draft.query
    assert [e.model_dump() for e in draft.echo] == sample.stated()
    assert echo_problems(sample, draft) == []


def test_wrong_echo_is_rejected_naming_step_parameter_and_values():
    sample = _sample()
    draft = WrongEchoWriter().write(sample, {s.name: s for s in SPECS}, random.Random(1))
    assert echo_problems(sample, draft) == ['echo step 0 (search_hotels) nights: "3", sampled 3']
    missing = QueryDraft(query="Find me a hotel please.", echo=[EchoCall(**e) for e in sample.stated()])
    assert echo_problems(sample, missing) == ['step 0 (search_hotels) city "Oslo" is not stated in the query',
                                              "step 0 (search_hotels) nights 3 is not stated in the query"]


def _run(writer):
    cache = _cache()
    ctx = CacheSynthesisContext(toolset=cache.toolset(), index=cache.index,
                                templates=parse_templates(TEMPLATES, {s.name: s for s in SPECS}), writer=writer)
    return cache_synthesis_graph().invoke({"index": 0, "seed": 5}, context=ctx)


def test_graph_drops_a_sample_whose_echo_differs_and_accepts_the_rule_writer():
    bad = _run(WrongEchoWriter())
    assert bad["record"] is None and bad["drop_reason"].startswith("echo mismatch: echo step 0 (search_hotels) nights")
    good = _run(RuleQueryWriter())["record"]
    args = good["provenance"][1]["args"]["hotel_id"]
    assert args == {"tag": "prev_output", "source": {"turn": 0, "call": 0, "path": "$.hotels[0].id"},
                    "fallback_from": None}
    assert good["provenance"][0]["args"]["city"]["tag"] == "self_create"
    assert good["meta"]["toolset"] == "cache:hotels" and good["meta"]["mode"] == "cache"


def test_llm_writer_gets_echo_problems_fed_back():
    sample = _sample()
    wrong = {"query": "Hotels in Oslo for 3 nights, then the rooms of the first one.",
             "echo": {"step_0": {"function": "search_hotels", "arguments": {"city": "Oslo", "nights": 4}},
                      "step_1": {"function": "get_hotel", "arguments": {}}}}
    right = {**wrong, "echo": {"step_0": {"function": "search_hotels", "arguments": {"city": "Oslo", "nights": 3}},
                               "step_1": {"function": "get_hotel", "arguments": {}}}}
    with ScriptedLLMServer([Reply(json.dumps(wrong)), Reply(json.dumps(right))]) as server:
        cfg = ModelConfig(model="openai/scripted", api_base=server.api_base, timeout=5, backoff_base=0.01)
        draft = LLMQueryWriter(LLMRole(LLMClient(), cfg, "query_writer")).write(
            sample, {s.name: s for s in SPECS}, random.Random(0))
        requests = server.requests
    assert draft.echo[0].arguments == {"city": "Oslo", "nights": 3}
    assert len(requests) == 2 and 'nights: 4, sampled 3' in requests[1]["messages"][-1]["content"]
    assert "state verbatim: {\"city\":\"Oslo\",\"nights\":3}" in requests[0]["messages"][-1]["content"]


def test_a_left_out_number_inside_another_value_is_not_stated():
    """The echo check matches on token boundaries with the other stated values masked: 3 nights left out of a
    query is not stated by "13", "3.5", a date or another value that holds a 3."""
    sample = _sample()
    echo = [EchoCall(**e) for e in sample.stated()]
    for query in ('Find a hotel in "Oslo" for 13 guests.', 'Find a hotel in "Oslo" rated 3.5.',
                  'Find a hotel in "Oslo" from 2025-03-01.'):
        assert echo_problems(sample, QueryDraft(query=query, echo=echo)) == [
            "step 0 (search_hotels) nights 3 is not stated in the query"], query
    assert echo_problems(sample, QueryDraft(query='A hotel in "Oslo", nights 3, please.', echo=echo)) == []
