"""MissParam's variant check (`sap.provenance.withheld`): a withheld turn that announces the gap, withholds an
optional parameter or a value shown before, or a follow-up without the value, is rejected naming it; kept variants
and their records pass it and `sap validate`."""
from __future__ import annotations

import pytest

import sap
from sap.export.records import record_to_trajectory, to_record
from sap.graphs.rewrite import RewriteRejected, rewrite
from sap.model import Trajectory
from sap.provenance.withheld import announces, holds, miss_param_problems, shown_before
from sap.validate import validate_record


@pytest.fixture(scope="module")
def variant() -> tuple[sap.model.Toolset, Trajectory]:
    """A kept filesystem MissParam variant and its toolset."""
    ts = sap.load_toolset("filesystem")
    for i, record in enumerate(sap.synthesize(ts, 20, seed=0).records):
        out = rewrite("miss_param", record_to_trajectory(record), ts, seed=i)
        if not isinstance(out, RewriteRejected):
            return ts, out
    raise AssertionError("no filesystem base gave a MissParam variant")


def _specs(ts) -> dict:
    return {t.name: t for t in ts.tools}


def _with_user(traj: Trajectory, index: int, text: str) -> Trajectory:
    turns = [t.model_copy(update={"user_message": text}) if t.index == index else t for t in traj.turns]
    return traj.model_copy(update={"turns": turns})


def _withheld(traj: Trajectory) -> tuple[int, str, str, object]:
    """(turn k, tool, parameter, value) of the variant's first withheld value."""
    k = traj.checks["rewrite"]["turn"]
    call = next(c for c in traj.turns[k + 1].calls if any(p.tag.value == "self_create" for p in c.args_prov.values()))
    param = next(n for n, p in call.args_prov.items() if p.tag.value == "self_create")
    return k, call.name, param, call.args_exec[param]


def test_a_kept_variant_and_its_record_pass(variant):
    ts, traj = variant
    assert miss_param_problems(traj, _specs(ts)) == []
    assert validate_record(to_record(traj, ts, {}), ts) == []


@pytest.mark.parametrize("text", ["Please move it, the destination I'll tell you in a moment.",
                                  "Move the file; I still need to give you the folder.",
                                  "Copy it over, I'll let you know where."])
def test_an_announcing_withheld_turn_is_rejected(variant, text):
    ts, traj = variant
    k = traj.checks["rewrite"]["turn"]
    assert announces(text)
    assert any(f"user message {k} announces" in p for p in miss_param_problems(_with_user(traj, k, text), _specs(ts)))


def test_natural_requests_do_not_count_as_announcements():
    for text in ["Move one of the log files into the archive.", "Could you rename a file for me?",
                 "Let me know when it's done.", "I'll need the report later today."]:
        assert not announces(text), text


def test_a_withheld_value_stated_earlier_or_in_its_turn_or_missing_from_the_reveal_is_rejected(variant):
    ts, traj = variant
    k, _, param, value = _withheld(traj)
    said = value if isinstance(value, str) else str(value)
    stated = _with_user(traj, k, traj.turns[k].user_message + f" Use {said}.")
    assert any(f"is stated in user message {k}" in p for p in miss_param_problems(stated, _specs(ts)))
    unrevealed = _with_user(traj, k + 1, "Sorry, go ahead.")
    assert any(f"is not given in user message {k + 1}" in p for p in miss_param_problems(unrevealed, _specs(ts)))
    if k > 0:
        earlier = _with_user(traj, k - 1, traj.turns[k - 1].user_message + f" ({said})")
        assert any(f"is shown before turn {k}" in p for p in miss_param_problems(earlier, _specs(ts)))
    in_c0 = traj.model_copy(update={"c0": {**traj.c0, "noted": [value]}})
    assert any("in the initial configuration" in p for p in miss_param_problems(in_c0, _specs(ts)))


def test_an_optional_withheld_parameter_is_rejected(variant):
    ts, traj = variant
    _, tool, param, _ = _withheld(traj)
    spec = _specs(ts)[tool]
    loose = spec.model_copy(update={"parameters": {**spec.parameters,
                                                   "required": [r for r in spec.required if r != param]}})
    problems = miss_param_problems(traj, {**_specs(ts), tool: loose})
    assert any(f"withheld parameter {param} of {tool}" in p and "optional" in p for p in problems)


def test_values_are_found_in_results_and_configurations_as_leaves_and_keys():
    data = {"dir": {"report.txt": {"size": 12}}, "tags": ["alpha", 7]}
    assert holds(data, "report.txt") and holds(data, 7) and holds(data, ["x", "alpha"])
    assert not holds(data, 1) and not holds(data, "beta") and not holds(data, True)


def test_shown_before_names_where(variant):
    _, traj = variant
    k, _, _, value = _withheld(traj)
    assert shown_before(traj, k, value) is None
    assert shown_before(traj, len(traj.turns), value) is not None  # the follow-up states it


def test_an_exported_variant_is_checked_at_its_question_not_at_a_recap_before_it(variant):
    """An exported record keeps no rewrite turn: the check finds the question turn as the first call-less turn that
    is not the recap of a write to confirm (tau2's policy puts one before each write), so a MissParam variant with
    a recap earlier in the dialogue still validates (tau2/retail seed 0, record 69 failed here)."""
    from sap.model import Turn
    from sap.provenance.checks import CONFIRM_QUESTIONS
    from sap.provenance.withheld import withheld_turn

    ts, traj = variant
    k = withheld_turn(traj)
    recap = Turn(index=0, state=traj.turns[0].state, transition=-1, calls=[], user_message="Please do it.",
                 assistant_message="I'll make that change. " + CONFIRM_QUESTIONS[0])
    shifted = traj.model_copy(update={"checks": {}, "turns": [recap] + [
        t.model_copy(update={"index": t.index + 1}) for t in traj.turns]})
    assert withheld_turn(shifted) == k + 1
    bare = traj.model_copy(update={"checks": {}})
    assert withheld_turn(bare) == k
