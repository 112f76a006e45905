"""The rule judge on real pipeline records, and on hand-modified ones that must fail a given criterion."""
from __future__ import annotations

import json
import re
from typing import Callable

import pytest
from pydantic import ValidationError

from sap.agents.judge import CRITERIA, Finding, RuleJudge, Verdict, _occurs
from sap.agents.messenger import RuleMessenger
from sap.api import synthesize
from sap.export.records import record_to_trajectory
from sap.model import ArgProvenance, Tag, ToolCall, ToolSpec, Trajectory, Turn
from sap.provenance.checks import mentions
from sap.text import describe_value
from sap.toolsets import load_toolset

TOOLSETS = ("filesystem", "store", "travel")
N_RECORDS = 30
JUDGE = RuleJudge()


class AcceptAll:
    """A judge that accepts everything, so the pool holds the pipeline's records before judging."""

    def judge(self, traj, specs):
        return Verdict(decision="accept", reasons=[])


class Pool:
    """The real records of one toolset (synthesized with the in-graph judge off) as trajectories, with verdicts."""

    def __init__(self, name: str) -> None:
        self.specs: dict[str, ToolSpec] = {t.name: t for t in load_toolset(name).tools}
        self.trajs: list[Trajectory] = []
        for record in synthesize(name, N_RECORDS, seed=0, judge=AcceptAll()).records:
            traj = record_to_trajectory(record)
            self.trajs.append(traj.model_copy(update={"rewrite_kind": record["meta"].get("rewrite_kind", "base")}))
        self.verdicts = [JUDGE.judge(t, self.specs) for t in self.trajs]

    def pick(self, ok: Callable[[Trajectory], bool], *, accepted: bool = True) -> Trajectory:
        """A deep copy of the first trajectory satisfying `ok` whose verdict is an accept (or, with
        accepted=False, has no ground-truth finding)."""
        for traj, verdict in zip(self.trajs, self.verdicts):
            clean = verdict.accepted if accepted else verdict.decision != "reject_truth"
            if clean and ok(traj):
                return traj.model_copy(deep=True)
        pytest.skip("no real record fits this modification")


_POOLS: dict[str, Pool] = {}


def pool(name: str) -> Pool:
    """The (cached) pool of one toolset."""
    if name not in _POOLS:
        _POOLS[name] = Pool(name)
    return _POOLS[name]


def new_criteria(p: Pool, original: Trajectory, modified: Trajectory) -> tuple[Verdict, set[str]]:
    """The verdict on the modified trajectory and the criteria it fails that the original did not."""
    before = JUDGE.judge(original, p.specs)
    after = JUDGE.judge(modified, p.specs)
    return after, after.criteria - before.criteria


def insert_turn(traj: Trajectory, pos: int, turn: Turn) -> Trajectory:
    """`traj` with `turn` inserted at position `pos`, later turns and their references renumbered."""
    out = traj.model_copy(deep=True)
    for t in out.turns[pos:]:
        t.index += 1
        for c in t.calls:
            for p in c.args_prov.values():
                if p.turn is not None and p.turn >= pos:
                    p.turn += 1
    out.turns.insert(pos, turn.model_copy(update={"index": pos}))
    return out


def repeat_last_turn(traj: Trajectory) -> Trajectory:
    """`traj` with its last turn repeated once more, same calls and message."""
    out = traj.model_copy(deep=True)
    last = out.turns[-1]
    copy = last.model_copy(deep=True, update={"index": last.index + 1})
    for c in copy.calls:
        c.call_id += "_again"
        for p in c.args_prov.values():
            if p.turn == last.index:
                p.turn = copy.index
    out.turns.append(copy)
    return out


def stated_args(turn: Turn, tags: tuple[Tag, ...]) -> list[tuple[int, str, object]]:
    """(call index, arg name, value) of the arguments of `turn` whose effective tag is in `tags`."""
    return [(i, n, c.args_exec[n]) for i, c in enumerate(turn.calls) for n, p in c.args_prov.items()
            if p.effective_tag() in tags]


# ---------------------------------------------------------------------------------------------------------
# real records

@pytest.mark.parametrize("name", TOOLSETS)
def test_real_records_are_not_rejected_for_tool_names_or_stuck_turns(name):
    p = pool(name)
    assert len(p.trajs) == N_RECORDS
    findings = [f for v in p.verdicts for f in v.reasons]
    assert not [f for f in findings if f.criterion == "reads_as_user"], findings[:3]
    assert not [f for f in findings if "repeats the calls of turn" in f.detail], findings[:3]


@pytest.mark.parametrize("name", TOOLSETS)
def test_real_records_mostly_accepted(name):
    p = pool(name)
    rate = sum(v.accepted for v in p.verdicts) / len(p.verdicts)
    assert rate >= 0.9, f"{name}: {rate:.0%} accepted"


# ---------------------------------------------------------------------------------------------------------
# text problems


def test_raw_json_in_user_message_is_a_text_rejection():
    p = pool("filesystem")
    traj = p.pick(lambda t: True)
    bad = traj.model_copy(deep=True)
    bad.turns[0].user_message += ' Use {"file_name": "notes.txt"} for that.'
    verdict, added = new_criteria(p, traj, bad)
    assert verdict.decision == "reject_text"
    assert added == {"reads_as_user"}
    assert any("raw JSON" in f.detail and f.turn == 0 for f in verdict.reasons)


def test_api_vocabulary_and_tool_names_are_text_rejections():
    p = pool("filesystem")
    traj = p.pick(lambda t: True)
    bad = traj.model_copy(deep=True)
    bad.turns[0].user_message += " Call the function with these args."
    bad.turns[-1].user_message = "ok"
    verdict = JUDGE.judge(bad, p.specs)
    assert verdict.decision == "reject_text"
    details = [f.detail for f in verdict.reasons if f.criterion == "reads_as_user"]
    assert any("API vocabulary" in d and "function" in d and "args" in d for d in details)
    assert any("length 2" in d for d in details)
    store = pool("store")
    shop = store.pick(lambda t: True, accepted=False)
    shop.turns[0].user_message = "Please run get_order_details for my latest order."
    assert any("get_order_details" in f.detail for f in JUDGE.judge(shop, store.specs).reasons
               if f.criterion == "reads_as_user" and f.turn == 0)


def _has_new_string(t: Trajectory) -> bool:
    return any(isinstance(v, str) and len(v) >= 3
               for turn in t.turns for _, _, v in stated_args(turn, (Tag.self_create,)))


def test_missing_new_value_is_a_text_rejection():
    p = pool("filesystem")
    traj = p.pick(_has_new_string)
    bad = traj.model_copy(deep=True)
    turn = next(t for t in bad.turns if any(isinstance(v, str) and len(v) >= 3
                                           for _, _, v in stated_args(t, (Tag.self_create,))))
    _, arg, value = next((i, n, v) for i, n, v in stated_args(turn, (Tag.self_create,))
                         if isinstance(v, str) and len(v) >= 3)
    turn.user_message = re.sub(re.escape(describe_value(value).strip('"')), "it", turn.user_message, flags=re.I)
    assert not mentions(turn.user_message, value)
    verdict, added = new_criteria(p, traj, bad)
    assert verdict.decision == "reject_text"
    assert added == {"message_matches_calls"}
    assert any(f.turn == turn.index and arg in f.detail and "not stated" in f.detail for f in verdict.reasons)


def _restatable(t: Trajectory, specs: dict[str, ToolSpec]) -> tuple[int, str, str] | None:
    """(turn, arg, value) of a prev_output string that its turn's message and task wording do not contain."""
    for turn in t.turns:
        task = " ".join(specs[c.name].description for c in turn.calls).lower()
        for _, n, v in stated_args(turn, (Tag.prev_output,)):
            if isinstance(v, str) and len(v) >= 4 and v.lower() not in turn.user_message.lower() \
                    and v.lower() not in task:
                return turn.index, n, v
    return None


def test_restated_history_value_is_a_text_rejection():
    p = pool("filesystem")
    traj = p.pick(lambda t: _restatable(t, p.specs) is not None)
    turn_no, arg, value = _restatable(traj, p.specs)
    bad = traj.model_copy(deep=True)
    bad.turns[turn_no].user_message += f" That is {value}, to be exact."
    verdict, added = new_criteria(p, traj, bad)
    assert verdict.decision == "reject_text"
    assert added == {"message_matches_calls"}
    assert any(f.turn == turn_no and arg in f.detail and "restated" in f.detail for f in verdict.reasons)


def test_history_value_in_the_task_wording_is_not_a_restatement():
    spec = ToolSpec(name="cancel_pending_order", description="Cancel a pending order and refund it.")
    prov = {"status": ArgProvenance(tag=Tag.prev_output, turn=0, call=0, path="$.status")}
    look = ToolCall(call_id="a", name="list_orders", args_exec={}, args_prov={}, result={"status": "pending"})
    cancel = ToolCall(call_id="b", name="cancel_pending_order", args_exec={"status": "pending"}, args_prov=prov)
    traj = Trajectory(id="x", toolset="t", seed=0, c0={}, turns=[
        Turn(index=0, state="", transition=0, calls=[look], user_message="Please list my orders for me.",
             assistant_message="Done."),
        Turn(index=1, state="", transition=0, calls=[cancel], user_message="Now cancel the pending order, please.",
             assistant_message="Done.")])
    specs = {"cancel_pending_order": spec, "list_orders": ToolSpec(name="list_orders", description="List my orders.")}
    assert "message_matches_calls" not in JUDGE.judge(traj, specs).criteria


# ---------------------------------------------------------------------------------------------------------
# ground-truth problems


def _has_config_string(t: Trajectory) -> bool:
    return any(isinstance(v, str) for turn in t.turns for _, _, v in stated_args(turn, (Tag.initial_state,)))


@pytest.mark.parametrize("name", ["store", "travel"])
def test_wrong_initial_state_value_is_a_truth_rejection(name):
    p = pool(name)
    traj = p.pick(_has_config_string, accepted=False)
    bad = traj.model_copy(deep=True)
    turn = next(t for t in bad.turns if any(isinstance(v, str) for _, _, v in stated_args(t, (Tag.initial_state,))))
    i, arg, value = next(x for x in stated_args(turn, (Tag.initial_state,)) if isinstance(x[2], str))
    wrong = value + "-x"
    turn.calls[i].args_exec[arg] = wrong
    turn.user_message = turn.user_message.replace(value, wrong)  # the text stays in step with the call
    verdict, added = new_criteria(p, traj, bad)
    assert verdict.decision == "reject_truth"
    assert added == {"config_consistency"}
    assert any(f.turn == turn.index and arg in f.detail and "differs from c0" in f.detail for f in verdict.reasons)


def test_new_value_contradicting_c0_is_a_truth_rejection():
    p = pool("travel")
    traj = p.pick(lambda t: t.turns[0].calls and t.c0.get("traveler", {}).get("passenger_name"), accepted=False)
    assert JUDGE.judge(traj, p.specs).decision != "reject_truth"
    bad = traj.model_copy(deep=True)
    call = bad.turns[0].calls[0]
    call.args_exec["passenger_name"] = "Zed Quimby"
    call.args_prov["passenger_name"] = ArgProvenance(tag=Tag.self_create)
    bad.turns[0].user_message += ' The passenger is "Zed Quimby".'
    verdict, added = new_criteria(p, traj, bad)
    assert verdict.decision == "reject_truth"
    assert added == {"config_consistency"}
    assert any("passenger_name" in f.detail and "c0 holds" in f.detail for f in verdict.reasons)


def test_identical_consecutive_turns_are_a_truth_rejection():
    p = pool("filesystem")
    traj = p.pick(lambda t: bool(t.turns[-1].calls))
    bad = repeat_last_turn(traj)
    verdict, added = new_criteria(p, traj, bad)
    assert verdict.decision == "reject_truth"
    assert added == {"state_evolves"}
    assert [f.turn for f in verdict.reasons] == [bad.turns[-1].index]


def test_dialogue_that_changes_nothing_is_a_truth_rejection():
    p = pool("filesystem")
    look = ToolCall(call_id="p", name="pwd", args_exec={}, args_prov={}, result={"current_directory": "/home"})
    pwd = Turn(index=0, state="", transition=0, calls=[look], assistant_message="It is /home.",
               user_message="Please show the absolute path of the current directory.")
    ls = Turn(index=1, state="", transition=0, assistant_message="Here they are.",
              calls=[look.model_copy(update={"call_id": "l", "name": "ls", "result": {"files": []}})],
              user_message="Now list the files and folders in the current directory.")
    traj = Trajectory(id="still", toolset="filesystem", seed=0, c0={}, turns=[pwd, ls])
    verdict = JUDGE.judge(traj, p.specs)
    assert verdict.decision == "reject_truth"
    assert [(f.criterion, f.turn) for f in verdict.reasons] == [("state_evolves", None)]


def test_a_read_that_takes_an_earlier_result_evolves_without_tags():
    """A no-tags record declares no P_o, yet a lookup of a file an earlier listing showed builds on it: the judge
    reads that off the values, as a reader of the dialogue would; an unrelated second read still does not."""
    p = pool("filesystem")
    ls = ToolCall(call_id="l", name="ls", args_exec={}, args_prov={}, result={"files": ["notes.txt", "a"]})
    cat = ToolCall(call_id="c", name="cat", args_exec={"file_name": "notes.txt"},
                   args_prov={"file_name": ArgProvenance(tag=Tag.initial_state)}, result={"content": "hi"})
    turns = [Turn(index=0, state="", transition=0, calls=[ls], assistant_message="There are notes.txt and a.",
                  user_message="Please list the files and folders in the current directory."),
             Turn(index=1, state="", transition=0, calls=[cat], assistant_message="It says hi.",
                  user_message="Show me what notes.txt says.")]
    traj = Trajectory(id="reads", toolset="filesystem", seed=0, c0={}, turns=turns)
    assert not [f for f in JUDGE.judge(traj, p.specs).reasons if f.criterion == "state_evolves"]
    other = traj.model_copy(deep=True)
    other.turns[1].calls[0].args_exec["file_name"] = "todo.txt"
    other.turns[1].user_message = "Show me what todo.txt says."
    assert [f.criterion for f in JUDGE.judge(other, p.specs).reasons if f.criterion == "state_evolves"] == ["state_evolves"]


def _clarifiable(t: Trajectory) -> int | None:
    """A turn position >= 1 whose message states a new or config value of its calls."""
    for pos, turn in enumerate(t.turns[1:], start=1):
        if any(mentions(turn.user_message, v) for _, _, v in stated_args(turn, (Tag.self_create, Tag.initial_state))):
            return pos
    return None


def _with_clarification(traj: Trajectory, pos: int, reply: str, kind: str) -> Trajectory:
    """`traj` with a call-less turn before position `pos`, rewritten as `kind`."""
    nxt = traj.turns[pos]
    _, arg, _ = stated_args(nxt, (Tag.self_create, Tag.initial_state))[0]
    ask = Turn(index=pos, state="", transition=-1, assistant_message=reply.format(p=arg.replace("_", " ")),
               user_message="I have one more thing to do next, can you help me with it?")
    return insert_turn(traj, pos, ask).model_copy(update={"rewrite_kind": kind})


def test_miss_param_needs_a_clarification_question():
    p = pool("filesystem")
    traj = p.pick(lambda t: _clarifiable(t) is not None)
    pos = _clarifiable(traj)
    good = _with_clarification(traj, pos, "Sure. Which {p} should I use?", "miss_param")
    assert JUDGE.judge(good, p.specs).accepted, JUDGE.judge(good, p.specs).reasons
    bad = _with_clarification(traj, pos, "Sure, I will take care of the {p}.", "miss_param")
    verdict = JUDGE.judge(bad, p.specs)
    assert verdict.decision == "reject_truth"
    assert verdict.criteria == {"scenario_structure"}
    assert any(f.turn == pos and "asks no question" in f.detail for f in verdict.reasons)
    # a miss_param dialogue without any call-less turn is wrong too, and so is a base one with one
    assert "scenario_structure" in JUDGE.judge(traj.model_copy(update={"rewrite_kind": "miss_param"}), p.specs).criteria
    assert "scenario_structure" in JUDGE.judge(good.model_copy(update={"rewrite_kind": "base"}), p.specs).criteria


def test_miss_func_needs_a_refusal_then_calls():
    p = pool("filesystem")
    traj = p.pick(lambda t: _clarifiable(t) is not None)
    pos = _clarifiable(traj)
    good = _with_clarification(traj, pos, "Sorry, I cannot do that with the tools I have.", "miss_func")
    assert JUDGE.judge(good, p.specs).accepted, JUDGE.judge(good, p.specs).reasons
    bad = _with_clarification(traj, pos, "Done, the {p} is set.", "miss_func")
    verdict = JUDGE.judge(bad, p.specs)
    assert verdict.decision == "reject_truth"
    assert verdict.criteria == {"scenario_structure"}


# ---------------------------------------------------------------------------------------------------------
# the verdict


def test_every_finding_is_listed_and_truth_outranks_text():
    p = pool("filesystem")
    traj = p.pick(lambda t: bool(t.turns[-1].calls))
    bad = repeat_last_turn(traj)
    bad.turns[0].user_message += ' Here: [{"a": 1}]'
    verdict = JUDGE.judge(bad, p.specs)
    assert verdict.decision == "reject_truth"
    assert {"reads_as_user", "state_evolves"} <= verdict.criteria
    assert not verdict.accepted


def test_verdict_is_json_serializable():
    p = pool("filesystem")
    traj = repeat_last_turn(p.pick(lambda t: bool(t.turns[-1].calls)))
    verdict = JUDGE.judge(traj, p.specs)
    dumped = json.loads(json.dumps(verdict.model_dump()))
    assert dumped["decision"] == "reject_truth"
    assert set(dumped["reasons"][0]) == {"criterion", "turn", "detail"}
    assert Verdict.model_validate(dumped) == verdict
    assert Verdict.model_validate_json(verdict.model_dump_json()) == verdict
    assert traj.model_copy(update={"judge": verdict.model_dump()}).model_dump_json()
    assert Verdict(decision="accept").accepted and Verdict.from_findings([]).decision == "accept"
    assert set(CRITERIA) == set(Finding.model_fields["criterion"].annotation.__args__)
    with pytest.raises(ValidationError):
        Finding(criterion="politeness", turn=None, detail="x")


@pytest.mark.parametrize(("message", "refers"), [("Remove old_notes.txt, please.", True),
                                                  ("Get rid of old_notes.txt, delete it.", True),
                                                  ("Frobnicate old_notes.txt, please.", False)])
def test_a_request_worded_as_the_phrase_book_words_it_refers_to_the_task(message, refers):
    """"remove" is no word of rm's description ("Delete a file"), but the phrase book's requests open with it."""
    specs = {s.name: s for s in load_toolset("filesystem").tools}
    rm = ToolCall(call_id="call_0_0", name="rm", args_exec={"file_name": "old_notes.txt"},
                  args_prov={"file_name": ArgProvenance(tag=Tag.self_create)}, result={"ok": True})
    traj = Trajectory(id="t", toolset="filesystem", seed=0, c0={}, turns=[
        Turn(index=0, state="s", transition=0, calls=[rm], user_message=message, assistant_message="Done.")])
    findings = [f.detail for f in RuleJudge().message_matches_calls(traj, specs) if "does not refer" in f.detail]
    assert (findings == []) is refers, findings


def test_a_path_inside_a_longer_path_is_not_restated() -> None:
    assert not _occurs("move it to /workspace/docs/plan-2.txt", "/workspace")
    assert _occurs("the repo at /workspace. Thanks", "/workspace")
    assert _occurs("files in /workspace/docs", "/workspace/docs")


def test_the_calls_alone_are_judged_before_any_message_is_written():
    p = pool("filesystem")
    traj = p.pick(lambda t: len(t.turns) > 1)
    assert JUDGE.judge_calls(traj, p.specs).accepted
    same = repeat_last_turn(traj)
    assert [f.criterion for f in JUDGE.judge_calls(same, p.specs).reasons] == ["state_evolves"]

    class CallsRejected(RuleJudge):
        def judge_calls(self, traj, specs):
            return Verdict.from_findings([Finding(criterion="state_evolves", turn=None, detail="nothing changes")])

    class CountingMessenger(RuleMessenger):
        written = 0

        def write(self, *args, **kwargs):
            CountingMessenger.written += 1
            return super().write(*args, **kwargs)

    run = synthesize("filesystem", 2, seed=0, max_slots=3, judge=CallsRejected(), messenger=CountingMessenger())
    assert run.accepted == 0 and CountingMessenger.written == 0
    assert [r["reason"] for r in run.rejections] == ["judge reject_truth: state_evolves: nothing changes"] * 3
