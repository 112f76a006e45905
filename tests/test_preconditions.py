"""Preconditions learned by trying (a tool that fails until another has run) and planned into the goal's turn."""
from __future__ import annotations

from pathlib import Path

import pytest

from sap.api import synthesize
from sap.export.records import record_to_trajectory
from sap.fsm.build import RuleFSMBuilder
from sap.fsm.prerequisites import error_matches, precondition_for
from sap.graphs.fsm_graph import fsm_dump
from sap.graphs.synthesis import SynthesisContext
from sap.model import FSM, Tag
from sap.toolsets.modules import module_from_path, toolset_from_module
from sap.validate import validate_record

PUMP = Path(__file__).with_name("pump_domain.py")


@pytest.fixture(scope="module")
def pump():
    return toolset_from_module(module_from_path(PUMP))


def test_the_builder_learns_that_the_pump_needs_the_power_first_with_no_hint(pump):
    assert "power" not in pump.tool("start_pump").description.lower()  # the docs do not tell
    fsm = RuleFSMBuilder().build(pump)
    assert fsm.requires == {"start_pump": ["switch_power"]}
    (pre,) = fsm.preconditions
    assert (pre.tool, pre.needs, pre.args) == ("start_pump", "switch_power", {"on": True})
    assert "start_pump" in fsm.writes  # its success after the prerequisite counts as a state change


def test_a_learned_state_error_is_recognised_with_other_values_and_not_for_another_error(pump):
    fsm = RuleFSMBuilder().build(pump)
    assert precondition_for(fsm, "start_pump", "The power must be switched on first.").needs == "switch_power"
    assert precondition_for(fsm, "start_pump", "rate 90 is out of range 1-50") is None
    assert precondition_for(fsm, "start_pump", "The power must be switched on first.", done=["switch_power"]) is None
    learned = "All doors must be locked before starting the engine. Here are the unlocked doors: rear_left"
    assert error_matches(learned, "All doors must be locked before starting the engine. Here are the unlocked "
                                  "doors: driver, passenger")
    assert not error_matches(learned, "Brake pedal needs to be pressed when starting the engine.")


def test_the_learned_fsm_round_trips_through_the_fsm_cache_and_its_key_names_what_is_learned(pump):
    ctx = SynthesisContext(toolset=pump)
    key, fsm = ctx.fsm()
    assert ctx.fsm()[1] is fsm and key.endswith(":pre-where:new-of-kind:described-new:replacements:hand-off:chosen-words:3-8")  # FSMs cached before preconditions (and
    # before creating writes took new values) are not reused
    again = FSM.model_validate(fsm_dump(fsm))
    assert again == fsm and again.preconditions == fsm.preconditions and again.requires == fsm.requires


def test_records_switch_the_power_on_in_the_pump_turn_before_starting_it(pump):
    run = synthesize(pump, 12, seed=3)  # the run stores its FSM and plans with the stored copy
    pump_turns = []
    for i, rec in enumerate(run.records):
        assert validate_record(rec, pump, i) == []
        for turn in record_to_trajectory(rec).turns:
            names = [c.name for c in turn.calls]
            if "start_pump" in names:
                pump_turns.append(turn.calls[:names.index("start_pump")])
    assert pump_turns, "no record starts the pump"
    inserted = [before[-1] for before in pump_turns if before and before[-1].name == "switch_power"]
    assert inserted and all(call.args_exec == {"on": True} for call in inserted)


def test_an_actions_numbers_and_flags_are_the_users_new_values_and_camel_case_verbs_count(pump):
    """The pump's rate is declared self_create on every edge (c0's rate is the current one: 0, out of range), and
    so is the power switch; a camelCase tool opens with its verb (setCruiseControl updates, getSpeed reads)."""
    from sap.fsm.build import named_read, named_update
    from sap.model import ToolSpec

    fsm = RuleFSMBuilder().build(pump)
    tags = [t.provenance_tag[tool] for t in fsm.transitions for tool in t.action if tool in ("start_pump", "switch_power")]
    assert tags and all(v == Tag.self_create for tag in tags for v in tag.values()), tags
    spec = lambda name: ToolSpec(name=name, description="", parameters={"type": "object", "properties": {}})  # noqa: E731
    assert named_update(spec("setCruiseControl")) and not named_update(spec("getSpeed"))
    assert named_read(spec("getSpeed")) and not named_read(spec("setCruiseControl"))
