"""RODS variant pipeline end to end: kept variants are topology-isomorphic to their seeds, run on new values and
pass `sap validate`; a function that keeps failing is swapped for a same-role substitute in the next round; the
graph checkpoints; variants feed the active pool; and the same pipeline with every role on a scripted LLM."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from sap.agents.config import build_agents, build_agents_config
from sap.agents.judge import RuleJudge
from sap.agents.messenger import ClarifyRequest, RuleMessenger
from sap.agents.planner import RulePlanner
from sap.api import synthesize
from sap.curriculum import ActivePool, PoolConfig
from sap.curriculum.frontier import task_category
from sap.curriculum.online import OnlineSynthesis, variant_maker
from sap.curriculum.pool import PoolTask
from sap.export.records import record_to_trajectory
from sap.graphs.rewrite import joined_turns
from sap.graphs.variant import VariantContext, make_variants
from sap.llm import LLMClient
from sap.model import ExecResult
from sap.provenance.topology import topology_difference
from sap.testing.role_model import role_model
from sap.testing.scripted_llm import ScriptedLLMServer
from sap.toolsets import load_toolset
from sap.validate import validate_record


@pytest.fixture(scope="module")
def store_seeds():
    return synthesize("store", 3, seed=0).records  # yield over more seeds: bench/variant_yield.py (store 28/30)


def _values(record: dict) -> list:
    return [json.loads(tc["function"]["arguments"]) for m in record["messages"] for tc in m.get("tool_calls") or []]


def test_kept_variants_are_isomorphic_run_on_new_values_and_validate(store_seeds, tmp_path):
    toolset = load_toolset("store")
    ctx = VariantContext(toolset)
    kept, out = 0, tmp_path / "variants.jsonl"
    with out.open("w") as fh:
        for seed in store_seeds:
            for outcome in make_variants(ctx, seed, 2, augment=("miss_param", "miss_func")):
                if not outcome.records:
                    assert outcome.reason and outcome.memory  # a failure says why, round by round
                    continue
                kept += 1
                variant = outcome.records[0]
                assert topology_difference(record_to_trajectory(seed), record_to_trajectory(variant)) is None
                assert variant["initial_config"] != seed["initial_config"]
                assert _values(variant) != _values(seed)
                assert variant["meta"]["rods"]["seed_id"] == seed["id"] and variant["meta"]["kind"] == "base"
                assert {r["meta"]["kind"] for r in outcome.records[1:]} <= {"miss_param", "miss_func"}
                for record in outcome.records:
                    assert validate_record(record, toolset) == []
                    fh.write(json.dumps(record) + "\n")
    assert kept >= 4  # of 6
    done = subprocess.run([sys.executable, "-m", "sap.cli", "validate", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_variants_are_deterministic_and_checkpointable(store_seeds):
    ctx = VariantContext(load_toolset("store"))
    plain = make_variants(ctx, store_seeds[0], 2)
    saver = InMemorySaver()
    checkpointed = make_variants(ctx, store_seeds[0], 2, checkpointer=saver)
    assert [o.records for o in plain] == [o.records for o in checkpointed]
    assert saver.get_tuple({"configurable": {"thread_id": f"{store_seeds[0]['id']}:v0"}}) is not None


def test_a_function_that_keeps_failing_is_replaced_by_a_same_role_substitute():
    fs = load_toolset("filesystem")
    seed = next(r for r in synthesize(fs, 12, seed=8).records  # calls cat, and no tool whose variants tend to fail
                if "cat" in (names := {p["name"] for p in r["provenance"]}) and not names & {"mkdir", "rmdir", "cp", "mv"})
    factory = fs.executor_factory

    class CatDown:
        """The filesystem executor with `cat` out of service."""

        def __init__(self) -> None:
            self.inner = factory()

        def execute(self, call):
            return ExecResult(False, error="cat: service unavailable") if call.name == "cat" else self.inner.execute(call)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    broken = replace(fs, executor_factory=CatDown)
    outcome = make_variants(VariantContext(broken), seed, 1)[0]
    assert outcome.memory[0]["stage"] == "execution" and outcome.memory[0]["tool"] == "cat"
    assert outcome.records, outcome.reason
    rods = outcome.records[0]["meta"]["rods"]
    assert rods["substitutions"]["cat"] in {"head", "tail", "wc", "sort"}  # read(file_name), like cat
    names = [p["name"] for p in outcome.records[0]["provenance"]]
    assert "cat" not in names and rods["substitutions"]["cat"] in names
    assert validate_record(outcome.records[0], fs) == []
    # by function name the graphs differ; by role class of the substituted functions they are isomorphic
    assert topology_difference(record_to_trajectory(seed), record_to_trajectory(outcome.records[0])) is not None


@pytest.mark.parametrize("kind", ["miss_param", "miss_func"])
def test_a_rewrite_seed_makes_variants_of_its_own_category(kind):
    toolset = load_toolset("store")
    ctx = VariantContext(toolset)
    seed = synthesize(toolset, 1, seed=2, mix={kind: 1.0}).records[0]
    assert seed["meta"]["kind"] == kind and any(not t.calls for t in record_to_trajectory(seed).turns)
    base = joined_turns(record_to_trajectory(seed))
    assert all(t.calls for t in base.turns) and len(base.turns) == len(record_to_trajectory(seed).turns) - 1
    assert [c.name for _, _, c in base.calls()] == [c.name for _, _, c in record_to_trajectory(seed).calls()]
    variants = variant_maker(ctx, per_seed=1)(PoolTask(id=seed["id"], type=kind, origin="seed"), seed)
    assert variants and all(record["meta"]["kind"] == kind for _, record in variants)
    for _, record in variants:
        assert validate_record(record, toolset) == []
        rewritten = record_to_trajectory(record)
        assert any(not t.calls for t in rewritten.turns)  # its own withheld / refused turn
        assert topology_difference(base, joined_turns(rewritten)) is None


def test_task_types_are_categories_and_each_seeds_its_quota():
    toolset = load_toolset("store")
    seeds = [*synthesize(toolset, 3, seed=0).records, *synthesize(toolset, 3, seed=2, mix={"miss_func": 1.0}).records]
    pool = ActivePool(PoolConfig(window=4, min_rollouts=2, seed_quota=1, cooldown_steps=0))
    pool.synthesis = OnlineSynthesis(pool, variant_maker(VariantContext(toolset), per_seed=1), workers=0,
                                     type_of=task_category)
    for record in seeds:
        pool.add_seed(record["id"], task_category(record), record)
        pool.report(record["id"], [0.4, 0.6])
    assert {t.type for t in pool.tasks.values()} == {"base", "miss_func"}
    report = pool.end_epoch()
    assert sorted(pool.tasks[i].type for i in report.seeds) == ["base", "miss_func"]  # one per category
    queued = pool.queue()
    assert queued and all(t.type == pool.tasks[t.parent].type == pool.payload(t.id)["meta"]["kind"] for t in queued)


def test_task_category_reads_kind_and_long_context():
    record = {"id": "r", "meta": {"toolset": "bfcl/VehicleControlAPI:long_context", "kind": "base"}}
    assert task_category(record) == "long_context"
    assert task_category({"id": "r", "meta": {"toolset": "store", "kind": "miss_param"}}) == "miss_param"
    with pytest.raises(ValueError, match="record 'x': meta.kind 'odd' is not a task category"):
        task_category({"id": "x", "meta": {"toolset": "store", "kind": "odd"}})


def test_variants_feed_the_pool_queue_as_candidates_of_their_seed(store_seeds):
    pool = ActivePool(PoolConfig(window=4, min_rollouts=2, inject_share=1.0))
    pool.synthesis = OnlineSynthesis(pool, variant_maker(VariantContext(load_toolset("store")), per_seed=1), workers=0)
    for record in store_seeds:
        pool.add_seed(record["id"], "store", record)
        pool.report(record["id"], [0.4, 0.6])
    report = pool.end_epoch()
    assert len(report.seeds) == 2  # the quota of the one type
    queued = pool.queue()
    assert queued and {t.parent for t in queued} <= set(report.seeds)
    assert all(pool.payload(t.id)["meta"]["rods"]["seed_id"] == t.parent for t in queued)
    assert pool.end_epoch().injected == [t.id for t in queued]


def test_variant_pipeline_with_every_role_on_a_scripted_llm(store_seeds):
    toolset = load_toolset("store")
    with ScriptedLLMServer(responder=role_model) as server:
        cfg = build_agents_config(agents="llm", model_overrides={"model": "openai/scripted", "api_base": server.api_base},
                                  message_mode="global")
        client = LLMClient()
        ctx = VariantContext.from_agents(toolset, build_agents(cfg, client), bind_tries=4)
        # seed record 0: record 1 (since stop 30) binds each order id by the scripted model's first option,
        # which is never a pending order of the user (a data fact of that record, not a pipeline fault)
        outcomes = make_variants(ctx, store_seeds[0], 2)
    kept = [o.records[0] for o in outcomes if o.records]
    assert kept, [o.reason for o in outcomes]
    for record in kept:
        assert validate_record(record, toolset) == []
        assert topology_difference(record_to_trajectory(store_seeds[0]), record_to_trajectory(record)) is None
        assert record["meta"]["agents"]["message_mode"] == "global"
    roles = client.ledger.snapshot()["roles"]
    assert roles["messenger"]["calls"] >= len(kept)  # one global call per written variant
    assert roles["planner"]["calls"] > 0 and roles["judge"]["calls"] >= len(kept)


def test_cli_variants_writes_records_that_validate_and_repeat_with_a_database(store_seeds, tmp_path, capsys):
    from sap.cli import main

    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text("".join(json.dumps(r) + "\n" for r in store_seeds[:2]))
    out, again = tmp_path / "v.jsonl", tmp_path / "v2.jsonl"
    assert main(["variants", str(seeds), "-n", "2", "--augment", "miss_func", "-o", str(out)]) == 0
    assert main(["validate", str(out)]) == 0
    db = f"sqlite:///{tmp_path / 'v.db'}"
    assert main(["variants", str(seeds), "-n", "2", "--augment", "miss_func", "-o", str(again), "--db", db]) == 0
    assert again.read_bytes() == out.read_bytes()
    kinds = [json.loads(line)["meta"]["kind"] for line in out.read_text().splitlines()]
    assert "base" in kinds and set(kinds) <= {"base", "miss_func"}
    assert main(["variants", str(seeds), "--augment", "bogus", "-o", str(out)]) == 2
    assert "unknown kind 'bogus'" in capsys.readouterr().err


def test_a_crashed_variant_thread_continues_from_its_checkpoint(store_seeds):
    toolset = load_toolset("store")
    narrated = []

    class CountingPlanner(RulePlanner):
        def narrate(self, req):
            narrated.append(req.toolset)
            return super().narrate(req)

    class CrashingJudge(RuleJudge):
        def judge(self, traj, specs):
            raise RuntimeError("judge process died")

    saver = InMemorySaver()
    with pytest.raises(RuntimeError, match="judge process died"):
        make_variants(VariantContext(toolset, planner=CountingPlanner(), judge=CrashingJudge()), store_seeds[0], 1,
                      checkpointer=saver)
    assert len(narrated) == 1  # the plan node ran and was checkpointed
    resumed = make_variants(VariantContext(toolset, planner=CountingPlanner()), store_seeds[0], 1, checkpointer=saver)
    assert len(narrated) == 1  # the plan was not made again
    assert resumed[0].records == make_variants(VariantContext(toolset), store_seeds[0], 1)[0].records


class _ClarifyingMessenger(RuleMessenger):
    """The rule messenger with a clarifier, as the LLM messenger has: its replies are marked, and counted."""

    def __init__(self) -> None:
        super().__init__()
        self.kinds: list[str] = []

    def clarify(self, req: ClarifyRequest) -> str:
        self.kinds.append(req.kind)
        return "Just a moment. " + req.template


def _withholdable(traj) -> bool:
    """Whether some turn of a store trajectory has a value MissParam may withhold."""
    from sap.provenance.phrasebook import phrase_book
    from sap.agents.requests import Wording
    from sap.graphs.rewrite import _withholdable as withholdable

    specs = {t.name: t for t in load_toolset("store").tools}
    return any(withholdable(traj, t, specs, Wording(specs, phrase_book(specs))) for t in traj.turns if t.calls)


def test_augmentations_use_the_messenger_clarifier_as_synthesis_does():
    messenger = _ClarifyingMessenger()
    # a base with a value MissParam may withhold (a required one the user introduces, not shown before)
    base = next(r for r in synthesize("store", 10, seed=0).records if _withholdable(record_to_trajectory(r)))
    outcomes = make_variants(VariantContext(load_toolset("store"), messenger=messenger), base, 2,
                             augment=("miss_param", "miss_func"))
    augmented = [r for o in outcomes for r in o.records[1:]]
    assert augmented and set(messenger.kinds) == {"miss_param", "miss_func"}
    for record in augmented:  # the unservable turn's reply is the clarifier's
        replies = [m["content"] for m in record["messages"] if m["role"] == "assistant" and not m.get("tool_calls")]
        assert any(str(text).startswith("Just a moment. ") for text in replies)


def test_a_variant_c0_holds_what_the_seed_c0_held():
    """The round's c0 is the first candidate seed whose collections have at least the seed c0's entries and
    statuses (a cancel of a confirmed booking needs a confirmed booking)."""
    from sap.agents.variant_planner import c0_profile, holds_as_much

    seed = {"bookings": [{"id": "B1", "status": "confirmed"}], "traveler": {"name": "x", "cards": {"c1": {"n": 1}}}}
    assert c0_profile(seed) == {"$.bookings": (1, {"status=confirmed"}), "$.traveler.cards": (1, set())}
    assert holds_as_much(c0_profile({"bookings": [{"id": "B7", "status": "confirmed"}, {"id": "B8", "status": "x"}],
                                     "traveler": {"name": "y", "cards": {"c9": {"n": 2}}}}), c0_profile(seed))
    assert not holds_as_much(c0_profile({"bookings": [{"id": "B7", "status": "cancelled"}],
                                         "traveler": {"name": "y", "cards": {"c9": {"n": 2}}}}), c0_profile(seed))
    assert not holds_as_much(c0_profile({"bookings": [], "traveler": {"name": "y", "cards": {}}}), c0_profile(seed))


def test_the_topology_planner_binds_each_argument_from_its_slot_source_and_avoids_repeats():
    """Two earlier results can fill a parameter: the slot's source is the one bound, and a twin call of the same
    tool is not repeated when another value exists."""
    from helpers import call, request, spec
    from sap.agents.planner import HistoryCall
    from sap.agents.variant_planner import CallSlot, TopologyPlanner, VariantPlan
    from sap.model import Tag

    str_ = {"type": "string"}
    routes = spec("get_routes", "Routes from a place.", {"origin_location_id": str_})
    history = [HistoryCall(0, 0, call("search", {"q": "x"}, result={"location_id": "L1"}, call_id="a")),
               HistoryCall(0, 1, call("profile", {}, result={"origin_location_id": "L2"}, call_id="b"))]
    for source in ((0, 0), (0, 1)):
        slot = CallSlot(1, 0, "get_routes", {"origin_location_id": Tag.prev_output}, {"origin_location_id": source})
        plan = VariantPlan([[], [slot]], 0, "")
        for seed in range(5):
            b = TopologyPlanner(RulePlanner(), plan).bind(request(routes, turn=1, history=history, seed=seed))
            prov = b.args_prov["origin_location_id"]
            assert (prov.turn, prov.call) == source  # by score alone the profile's exact field would win
    c0 = {"traveler": {"origin_location_id": "L2"}, "locations": [{"location_id": "L2"}, {"location_id": "L3"}]}
    twin = [HistoryCall(1, 0, call("get_routes", {"origin_location_id": "L2"}, result={"routes": []}, call_id="c"))]
    slot = CallSlot(1, 1, "get_routes", {"origin_location_id": Tag.initial_state}, {})
    plan = VariantPlan([[], [CallSlot(1, 0, "get_routes", {}, {}), slot]], 0, "")
    for seed in range(5):
        b = TopologyPlanner(RulePlanner(), plan).bind(request(routes, turn=1, index=1, history=twin, c0=c0, seed=seed))
        assert b.args_exec["origin_location_id"] == "L3"
