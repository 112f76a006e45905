"""The spine's acceptance figures per built-in domain: validation, turns, provenance shares, chain lengths."""
from __future__ import annotations

import json

import pytest

from sap.api import synthesize
from sap.provenance.stats import dataset_stats
from sap.toolsets import builtin_names, load_toolset
from sap.validate import validate_record

N = 200


@pytest.fixture(scope="module", params=builtin_names())
def domain_run(request):
    """200 accepted records of one built-in domain (seed 0) with the toolset they came from."""
    toolset = load_toolset(request.param)
    summary = synthesize(toolset, N, seed=0)
    return toolset, summary


def test_target_reached_and_every_record_replays(domain_run):
    toolset, summary = domain_run
    assert summary.accepted == N
    problems = [p for i, r in enumerate(summary.records) for p in validate_record(r, toolset, i + 1)]
    assert problems == []


def test_dependency_figures_meet_the_spine_targets(domain_run):
    _, summary = domain_run
    stats = dataset_stats(summary.records)
    assert stats["mean_turns"] >= 3
    assert stats["tag_distribution"]["prev_output"] >= 0.25
    assert stats["mean_chain_length"] >= 1.0
    assert stats["max_chain_length"] >= 5
    assert stats["dependent_share"] >= 0.4
    assert stats["fallback_rate"] < 0.15
    assert stats["tag_distribution"]["prev_user_msg"] >= 0.05


def test_parallel_groups_and_closed_virtual_history(domain_run):
    _, summary = domain_run
    from sap.export.records import record_to_trajectory
    from sap.provenance.checks import closure_check

    parallel = sum(any(len(m.get("tool_calls") or []) > 1 for m in r["messages"]) for r in summary.records)
    assert parallel / len(summary.records) >= 0.2
    anchored = [r for r in summary.records if r["meta"]["virtual_history"]]
    assert anchored, "remap-bind-restore never registered a value"
    assert all(closure_check(record_to_trajectory(r)) == [] for r in anchored)


def test_records_have_the_documented_shape(domain_run):
    _, summary = domain_run
    for record in summary.records[:20]:
        assert set(record) >= {"id", "messages", "tools", "initial_config", "provenance", "meta"}
        assert record["messages"][0]["role"] == "system"
        call_ids = []
        for i, msg in enumerate(record["messages"]):
            calls = msg.get("tool_calls") or []
            for k, tc in enumerate(calls):  # a parallel group: its tool messages follow in the same order
                assert isinstance(tc["function"]["arguments"], str)
                json.loads(tc["function"]["arguments"])
                nxt = record["messages"][i + 1 + k]
                assert nxt["role"] == "tool" and nxt["tool_call_id"] == tc["id"]
                call_ids.append(tc["id"])
        assert [p["call_id"] for p in record["provenance"]] == call_ids
        for entry in record["provenance"]:
            for arg in entry["args"].values():
                assert set(arg) == {"tag", "source", "fallback_from"}
                if arg["tag"] == "prev_output":
                    assert set(arg["source"]) == {"turn", "call", "path"}
                    assert arg["source"]["turn"] <= entry["turn"]


def test_error_results_change_nothing(domain_run):
    """The built-in domains declare ERROR_RESULTS_CHANGE_NOTHING; check it on every failed attempt's replay."""
    toolset, summary = domain_run
    from sap.model import ToolCall

    checked = 0
    for record in summary.records[:40]:
        ex = toolset.executor_factory()
        ex.reset(record["initial_config"])
        for msg in record["messages"]:
            for tc in msg.get("tool_calls") or []:
                before = ex.state()
                bogus = ToolCall(call_id="x", name=tc["function"]["name"], args_prov={},
                                 args_exec={k: "__no_such_value__" if isinstance(v, str) else v
                                            for k, v in json.loads(tc["function"]["arguments"]).items()})
                res = ex.execute(bogus)
                if not res.ok:
                    checked += 1
                    assert ex.state() == before, f"{bogus.name} changed state while returning {res.error}"
                else:
                    ex.reset(record["initial_config"])  # the bogus call was valid: start over
                    break
                ex.execute(ToolCall(call_id=tc["id"], name=tc["function"]["name"], args_prov={},
                                    args_exec=json.loads(tc["function"]["arguments"])))
    assert checked > 20
