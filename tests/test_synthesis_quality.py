"""The spine's acceptance figures per built-in domain: validation, turns, provenance shares, chain lengths."""
from __future__ import annotations

import json

import pytest

from sap.api import synthesize
from sap.provenance.stats import dataset_stats
from sap.toolsets import builtin_names, load_toolset
from sap.validate import validate_record

N = 100
# store's FSM declares modify_user_address's new address as prev_output from get_user_details: bound that way the
# write sets the current address again (a no-op, refused since issue 13), so the re-planned values are fallbacks
# and the chains that ran through such no-op writes are gone: 1.21 -> 0.91 mean L, 1% -> 17% P_f at seed 0
# travel: the FSM probe now searches inside the scenario's calendar, so hotel searches return and book_hotel's
# dates and get_hotel_details' id are declared prev_output; a walk without the search before them falls back:
# 14% -> 17.5% P_f at seed 0. Both are FSM-builder work (an alternative source per argument), not planner slack.
# Chain length is SAP 3.4's (issue 22): P_i, P_c and P_f arguments have L = 0 even when an equal value was bound
# before, and a fallback recovers only from c0 or a new value. store at seed 0: mean L 0.78, L>=1 40.9%, P_f 16.9%
# (the earlier measure, now `value_reuse`, gives 1.01 on the same records).
# Since the natural-text, reply and hard-variant merges (stop 29) store at seed 0 has mean L 0.78 -> 0.71 (100
# records; 0.67 at 200), the share of arguments with L >= 1 40.9% -> 39.3%, P_f 16.9% -> 21.9% and 30 -> 39 of 100 records truncated at a failing turn; the cause is
# not isolated yet (neither the address coherence nor the probe's extra tries: measured without each). Open.
# With learned prerequisites (issue 14) store at seed 0 reaches checkout in 27 records (2 before): its inserted
# add_to_cart binds item_id from c0 (P_f) when no search came before (22 such arguments, 9 before), and fewer
# records are truncated (39 -> 26), so more modify_user_address fallbacks: mean L 0.71 -> 0.63, dependent
# share 39.3% -> 35.4%, P_f 21.9% -> 25.3%.
# Goal-level turns (the default user style since this stop) merge a lookup turn into the turn it serves, so the
# link between them is inside one turn (L = 0): store at seed 0, goal style, mean L 0.52, dependent share 31.0%,
# P_f 27.2% (explicit style on the same code: 0.59, 34.9%, 26.2%). The fallback rate is the open problem here.
# Stop 30: the FSM declares a write's address parts self_create (the address read back from the account is what
# the write replaces: bound from it the write was a no-op, refused, and re-planned as five fallbacks), and a flag,
# a number, an enum's pick or an address part is no longer announced turns ahead of its use (remap-bind-restore is
# kept for name-like values), nor are an action's numbers and flags read from c0 (its current value). Store at
# seed 0: P_f 27.2% -> 3.8%, mean L 0.52 -> 0.32, dependent share 31.0% -> 18% (the lost depth was the no-op
# address links and the announced numbers; each address write now adds five new values, which the per-argument
# shares weigh as five independent arguments); travel mean L 0.95 (was just
# above 1.0 with announced numbers and dates). The floors follow; output-derived depth is issue 13's measure.
FLOORS = {"store": {"mean_chain_length": 0.28, "fallback_rate": 0.06, "dependent_share": 0.16, "prev_user_msg": 0.0},
          "travel": {"mean_chain_length": 0.85, "fallback_rate": 0.2, "prev_user_msg": 0.01}}
# travel's restated values about 3% -> 2.5% (seed 0, this session's planning changes: modify_booking_dates takes
# new dates from the user in its own turn; c0 values are the named customer's): still present, floor 2%.
# 7cda2bf (a write's enum is the user's pick: book_flight's seat class was copied from an earlier booking): travel
# at seed 0 mean L 0.962 -> 0.946, P_f 18.1% -> 17.7%, restated 2.25% -> 1.58%. The restated values are the
# currency conversion's two currencies alone, and the changed walks hold 11 conversions instead of 16: floor 1%.
# This session's travel changes (every place on a route; a flight search's filters one flight's of c0): at seed 0
# mean L 0.946 -> 0.891, P_f 17.7% -> 16.6%. The chains that went are flight searches continuing an earlier result's
# origin and another's destination with no flight between them (46% of searches found nothing; 5% now): their
# filters now come from one flight of c0 where the dialogue's values do not pair up. Floor 0.9 -> 0.85.


@pytest.fixture(scope="module", params=builtin_names())
def domain_run(request):
    """100 accepted records of one built-in domain (seed 0) with the toolset they came from."""
    toolset = load_toolset(request.param)
    summary = synthesize(toolset, N, seed=0)
    return toolset, summary


def test_target_reached_and_every_record_replays(domain_run):
    toolset, summary = domain_run
    assert summary.accepted == N
    problems = [p for i, r in enumerate(summary.records) for p in validate_record(r, toolset, i + 1)]
    assert problems == []


def test_dependency_figures_meet_the_spine_targets(domain_run):
    toolset, summary = domain_run
    stats = dataset_stats(summary.records)
    floors = FLOORS.get(toolset.name, {})
    assert stats["mean_turns"] >= 3
    assert stats["tag_distribution"]["prev_output"] >= 0.25
    assert stats["mean_chain_length"] >= floors.get("mean_chain_length", 1.0)
    assert stats["max_chain_length"] >= 5
    assert stats["dependent_share"] >= floors.get("dependent_share", 0.4)
    assert stats["fallback_rate"] < floors.get("fallback_rate", 0.15)
    # values the user gave in an earlier turn: present in every domain. The floor was 5% while the FSM probe
    # searched with dates outside the scenario's calendar (its hotel searches failed, so nothing seemed to feed
    # check-in dates and the user restated them); with dates inside it, travel takes them from earlier results
    # (prev_output 55% -> 71%) and its user-derived share is about 4%. Output-derived depth is the one that
    # teaches dependency (issue 13); announced-ahead values are reported apart by `sap stats`.
    # store restates nothing a user would refer back to by name (its stated parameters are flags, numbers,
    # addresses and search words, never announced ahead), so it has no floor.
    assert stats["tag_distribution"]["prev_user_msg"] >= floors.get("prev_user_msg", 0.03)


def test_parallel_groups_and_closed_virtual_history(domain_run):
    _, summary = domain_run
    from sap.export.records import record_to_trajectory
    from sap.provenance.checks import closure_check

    parallel = sum(any(len(m.get("tool_calls") or []) > 1 for m in r["messages"]) for r in summary.records)
    assert parallel / len(summary.records) >= 0.2
    anchored = [r for r in summary.records if r["meta"]["virtual_history"]]
    # store's restated parameters are all flags, numbers, addresses or search words, which are never announced
    # ahead (planner._from_stated): nothing there for remap-bind-restore; the other domains restate names
    assert anchored or summary.records[0]["meta"]["toolset"] == "store", "remap-bind-restore never registered a value"
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
                    assert {"turn", "call", "path"} <= set(arg["source"]) <= {"turn", "call", "path", "selector"}
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
