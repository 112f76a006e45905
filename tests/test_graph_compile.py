"""Each graph kind is compiled once per process, however many slots, runs and contexts use it."""
from __future__ import annotations

from collections import Counter

import pytest
from langgraph.graph import StateGraph

from sap.api import synthesize
from sap.graphs import synthesis
from sap.graphs.cache_synthesis import compiled_cache_synthesis_graph
from sap.graphs.fsm_graph import compiled_fsm_graph
from sap.graphs.rewrite import rewrite_graph
from sap.graphs.synthesis import compiled_synthesis_graph, turn_graph
from sap.graphs.variant import VariantContext, compiled_variant_graph, make_variants
from sap.runs.driver import RunDriver, run_config, start_run
from sap.store import RunStore
from sap.store.checkpoint import checkpointer_for
from sap.toolsets import load_toolset

MIX = {"base": 0.6, "miss_param": 0.2, "miss_func": 0.2}
ONE_EACH = {"fsm_graph": 1, "synthesis": 1, "run_turn": 1, "rewrite": 1}


@pytest.fixture
def compiles(monkeypatch):
    """Compilations by graph name, counted from a process state where no graph is compiled yet."""
    for cached in (compiled_synthesis_graph, turn_graph, rewrite_graph, compiled_fsm_graph, compiled_variant_graph,
                   compiled_cache_synthesis_graph):
        cached.cache_clear()
    monkeypatch.setattr(synthesis, "_FSM_CACHE", {})  # so the FSM drafting graph runs too
    counted: Counter = Counter()
    compile_ = StateGraph.compile

    def counting(self, *args, **kwargs):
        graph = compile_(self, *args, **kwargs)
        counted[graph.name] += 1
        return graph

    monkeypatch.setattr(StateGraph, "compile", counting)
    yield counted
    for cached in (compiled_synthesis_graph, turn_graph, rewrite_graph, compiled_fsm_graph, compiled_variant_graph,
                   compiled_cache_synthesis_graph):  # later tests compile with the real method again
        cached.cache_clear()


def test_a_20_slot_run_on_sqlite_compiles_each_graph_once(tmp_path, compiles):
    url = f"sqlite:///{tmp_path}/run.db"
    store = RunStore(url)
    toolset = load_toolset("store")
    run_id = start_run(store, toolset, run_config(20, 7, MIX, {}, max_slots=20))
    with checkpointer_for(url) as saver:
        progress = RunDriver(store, run_id, toolset, saver).run()
        again = RunDriver(store, run_id, toolset, saver).run()  # a second driver, same process: no new compile
    assert progress.slots == 20 and again.slots == 20
    kinds = Counter(r["meta"]["kind"] for r in store.records(run_id))
    assert kinds["miss_param"] and kinds["miss_func"]  # the rewrite graph ran, on many slots
    assert dict(compiles) == ONE_EACH


def test_api_synthesize_and_variants_compile_each_graph_once(compiles):
    summary = synthesize("travel", 20, seed=7, mix=MIX, max_slots=20)
    assert summary.attempted == 20
    synthesize("store", 5, seed=1, mix=MIX)  # another toolset and context: the same compiled graphs
    assert dict(compiles) == ONE_EACH
    ctx = VariantContext(load_toolset("travel"))
    bases = [r for r in summary.records if r["meta"]["kind"] == "base"][:5]
    kept = next((o for seed in bases for o in make_variants(ctx, seed, 2, augment=("miss_param", "miss_func"))
                 if o.records), None)
    assert kept is not None  # a variant went through the whole graph (yield itself: bench/variant_yield.py)
    assert dict(compiles) == {**ONE_EACH, "variant": 1}
