"""BFCL multi-turn tasks as RODS seeds: BFCL's base file converted into sap records whose provenance locates every
earlier-result and c0 value, a task whose gold call fails left out by name, variants made from a converted seed,
and `sap frontier` reading a BFCL question file."""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from sap.curriculum.frontier import task_category
from sap.export.records import record_to_trajectory
from sap.provenance.jsonpath import resolve
from sap.provenance.topology import topology_difference
from sap.toolsets.bfcl import INSTALL_HINT, BfclUnavailable, data_dir

try:
    BASE = data_dir() / "BFCL_v4_multi_turn_base.json"
except BfclUnavailable:
    BASE = None
pytestmark = pytest.mark.skipif(BASE is None, reason=f"bfcl-eval is not installed ({INSTALL_HINT})")


@pytest.fixture(scope="module")
def converted():
    from sap.curriculum.bfcl_seeds import bfcl_seed_records

    return bfcl_seed_records(BASE)


def test_the_base_file_becomes_seeds_whose_sources_hold_their_values(converted):
    seeds, skipped = converted
    assert len(seeds) >= 190 and len(seeds) + len(skipped) == 200
    located = 0
    for seed in seeds:
        traj = record_to_trajectory(seed)
        assert all(turn.calls for turn in traj.turns)
        for turn in traj.turns:
            for call in turn.calls:
                for name, prov in call.args_prov.items():
                    value = call.args_exec[name]
                    if prov.tag.value == "prev_output":
                        source = traj.turns[prov.turn].calls[prov.call]
                        assert (prov.turn, prov.call) < (turn.index, turn.calls.index(call))
                        assert resolve(source.result, prov.path) in (value, *([value[0]] if isinstance(value, list) else []))
                        located += 1
                    elif prov.tag.value == "initial_state":
                        assert resolve(traj.c0, prov.path) in (value, *([value[0]] if isinstance(value, list) else []))
                        assert isinstance(value, (str, list))  # a number or flag in c0 is no source
    assert located >= 200  # BFCL's own output-derived arguments, each at the call and path that gave it


def test_a_task_whose_gold_call_fails_is_left_out_by_name(converted):
    _, skipped = converted
    assert any("multi_turn_base_153 turn 0: gold call verify_traveler_information(" in s and "fails on replay" in s
               for s in skipped)


def test_a_converted_seed_makes_isomorphic_variants_that_validate(converted):
    from sap.graphs.variant import VariantContext, make_variants
    from sap.toolsets import load_toolset
    from sap.validate import validate_record

    seed = next(s for s in converted[0] if s["id"] == "bfcl_seed_multi_turn_base_64")  # lock, brake, start engine
    toolset = load_toolset(seed["meta"]["toolset"])
    kept = [o.records[0] for o in make_variants(VariantContext(toolset), seed, 2, augment=()) if o.records]
    assert kept
    for variant in kept:
        assert validate_record(variant, toolset) == []
        assert topology_difference(record_to_trajectory(seed), record_to_trajectory(variant)) is None
        calls = [p["name"] for p in variant["provenance"][:3]]
        assert calls == ["lockDoors", "pressBrakePedal", "startEngine"]
        first = json.loads(next(m for m in variant["messages"] if m.get("tool_calls"))["tool_calls"][0]["function"]
                           ["arguments"])
        assert first == {"unlock": False, "door": ["driver", "passenger", "rear_left", "rear_right"]}  # settings stay


def test_frontier_reads_a_bfcl_question_file_and_names_a_missing_answer_file(tmp_path: Path):
    from sap.cli.frontier import _seeds

    questions = tmp_path / "q.json"
    questions.write_text("".join(line + "\n" for line in BASE.read_text().splitlines()[60:66]))
    args = argparse.Namespace(data=str(questions), answers=None, toolset=None)
    with pytest.raises(ValueError, match=f"no possible_answer file for {questions}"):
        _seeds(args)
    (tmp_path / "possible_answer").mkdir()
    shutil.copy(BASE.parent / "possible_answer" / BASE.name, tmp_path / "possible_answer" / "q.json")
    seeds = _seeds(args)
    assert [r["id"] for r in seeds] == [f"bfcl_seed_multi_turn_base_{i}" for i in range(60, 66)]
    assert {task_category(r) for r in seeds} == {"base"}


@pytest.mark.parametrize("kind", ["miss_param", "miss_func"])
def test_missparam_and_missfunc_tasks_seed_variants_of_their_category(tmp_path: Path, kind: str):
    from sap.curriculum.bfcl_seeds import bfcl_seed_records
    from sap.curriculum.online import variant_maker
    from sap.curriculum.pool import PoolTask
    from sap.graphs.rewrite import joined_turns
    from sap.graphs.variant import VariantContext
    from sap.toolsets import load_toolset
    from sap.validate import validate_record

    name = f"BFCL_v4_multi_turn_{kind}.json"
    questions = tmp_path / name
    questions.write_text("".join(line + "\n" for line in (BASE.parent / name).read_text().splitlines()[:5]))
    (tmp_path / "possible_answer").mkdir()
    answers = (BASE.parent / "possible_answer" / name).read_text().splitlines()[:5]
    (tmp_path / "possible_answer" / name).write_text("".join(line + "\n" for line in answers))
    seeds, skipped = bfcl_seed_records(questions)
    assert len(seeds) == 5 and not skipped and {task_category(s) for s in seeds} == {kind}
    first = record_to_trajectory(seeds[0])
    callless = {"miss_param": 3, "miss_func": 2}[kind]  # the task's turn whose gold is no call
    assert [i for i, t in enumerate(first.turns) if not t.calls] == [callless]
    if kind == "miss_func":
        assert first.missed_function == {2: ["sort"]}  # BFCL gives sort back at turn 3: hidden through turn 2
        assert "sort" not in {t["function"]["name"] for t in seeds[0]["tools"]}
    assert all(t.calls for t in joined_turns(first).turns)
    seed = seeds[4]  # a file task whose variants run on the rule agents
    toolset = load_toolset(seed["meta"]["toolset"])
    variants = variant_maker(VariantContext(toolset), per_seed=1)(PoolTask(id=seed["id"], type=kind, origin="seed"),
                                                                  seed)
    assert variants and all(v["meta"]["kind"] == kind and validate_record(v, toolset) == [] for _, v in variants)
