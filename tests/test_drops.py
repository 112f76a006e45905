"""Drop reasons are typed: each drop carries a DropReason beside its message, the store keeps it, and rows stored
before kinds existed are classified from their message's opening words."""
from __future__ import annotations

import pytest

from sap.agents.judge import Finding, Verdict
from sap.drops import DropReason
from sap.runs.slots import reason_kind
from sap.store import RunStore


@pytest.mark.parametrize("message, kind", [
    ("code check: turn 2 argument path not found", DropReason.CODE_CHECK),
    ("judge reject_text: naturalness: the user names an API", DropReason.JUDGE_REJECT_TEXT),
    ("judge reject_truth: grounding: value not in state", DropReason.JUDGE_REJECT_TRUTH),
    ("modify_pending_order_items failed 3 times at turn 1", DropReason.TOOL_FAILED),
    ("echo mismatch: city not in query", DropReason.ECHO_MISMATCH),
    ("replay through the cache: call 1 (search) gave a different response", DropReason.CACHE_REPLAY),
    ("template t1: abandoned after 5 restarts", DropReason.TEMPLATE_ABANDONED),
    ("LLM role 'planner' (openai/m) failed, rejected: 401", DropReason.ROLE_FAILED),
    ("something new", DropReason.UNKNOWN),
])
def test_messages_stored_before_kinds_are_classified(message, kind):
    assert DropReason.of_text(message) is kind
    assert reason_kind({"reason": message, "kind": None}) == kind.value


def test_a_judge_drop_takes_its_kind_from_the_decision():
    verdict = Verdict.from_findings([Finding(criterion="config_consistency", diagnosis="truth", detail="value not in state")])
    step, message = verdict.next_step(rounds=1, max_rewrites=2)
    assert step == "drop" and DropReason.of_judge(verdict.decision) is DropReason.JUDGE_REJECT_TRUTH
    assert DropReason.of_text(message) is DropReason.JUDGE_REJECT_TRUTH


def test_the_store_keeps_the_kind_beside_the_message(tmp_path):
    from sap.runs.driver import run_config, start_run
    from sap.toolsets import load_toolset

    store = RunStore(f"sqlite:///{tmp_path}/sap.db")
    run_id = start_run(store, load_toolset("store"), run_config(2, 0, None, {}))
    for index, kind in ((0, DropReason.ROLE_FAILED.value), (1, None)):
        assert store.next_slot(run_id, "w", 60) == index
        store.finish(run_id, index, "w", None, "code check: bad path", None, kind=kind)
    rows = store.rejections(run_id)
    assert [(r["reason"], r["kind"]) for r in rows] == [("code check: bad path", "an LLM role gave up"),
                                                        ("code check: bad path", "code check failed")]


def test_a_database_made_before_kinds_gains_the_column_and_reads_kinds_from_messages(tmp_path):
    import sqlite3

    url, path = f"sqlite:///{tmp_path}/old.db", tmp_path / "old.db"
    RunStore(url).engine.dispose()
    with sqlite3.connect(path) as conn:  # the rejections table as the previous release made it, with one row
        conn.execute("ALTER TABLE sap_rejections DROP COLUMN kind")
        conn.execute("INSERT INTO sap_runs (id, toolset, seed, target, config, fingerprint, fingerprint_parts, status, "
                     "created) VALUES ('r1', 'store', 0, 1, '{}', 'f', '{}', 'running', '2026-01-01 00:00:00')")
        conn.execute("INSERT INTO sap_rejections (run_id, \"index\", reason) VALUES ('r1', 0, 'judge reject_text: x')")
    assert RunStore(url).rejections("r1") == [{"index": 0, "reason": "judge reject_text: x", "verdict": None,
                                               "kind": "judge reject_text"}]
