"""SAP's pipeline ablations as named switches: each turns off what it names, and the run's fingerprint records it."""
from __future__ import annotations

import json

import pytest

import sap
from sap.agents.planner import RulePlanner
from sap.agents.repair import RuleRepairer
from sap.cli import main
from sap.drops import JUDGE_DROPS, DropReason
from sap.errors import UsageError
from sap.jsonutil import read_records
from sap.model import Tag
from sap.provenance.stats import dataset_stats
from sap.runs.driver import fingerprint, fingerprint_parts
from sap.runs.settings import ABLATIONS, RunSettings
from sap.store.runs import RunStore

N = 12


class RecordingPlanner(RulePlanner):
    """The rule planner, noting the error each binding was asked to fix (None for a first attempt)."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: list[str | None] = []

    def bind(self, req):
        self.errors.append(req.last_error)
        return super().bind(req)


class RecordingRepairer(RuleRepairer):
    """The rule repairer, counting its proposals."""

    def __init__(self) -> None:
        self.asked = 0

    def propose(self, req):
        self.asked += 1
        return super().propose(req)


def test_every_ablation_changes_the_fingerprint_and_bad_names_are_refused():
    ts = sap.load_toolset("store")
    prints = {name: fingerprint(fingerprint_parts(ts, RunSettings(n=5, ablations=names).run_config()))
              for name, names in [("full", ()), *((a, (a,)) for a in ABLATIONS)]}
    assert len(set(prints.values())) == len(ABLATIONS) + 1
    with pytest.raises(UsageError, match="unknown ablation 'no_judge'"):
        RunSettings(n=5, ablations=("no_judge",)).check()
    with pytest.raises(UsageError, match="no_retry sets max_attempts to 1"):
        RunSettings(n=5, ablations=("no_retry",), limits={"max_attempts": 3}).check()


def test_no_retry_never_feeds_an_error_back_to_the_planner_and_repair_keeps_its_switch():
    full, ablated, bare = RecordingPlanner(), RecordingPlanner(), RecordingPlanner()
    repair_full, repair_ablated, repair_off = RecordingRepairer(), RecordingRepairer(), RecordingRepairer()
    sap.synthesize("store", N, seed=3, planner=full, repairer=repair_full)
    sap.synthesize("store", N, seed=3, planner=ablated, repairer=repair_ablated, ablations=("no_retry",))
    sap.synthesize("store", N, seed=3, planner=bare, repairer=repair_off, ablations=("no_retry", "no_repair"))
    assert any(e is not None for e in full.errors)  # the full pipeline re-binds failing calls with their error
    assert all(e is None for e in ablated.errors + bare.errors)
    assert repair_ablated.asked > 0 and repair_off.asked == 0


def test_no_tags_binds_only_configuration_and_new_values(tmp_path):
    out = tmp_path / "no_tags.jsonl"
    assert main(["synthesize", "--toolset", "store", "-n", str(N), "-o", str(out), "--no-tags",
                 "--db", f"sqlite:///{tmp_path / 'runs.db'}"]) == 0
    records = [r for _, r in read_records(out)]
    stats = dataset_stats(records)
    assert len(records) == N
    assert stats["source_columns"]["P_o"] == 0 and stats["tag_distribution"]["prev_user_msg"] == 0
    assert stats["mean_chain_length"] == 0 and stats["fallback_rate"] == 0
    full = dataset_stats(sap.synthesize("store", N, seed=0).records)
    # store's full run has chains (mean L 0.25 here since a write's address parts are the user's new values: the
    # no-op address links are gone), no_tags none
    assert full["source_columns"]["P_o"] > 0.2 and full["mean_chain_length"] > 0.15
    store = RunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    run = store.runs()[0]
    assert run.config["context"]["use_tags"] is False
    # judged on execution only: no slot is rejected by the code check or the judge for its (undeclared) sources
    assert not {r["kind"] for r in store.rejections(run.id)} & {DropReason.CODE_CHECK.value, *JUDGE_DROPS}


class C0RecordingPlanner(RulePlanner):
    """The rule planner, noting each error it was asked to fix beside the slot's c0."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: list[tuple[str, str]] = []

    def bind(self, req):
        if req.last_error:
            self.errors.append((req.last_error, json.dumps(req.c0)))
        return super().bind(req)


def test_no_tags_takes_the_logged_in_customers_own_orders_and_cards_from_c0():
    # c0 is the whole shop: without tags the planner takes orders and cards from it, and only the logged-in
    # customer's own, so the store never refuses a c0 order or card as another customer's
    planner = C0RecordingPlanner()
    run = sap.synthesize("store", N, seed=0, ablations=("no_tags",), planner=planner)
    from_c0 = [a for r in run.records for p in r["provenance"] for n, a in p["args"].items()
               if n in ("order_id", "payment_method_id") and a["tag"] == Tag.initial_state.value]
    assert from_c0  # the check below is about values really taken from c0
    foreign = [e for e, c0 in planner.errors if ("does not belong to the logged-in user" in e
                                                 or "not found for user" in e)
               and json.dumps(e.split("'")[1]) in c0]  # the refused order or card (quoted first) is one of c0's
    assert foreign == []


def test_no_fsm_walks_one_phase_where_any_tool_follows_any_other(tmp_path):
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    run = sap.synthesize("store", N, seed=0, db=db, ablations=("no_fsm",))
    fsm = RunStore(db).fsm(run.run_id)
    assert [s["id"] for s in fsm["states"]] == ["start", "work", "end"]
    visited = {s for r in run.records for s in r["meta"]["states"]}
    assert visited <= {"work", "end"} and len(run.records) == N
    # no producer graph steers the walk: calls whose declared earlier result never came fall back (P_f)
    assert fsm["producers"] == {}
    fallbacks = [a for r in run.records for p in r["provenance"] for a in p["args"].values() if a["tag"] == "fallback"]
    assert any(a.get("fallback_from") == "prev_output" for a in fallbacks)
