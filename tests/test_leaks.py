"""The leak guard: the code check rejects user or assistant text naming internals, saying which and where."""
from __future__ import annotations

import pytest

from sap.audit.checks import internals_leak
from sap.audit.dialogues import AuditCall, AuditDialogue
from sap.model import ArgProvenance, Tag, Trajectory, Turn
from sap.provenance.checks import code_check
from sap.provenance.leaks import find_leaks
from helpers import call, spec

SPECS = {s.name: s for s in (spec("get_user_details", "Get a user.", {"user_id": {"type": "string"}}),
                             spec("lockDoors", "Locks the doors.", {"pedalPosition": {"type": "number"}}),
                             spec("find", "Find files.", {"name": {"type": "string"}}),
                             spec("ls", "List the folder."))}


def _traj(user: str, assistant: str = "Here is the user: Ann Lee.") -> Trajectory:
    lookup = call("get_user_details", {"user_id": "u1"}, result={"name": "Ann Lee"},
                  prov={"user_id": ArgProvenance(tag=Tag.self_create)})
    return Trajectory(id="t", toolset="demo", seed=1, c0={}, turns=[
        Turn(index=0, state="s", transition=0, calls=[lookup], user_message=user, assistant_message=assistant)])


@pytest.mark.parametrize(("text", "kind", "shown"), [
    ('Please run get_user_details for user "u1".', "tool name", "get_user_details"),
    ('Please get user details for user "u1".', "tool name", "get user details"),
    ('Set the pedalPosition to 0.5 for user "u1".', "raw parameter", "pedalPosition"),
    ('Take $.users[0].name for user "u1".', "JSON path", "$."),
    ('Use the value at orders.user_id for user "u1".', "JSON path", ".user_id"),
    ('Use the prev_output value for user "u1".', "provenance tag", "prev_output"),
    ('Use the [FROM_HISTORY] value for user "u1".', "provenance tag", "[FROM_HISTORY"),
    ('Use the result of turn 0 call 1 for user "u1".', "call position", "turn 0 call 1"),
    ('Please run `find` for user "u1".', "tool name", "`find`"),
    ('Please ls the folder of user "u1".', "tool name", "ls"),
])
def test_a_record_whose_user_message_leaks_is_rejected_naming_the_leak(text, kind, shown):
    problems = code_check(_traj(text), SPECS)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"turn 0 user message leaks {kind}: ") and shown in problems[0]


def test_the_assistant_message_is_checked_too_and_the_calls_name_the_tools_without_specs():
    problems = code_check(_traj('Who is user "u1"?', "get_user_details done (name: Ann Lee)."))
    assert problems and problems[0].startswith("turn 0 assistant message leaks tool name: 'get_user_details'")


def test_common_words_and_values_are_not_leaks():
    for text in ('Find the user "u1" and sort out their name, please.', "Open notes/ls.txt and value-pedalPosition.",
                 "Write to ann.lee@example.com about the cd.txt file.", 'Get the user "u1": Ann Lee, ID u1.'):
        assert find_leaks(text, SPECS, {"user_id", "pedalPosition"}) == [], text
    assert code_check(_traj('Find the user "u1", please.'), SPECS) == []


def test_the_audit_uses_the_same_rules():
    d = AuditDialogue(id="d", users={0: "use the [FROM_CONFIG] value", 1: "find my file, please"},
                      calls=[AuditCall(0, "find", {"name": "a"}, {})])
    looked, found = internals_leak(d)
    assert looked == 2 and [f.where for f in found] == ["d turn 0"] and "provenance tag" in found[0].detail


def test_data_the_dialogue_carries_is_no_leak():
    """A file's text quoted by the assistant (whole or cut with "…") or written out by the user names no tool; the
    same words outside the data still do."""
    history = call("get_user_details", {"user_id": "u1"}, result={"notes": "run ls -la then get_user_details daily"},
                   prov={"user_id": ArgProvenance(tag=Tag.self_create)})
    quoted = 'The notes read "run ls -la then get_user…". Anything else?'
    traj = Trajectory(id="t", toolset="demo", seed=1, c0={}, turns=[
        Turn(index=0, state="s", transition=0, calls=[history], user_message='What do the notes of user "u1" say?',
             assistant_message=quoted)])
    assert code_check(traj, SPECS) == []
    leaked = traj.model_copy(update={"turns": [traj.turns[0].model_copy(update={
        "assistant_message": quoted + " I used get_user_details for it."})]})
    assert [p.split(" in ")[0] for p in code_check(leaked, SPECS)] == [
        "turn 0 assistant message leaks tool name: 'get_user_details'"]
