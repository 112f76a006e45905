"""The judge in the cache graph: a text rejection sends the query back to the writer with the findings (and a
rewrite that fixes it is accepted), a ground-truth rejection discards the sample with the reason."""
from __future__ import annotations

import json

from sap.agents.llm_common import LLMRole
from sap.cache.query import LLMQueryWriter, RuleQueryWriter
from sap.cache.templates import parse_templates
from sap.graphs.cache_synthesis import CacheSynthesisContext, cache_synthesis_graph
from sap.llm import LLMClient, ModelConfig
from sap.testing.scripted_llm import Reply, ScriptedLLMServer
from test_cache_query import SPECS, TEMPLATES, _cache

NAMES_TOOL = "reads_as_user: the user message names tools: search_hotels"


def _user(record: dict) -> str:
    return next(m["content"] for m in record["messages"] if m["role"] == "user")


class ToolNamingWriter(RuleQueryWriter):
    """The rule query with the search tool's name in it, until feedback says so (or always, if `stubborn`)."""

    def __init__(self, stubborn: bool = False) -> None:
        self.stubborn, self.feedback = stubborn, []

    def write(self, sample, specs, rng, feedback=()):
        self.feedback.append(list(feedback))
        draft = super().write(sample, specs, rng, feedback)
        if self.stubborn or not any("names tools" in f for f in feedback):
            draft.query += " Use search_hotels for it."
        return draft


def _run(writer, templates: str = TEMPLATES, max_rewrites: int = 2):
    cache = _cache()
    ctx = CacheSynthesisContext(toolset=cache.toolset(), index=cache.index, writer=writer, max_rewrites=max_rewrites,
                                templates=parse_templates(templates, {s.name: s for s in SPECS}))
    return cache_synthesis_graph().invoke({"index": 0, "seed": 5}, context=ctx)


def test_text_rejection_is_rewritten_with_the_findings_and_accepted():
    writer = ToolNamingWriter()
    out = _run(writer)
    assert out["status"] == "accepted" and out["record"] is not None
    assert writer.feedback[0] == [] and NAMES_TOOL in writer.feedback[1] and len(writer.feedback) == 2
    assert out["record"]["meta"]["query_rounds"] == 2
    assert "search_hotels" not in _user(out["record"])
    assert out["record"]["meta"]["judge"]["decision"] == "accept"


def test_text_rejection_that_rewrites_never_fix_is_dropped_after_the_bounded_rounds():
    writer = ToolNamingWriter(stubborn=True)
    out = _run(writer, max_rewrites=1)
    assert out["record"] is None and len(writer.feedback) == 2  # the first query and one rewrite
    assert out["drop_reason"] == f"judge reject_text: {NAMES_TOOL}"
    assert out["verdict"]["decision"] == "reject_text"


def test_ground_truth_rejection_discards_without_a_rewrite():
    lookup_only = """
templates:
  - name: search
    steps:
      - function: search_hotels
"""
    writer = ToolNamingWriter()
    out = _run(writer, lookup_only)
    assert out["record"] is None and len(writer.feedback) == 1
    assert out["drop_reason"] == ("judge reject_truth: state_evolves: no call changes anything and no call consumes "
                                  "an earlier result")


def test_llm_writer_gets_the_judges_findings_and_its_rewrite_is_accepted():
    echo = {"step_0": {"function": "search_hotels", "arguments": {"city": "Oslo", "nights": 3}},
            "step_1": {"function": "get_hotel", "arguments": {}}}
    naming = {"query": "Run search_hotels for hotels in Oslo for 3 nights, then get the rooms of the first hotel.",
              "echo": echo}
    fixed = {"query": "Find hotels in Oslo for 3 nights, then get the rooms of the first hotel.", "echo": echo}
    with ScriptedLLMServer([Reply(json.dumps(naming)), Reply(json.dumps(fixed))]) as server:
        cfg = ModelConfig(model="openai/scripted", api_base=server.api_base, timeout=5, backoff_base=0.01)
        out = _run(LLMQueryWriter(LLMRole(LLMClient(), cfg, "query_writer")))
        requests = server.requests
    assert len(requests) == 2 and "rejected your previous request" not in requests[0]["messages"][-1]["content"]
    assert NAMES_TOOL in requests[1]["messages"][-1]["content"]
    assert out["status"] == "accepted" and _user(out["record"]) == fixed["query"]
