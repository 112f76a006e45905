"""MissParam / MissFunc rewrite subgraphs on real base trajectories of the three built-in toolsets."""
from __future__ import annotations

import dataclasses
import itertools
import json
import random
import re

import pytest

import sap
from sap.agents.judge import RuleJudge
from sap.executors.base import replay
from sap.export.records import record_to_trajectory, to_record
from sap.graphs import rewrite as rw
from sap.graphs.rewrite import RewriteContext, RewriteRejected, rewrite, rewrite_graph, split_turn
from sap.model import ArgProvenance, Tag, ToolCall, Toolset, ToolSpec, Trajectory, Turn
from sap.provenance.checks import code_check, mentions
from sap.validate import validate_record
from sap.provenance.phrasebook import phrase_book
from sap.agents.requests import Wording
from sap.provenance.withheld import announces, miss_param_problems, shown_before

TOOLSETS = ("store", "filesystem", "travel")
KINDS = ("miss_param", "miss_func")
N_BASES = {"store": 20, "filesystem": 40, "travel": 20}  # filesystem: few bases have a value to withhold (below)
# MissParam withholds, as BFCL does, only values the user introduced (self_create) for required parameters that the
# dialogue has not shown before (earlier messages, results, c0); a base without one has nothing to withhold.
# Measured on 20 bases per run seed 0/1: miss_param store 9/8, filesystem 6/5, travel 5/7 (it was 10/8, 14/10, 5/7
# when optional flags and values shown earlier could be withheld); every passed-over base has no such value, which
# test_keep_rate checks, so these floors are set by the base data. miss_func 20/20 everywhere.
# filesystem MissParam: 0.25 -> 0.05 with goal-level turns: most filesystem arguments are now found by the
# assistant (84 of 118 arguments of 20 seed-0 records are prev_output) and the user's own values are mostly yes/no
# flags and modes, which are not withheld; few bases state a new required string (each pass-over is checked below
# to have nothing to withhold), so the set is 40 bases. Fewer filesystem MissParam variants is the cost, open.
MIN_KEEP = {("store", "miss_param"): 0.35, ("filesystem", "miss_param"): 0.05, ("travel", "miss_param"): 0.2,
            ("store", "miss_func"): 0.95, ("filesystem", "miss_func"): 0.95, ("travel", "miss_func"): 0.95}


@pytest.fixture(scope="module")
def bases() -> dict[str, tuple[Toolset, list[Trajectory]]]:
    out = {}
    for name in TOOLSETS:
        ts = sap.load_toolset(name)
        summary = sap.synthesize(ts, N_BASES[name], seed=0)
        assert summary.accepted == N_BASES[name]
        out[name] = (ts, [record_to_trajectory(r) for r in summary.records])
    return out


@pytest.fixture(scope="module")
def results(bases) -> dict[tuple[str, str], list[tuple[Trajectory, Trajectory | RewriteRejected]]]:
    return {(name, kind): [(b, rewrite(kind, b, ts, seed=i)) for i, b in enumerate(trajs)]
            for name, (ts, trajs) in bases.items() for kind in KINDS}


def _kept(results, name, kind) -> list[tuple[Trajectory, Trajectory]]:
    return [(b, v) for b, v in results[(name, kind)] if isinstance(v, Trajectory)]


def _end_state(ts: Toolset, traj: Trajectory):
    ex = ts.executor_factory()
    try:
        replay(ex, traj.c0, [c for _, _, c in traj.calls()])  # raises if a recorded result differs
        return ex.state()
    finally:
        if hasattr(ex, "close"):
            ex.close()


def _split(variant: Trajectory) -> int:
    """The clarification / handoff turn k*: the one turn without calls."""
    empty = [t.index for t in variant.turns if not t.calls]
    assert len(empty) == 1, empty
    return empty[0]


def _names_tool(text: str, tools) -> list[str]:
    return [n for n in tools if re.search(r"(?<![A-Za-z0-9_])" + re.escape(n) + r"(?![A-Za-z0-9_])", text, re.I)
            or re.search(r"\b" + re.escape(n.replace("_", " ")) + r"\b", text, re.I)]


# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TOOLSETS)
@pytest.mark.parametrize("kind", KINDS)
def test_kept_variants_reach_the_base_end_state_and_pass_code_check(bases, results, name, kind):
    ts, _ = bases[name]
    kept = _kept(results, name, kind)
    assert kept
    for base, variant in kept:
        assert variant.rewrite_kind == kind
        assert code_check(variant) == []
        assert _end_state(ts, variant) == _end_state(ts, base)
        assert "scenario_structure" not in RuleJudge().judge(variant, {t.name: t for t in ts.tools}).criteria


@pytest.mark.parametrize("name", TOOLSETS)
@pytest.mark.parametrize("kind", KINDS)
def test_keep_rate(bases, results, name, kind):
    specs = {t.name: t for t in bases[name][0].tools}
    wording = Wording(specs, phrase_book(specs))
    outcomes = results[(name, kind)]
    rate = sum(isinstance(v, Trajectory) for _, v in outcomes) / len(outcomes)
    assert rate >= MIN_KEEP[(name, kind)], (rate, [v for _, v in outcomes if isinstance(v, RewriteRejected)])
    for base, v in outcomes:
        if isinstance(v, RewriteRejected):  # only bases with nothing to withhold are passed over
            assert kind == "miss_param" and v.reason.startswith("no turn states a value the user introduces"), v
            assert not any(rw._withholdable(base, t, specs, wording) for t in base.turns if t.calls)


@pytest.mark.parametrize("name", TOOLSETS)
@pytest.mark.parametrize("kind", KINDS)
def test_variant_keeps_the_base_calls_and_renumbers_references(results, name, kind):
    for base, variant in _kept(results, name, kind):
        k = _split(variant)
        assert len(variant.turns) == len(base.turns) + 1
        assert [t.index for t in variant.turns] == list(range(len(variant.turns)))
        assert [(c.name, c.args_exec, c.result) for _, _, c in variant.calls()] == \
               [(c.name, c.args_exec, c.result) for _, _, c in base.calls()]
        assert variant.turns[k + 1].assistant_message == base.turns[k].assistant_message
        for t in base.turns:
            new_t = t.index + (t.index >= k)
            assert variant.turns[new_t].user_message == t.user_message or t.index == k
            for i, c in enumerate(t.calls):
                moved = variant.turns[new_t].calls[i]
                assert moved.call_id == f"call_{new_t}_{i}"
                for arg, p in c.args_prov.items():
                    q = moved.args_prov[arg]
                    if p.effective_tag() == Tag.prev_output:
                        assert (q.turn, q.call, q.path) == (p.turn + (p.turn >= k), p.call, p.path)
                    elif p.effective_tag() == Tag.prev_user_msg and p.turn != k:
                        assert q.turn == p.turn + (p.turn > k)
        ids = [c.call_id for _, _, c in variant.calls()]
        assert len(ids) == len(set(ids))


@pytest.mark.parametrize("name", TOOLSETS)
def test_miss_param_shape(bases, results, name):
    ts, _ = bases[name]
    kept = _kept(results, name, "miss_param")
    for base, variant in kept:
        k = _split(variant)
        ask, reveal = variant.turns[k], variant.turns[k + 1]
        assert ask.assistant_message.strip().endswith("?")
        assert not _names_tool(ask.assistant_message, [t.name for t in ts.tools]), ask.assistant_message
        assert [c.name for c in reveal.calls] == [c.name for c in base.turns[k].calls]
        revealed = [c.args_exec[n] for c in reveal.calls for n, p in c.args_prov.items()
                    if p.effective_tag() == Tag.self_create]
        assert revealed, "the reveal turn gives no value"
        for value in revealed:
            assert mentions(reveal.user_message, value)
            assert not mentions(ask.user_message, value), (value, ask.user_message)
        missing = variant.checks["rewrite"]["missing"]
        assert {json.dumps(m["value"]) for m in missing} == {json.dumps(v) for v in revealed}
        # only values the user introduced (P_c) are withheld, never one read from the initial configuration
        base_tags = {json.dumps(c.args_exec[n]): p.tag for c in base.turns[k].calls for n, p in c.args_prov.items()}
        assert {base_tags[json.dumps(m["value"])] for m in missing} == {Tag.self_create}
        for m in missing:  # the question asks for each missing value in plain words (the phrase book's noun)
            assert m["noun"] in ask.assistant_message
            raw = [n for n in m["params"] if re.search(r"_|[a-z][A-Z]|\d", n)]  # an identifier, not a word
            assert not any(n in ask.assistant_message for n in raw), ask.assistant_message
        # as BFCL does it: required parameters only, values the dialogue has not shown before, no announcement
        specs = {t.name: t for t in ts.tools}
        assert miss_param_problems(variant, specs) == []
        assert not announces(ask.user_message), ask.user_message
        for c in reveal.calls:
            for n, p in c.args_prov.items():
                if p.effective_tag() == Tag.self_create:
                    assert n in specs[c.name].required
                    assert shown_before(variant, k, c.args_exec[n], n) is None
        # values of k* that were not withheld stay in user message k* and are read from there
        for c in reveal.calls:
            for n, p in c.args_prov.items():
                if p.effective_tag() == Tag.prev_user_msg and p.turn == k:
                    assert mentions(ask.user_message, c.args_exec[n])


@pytest.mark.parametrize("name", TOOLSETS)
def test_miss_func_shape_and_record(bases, results, name):
    ts, _ = bases[name]
    tools = [t.name for t in ts.tools]
    for base, variant in _kept(results, name, "miss_func"):
        k = _split(variant)
        assert list(variant.missed_function) == [k]
        (missing,) = variant.missed_function[k]
        assert missing in {c.name for c in base.turns[k].calls}
        assert missing not in {c.name for t in base.turns[:k] for c in t.calls}  # not used before it goes missing
        assert missing not in {c.name for c in variant.turns[k].calls}
        assert missing in {c.name for c in variant.turns[k + 1].calls}
        assert variant.turns[k].user_message == base.turns[k].user_message
        text = variant.turns[k].assistant_message
        assert re.search(r"can't|unable|not able", text)
        assert not _names_tool(text, tools), text
        assert not _names_tool(variant.turns[k + 1].user_message, tools)
        record = to_record(variant, ts, {})
        assert record["meta"]["kind"] == "miss_func"
        assert record["meta"]["missed_function"] == {str(k): [missing]}
        # the clarification turn exports as its user message followed by the assistant text
        users = [i for i, m in enumerate(record["messages"]) if m["role"] == "user"]
        at = users[k]
        assert record["messages"][at + 1] == {"role": "assistant", "content": text}
        # then the system message that hands the tool over, and the user's next message
        assert [m["role"] for m in record["messages"][at + 2:at + 4]] == ["system", "user"]
        assert missing not in {t["function"]["name"] for t in record["tools"]}


@pytest.mark.parametrize("kind", KINDS)
def test_records_round_trip_and_validate(bases, results, kind):
    for name in TOOLSETS:
        ts, _ = bases[name]
        for base, variant in _kept(results, name, kind)[:5]:
            record = to_record(variant, ts, {})
            assert record["meta"]["kind"] == kind
            assert ("missed_function" in record["meta"]) == (kind == "miss_func")
            back = record_to_trajectory(json.loads(json.dumps(record)))
            assert back.rewrite_kind == kind
            assert back.missed_function == variant.missed_function
            assert len(back.turns) == len(variant.turns)
            assert validate_record(record, ts) == []
        base_record = to_record(_kept(results, name, kind)[0][0], ts, {})
        assert base_record["meta"]["kind"] == "base"
        assert record_to_trajectory(base_record).rewrite_kind == "base"


def test_deterministic_given_the_seed_and_plain_json_state(bases):
    ts, trajs = bases["travel"]
    for kind in KINDS:
        for i, base in enumerate(trajs[:5]):
            a, b = rewrite(kind, base, ts, seed=i), rewrite(kind, base, ts, seed=i)
            assert a == b
    graph = rewrite_graph()
    out = graph.invoke({"kind": "miss_param", "seed": 3, "base": trajs[0].model_dump(mode="json")},
                       context=RewriteContext(ts))
    assert json.loads(json.dumps(out)) == out
    assert {"pick", "rewrite", "replay_check"} <= set(graph.get_graph().nodes)
    chosen = {(v.checks["rewrite"]["turn"], v.checks["rewrite"]["tool"])
              for s in range(8) if isinstance(v := rewrite("miss_func", trajs[1], ts, seed=s), Trajectory)}
    assert len(chosen) > 1  # the seed matters


def test_a_variant_is_not_rewritten_again(bases, results):
    ts, _ = bases["store"]
    _, variant = _kept(results, "store", "miss_func")[0]
    out = rewrite("miss_param", variant, ts, seed=0)
    assert isinstance(out, RewriteRejected) and "already" in out.reason


class _InstanceStamped:
    """An executor whose state() depends on which instance it is: not a function of c0 and the calls."""

    _ids = itertools.count()

    def __init__(self, inner):
        self.inner, self.n = inner, next(self._ids)

    def reset(self, c0):
        self.inner.reset(c0)

    def execute(self, call):
        return self.inner.execute(call)

    def snapshot(self):
        return self.inner.snapshot()

    def restore(self, snap):
        self.inner.restore(snap)

    def state(self):
        return {**self.inner.state(), "instance": self.n}

    def close(self):
        if hasattr(self.inner, "close"):
            self.inner.close()


@pytest.mark.parametrize("kind", KINDS)
def test_nondeterministic_executor_is_rejected_naming_the_end_state(bases, results, kind):
    ts, _ = bases["store"]
    shaky = dataclasses.replace(ts, executor_factory=lambda: _InstanceStamped(ts.executor_factory()))
    base = _kept(results, "store", kind)[0][0]  # a base the operator turns into a variant on a sound executor
    out = rewrite(kind, base, shaky, seed=0)
    assert isinstance(out, RewriteRejected)
    assert out.kind == kind and "end state" in out.reason


def _tamper(ts: Toolset, variant: Trajectory) -> Trajectory | None:
    """The variant with one argument of its last state-changing call changed, or None if no call changes state."""
    ex = ts.executor_factory()
    changing = None
    try:
        ex.reset(variant.c0)
        for t, i, call in variant.calls():
            before = json.dumps(ex.state(), sort_keys=True, default=str)
            ex.execute(call)
            if json.dumps(ex.state(), sort_keys=True, default=str) != before:
                changing = (t, i)
    finally:
        ex.close()
    if changing is None:
        return None
    call = variant.turns[changing[0]].calls[changing[1]]
    for arg, value in call.args_exec.items():
        if isinstance(value, bool):
            new = not value
        elif isinstance(value, str):
            new = value + "_tampered"
        elif isinstance(value, (int, float)):
            new = value + 1
        else:
            continue
        turns = [t.model_copy(deep=True) for t in variant.turns]
        turns[changing[0]].calls[changing[1]].args_exec[arg] = new
        return variant.model_copy(update={"turns": turns})
    return None


@pytest.mark.parametrize("name", TOOLSETS)
@pytest.mark.parametrize("kind", KINDS)
def test_rewrite_that_changes_an_argument_is_rejected(bases, monkeypatch, name, kind):
    ts, trajs = bases[name]
    original = rw.build_variant
    tampered = []

    def bad_build(kind_, base, plan):
        variant = original(kind_, base, plan)
        bad = _tamper(ts, variant)
        tampered.append(bad)
        return bad or variant

    monkeypatch.setattr(rw, "build_variant", bad_build)
    off_end = 0
    for i, base in enumerate(trajs):
        tampered.clear()
        out = rewrite(kind, base, ts, seed=i)
        if not tampered or tampered[0] is None:
            continue
        assert isinstance(out, RewriteRejected), "a tampered variant was kept"
        ex = ts.executor_factory()
        try:  # where the tampered calls really end up (results not checked)
            end = replay(ex, base.c0, [c for _, _, c in tampered[0].calls()], check=False).state()
        finally:
            ex.close()
        if end != _end_state(ts, base):
            assert "end state" in out.reason, out.reason
            off_end += 1
        else:  # a later call redid the change: the end state matches, but the results do not
            assert "replay" in out.reason, out.reason
    assert off_end >= 3


def test_split_turn_reanchors_values_moved_to_the_reveal_turn():
    def call(cid, name, args, prov, result):
        return ToolCall(call_id=cid, name=name, args_exec=args, args_prov=prov, result=result)

    base = Trajectory(id="t", toolset="x", seed=0, c0={"cfg": {"mode": "fast"}}, turns=[
        Turn(index=0, state="a", transition=0, user_message='Open the box (label "red"; mode "fast").',
             assistant_message="ok", calls=[
                 call("call_0_0", "open", {"label": "red", "mode": "fast"},
                      {"label": ArgProvenance(tag=Tag.self_create),
                       "mode": ArgProvenance(tag=Tag.initial_state, path="$.cfg.mode")}, {"id": "B1"}),
                 call("call_0_1", "peek", {"box": "B1"},
                      {"box": ArgProvenance(tag=Tag.prev_output, turn=0, call=0, path="$.id")}, {"ok": True})]),
        Turn(index=1, state="b", transition=1, user_message="Close it again with the same label.",
             assistant_message="ok", calls=[
                 call("call_1_0", "close", {"box": "B1", "label": "red"},
                      {"box": ArgProvenance(tag=Tag.prev_output, turn=0, call=0, path="$.id"),
                       "label": ArgProvenance(tag=Tag.prev_user_msg, turn=0)}, {"closed": True})]),
    ], virtual_history=[{"turn": 0, "param": "label", "value": "red", "used_at": 1}])
    assert code_check(base) == []
    v = split_turn(base, 0, user_k='Open the box (the label I will give you; mode "fast").',
                   assistant_k="Which label?", user_next='The label is "red".', revealed={json.dumps("red")})
    assert code_check(v) == []
    assert [len(t.calls) for t in v.turns] == [0, 2, 1]
    opened, peek = v.turns[1].calls
    assert opened.args_prov["label"].tag == Tag.self_create
    assert (opened.args_prov["mode"].tag, opened.args_prov["mode"].turn) == (Tag.prev_user_msg, 0)
    assert (peek.call_id, peek.args_prov["box"].turn) == ("call_1_1", 1)
    closing = v.turns[2].calls[0]
    assert (closing.args_prov["box"].turn, closing.args_prov["label"].turn) == (1, 1)
    assert v.virtual_history == [{"turn": 1, "param": "label", "value": "red", "used_at": 2}]
    with pytest.raises(rw.RewriteError):  # the value is stated nowhere any more
        split_turn(base, 0, user_k='Open the box (the label I will give you; mode "fast").',
                   assistant_k="Which label?", user_next="Use the one on the lid.", revealed={json.dumps("red")})


def test_a_hidden_prerequisite_is_refused_as_the_step_the_request_needs():
    """MissFunc hiding a tool that the turn only calls as a prerequisite says the step is missing ("To do that I'd
    first need to ..."), not that the user's request itself is impossible."""
    from sap.graphs.rewrite import _CANNOT, _CANNOT_STEP, _plan_miss_func

    def call(cid, name, result):
        return ToolCall(call_id=cid, name=name, args_exec={}, args_prov={}, result=result)

    specs = {"find_box": ToolSpec(name="find_box", description="Find the box.", parameters={"type": "object"}),
             "open_box": ToolSpec(name="open_box", description="Open the box.", parameters={"type": "object"})}
    base = Trajectory(id="t", toolset="x", seed=0, c0={}, turns=[
        Turn(index=0, state="a", transition=0, user_message="Open my box.", assistant_message="ok",
             calls=[call("call_0_0", "find_box", {"id": "B1"}), call("call_0_1", "open_box", {"open": True})],
             prerequisites=[0])])
    said = {}
    for seed in range(30):
        plan = _plan_miss_func(base, specs, random.Random(seed))
        said[plan["tool"]] = plan["assistant_k"]
    step_leads = {t.split("{task}")[0] for t in _CANNOT_STEP}
    plain_leads = {t.split("{task}")[0] for t in _CANNOT}
    assert any(said["find_box"].startswith(lead) for lead in step_leads), said["find_box"]
    assert any(said["open_box"].startswith(lead) for lead in plain_leads), said["open_box"]


def test_a_hidden_tool_is_refused_by_what_it_does_not_every_step_of_its_docstring():
    from sap.graphs.rewrite import _plan_miss_func

    spec = ToolSpec(name="cancel_booking", description="Cancel a confirmed hotel or flight booking, release the room "
                    "or seat and refund the wallet in full.", parameters={"type": "object"})
    call = ToolCall(call_id="call_0_0", name="cancel_booking", args_exec={}, args_prov={}, result={"ok": True})
    base = Trajectory(id="t", toolset="x", seed=0, c0={}, turns=[
        Turn(index=0, state="a", transition=0, user_message="Cancel it.", assistant_message="ok", calls=[call])])
    said = _plan_miss_func(base, {"cancel_booking": spec}, random.Random(0))["assistant_k"]
    assert "cancel a confirmed hotel or flight booking" in said and "release" not in said, said
