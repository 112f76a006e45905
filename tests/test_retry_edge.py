"""Retry, replan, drop and truncation in the synthesis graph, over a tiny hand-made domain and FSM."""
import pytest

import sap.graphs.synthesis as synthesis
from sap.agents.planner import RulePlanner
from sap.executors.python_object import PythonObjectExecutor
from sap.graphs.synthesis import SynthesisContext, synthesis_graph
from sap.model import FSM, FSMState, StateType, Tag, Toolset, Transition
from sap.provenance.checks import code_check
from sap.export.records import record_to_trajectory
from sap.toolsets.loaders import tools_from_class

CALLS: dict[str, int] = {}  # tool name -> executions (module level: executor rollbacks rebuild instances)


def _count(name):
    CALLS[name] = CALLS.get(name, 0) + 1
    return CALLS[name]


class Desk:
    """A login desk with a flaky service and two broken ones."""

    def __init__(self):
        self.users = []
        self.session = None
        self.uses = 0

    def _load_scenario(self, config):
        self.users = [u["name"] for u in config["users"]]

    def login(self, name: str) -> dict:
        """Log in as a user.

        Args:
            name: The user's name.
        """
        _count("login")
        if name not in self.users:
            return {"error": f"unknown user {name!r}"}
        self.session = name
        return {"token": f"tok-{name.lower()}"}

    def flaky(self, token: str) -> dict:
        """Use the service with a session token; it rejects the first two attempts.

        Args:
            token: The session token.
        """
        n = _count("flaky")
        self.uses += 1
        if n <= 2:
            return {"error": f"attempt {n} failed: token rejected"}
        return {"accepted": True, "uses": self.uses}

    def stamp(self, token: str) -> dict:
        """Stamp the session.

        Args:
            token: The session token.
        """
        _count("stamp")
        return {"stamped": token}

    def broken_a(self, code: str) -> dict:
        """Submit a code to service A, which is down.

        Args:
            code: The code.
        """
        _count("broken_a")
        return {"error": "service A is down"}

    def broken_b(self, code: str) -> dict:
        """Submit a code to service B, which is down.

        Args:
            code: The code.
        """
        _count("broken_b")
        raise RuntimeError("service B exploded")


def sample_config(seed):
    return {"users": [{"name": "Ann"}, {"name": "Bob"}]}


TOOLSET = Toolset(name="desk", description="A login desk.", tools=tools_from_class(Desk),
                  executor_factory=lambda: PythonObjectExecutor([Desk], timeout=0.5), sample_config=sample_config)


class RecordingPlanner:
    """RulePlanner that remembers every request it was given."""

    def __init__(self):
        self.inner = RulePlanner()
        self.requests = []

    def bind(self, req):
        self.requests.append(req)
        return self.inner.bind(req)

    def ahead(self, reqs, story=None, later=()):
        return self.inner.ahead(reqs, story, later)

    def seen(self, tool):
        return [(r.turn, r.index, r.last_error) for r in self.requests if r.spec.name == tool]


class FixedFSM:
    """An FSM builder that returns the FSM it was given."""

    def __init__(self, fsm):
        self.fsm = fsm

    def build(self, toolset, feedback=None):
        return self.fsm

    def cache_key(self):
        return f"fixed:{self.fsm.model_dump_json()}"


def states(*ids):
    kinds = {"start": StateType.INITIAL, "end": StateType.COMPLETED}
    return [FSMState(id=i, type=kinds.get(i, StateType.NORMAL)) for i in ids]


def edge(src, dst, tool, **tags):
    return Transition(**{"from": src, "to": dst}, action=[tool], provenance_tag={tool: tags})


LOGIN = {"name": Tag.initial_state}
USE_TOKEN = {"token": Tag.prev_output}


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    CALLS.clear()
    monkeypatch.setattr(synthesis, "_FSM_CACHE", {})  # isolate tests from FSMs cached by earlier ones
    yield


def run(fsm, turns, seed=7, **context):
    planner = RecordingPlanner()
    context.setdefault("replay_check", False)  # count only the synthesis attempts, not the verification replay
    ctx = SynthesisContext(toolset=TOOLSET, fsm_builder=FixedFSM(fsm), planner=planner, min_turns=turns,
                           max_turns=turns, **context)
    out = synthesis_graph().invoke({"index": 0, "seed": seed}, context=ctx)
    assert not ctx.executors  # the slot's executor was released
    return out, planner


def tool_calls(record):
    return [tc["function"]["name"] for m in record["messages"] if m["role"] == "assistant"
            for tc in m.get("tool_calls") or []]


FLAKY_FSM = FSM(states=states("start", "authed", "end"), initial="start", finals=["end"],
                transitions=[edge("start", "authed", "login", **LOGIN), edge("authed", "end", "flaky", **USE_TOKEN)],
                producers={"flaky": {"token": ["login"]}})


@pytest.mark.parametrize("seed", [7, 8])
def test_flaky_tool_is_retried_with_the_previous_error_and_committed_once(seed):
    out, planner = run(FLAKY_FSM, 2, seed=seed)
    assert out["status"] == "accepted", out.get("drop_reason")
    assert CALLS["flaky"] == 3
    assert len(planner.seen("login")) == 1  # earlier turns are not re-planned by a retry
    assert planner.seen("flaky") == [(1, 0, None), (1, 0, "attempt 1 failed: token rejected"),
                                     (1, 0, "attempt 2 failed: token rejected")]
    # failed argument sets are handed to the retries
    flaky_reqs = [r for r in planner.requests if r.spec.name == "flaky"]
    assert [len(r.failed_args) for r in flaky_reqs] == [0, 1, 2]
    token = out["turns"][0]["calls"][0]["result"]["token"]
    assert flaky_reqs[2].failed_args == [{"token": token}, {"token": token}]

    committed = out["turns"][1]["calls"]
    assert len(committed) == 1
    call = committed[0]
    assert call["name"] == "flaky" and call["attempts"] == 3 and call["ok"]
    assert call["result"] == {"accepted": True, "uses": 1}  # the failed attempts' state change was rolled back
    assert call["args_prov"]["token"]["tag"] == "prev_output"
    assert out["turns"][0]["calls"][0]["attempts"] == 1

    record = out["record"]
    assert tool_calls(record) == ["login", "flaky"]
    assert [p["name"] for p in record["provenance"]] == ["login", "flaky"]
    assert record["meta"]["truncated"] is False and record["meta"]["retries"] == 2
    tool_msgs = [m for m in record["messages"] if m["role"] == "tool"]
    assert all("rejected" not in m["content"] for m in tool_msgs)
    assert code_check(record_to_trajectory(record)) == []
    assert [(e["tool"], e["attempt"], e["error"]) for e in out["attempt_log"]] == [
        ("flaky", 1, "attempt 1 failed: token rejected"), ("flaky", 2, "attempt 2 failed: token rejected")]


def test_flaky_tool_beyond_max_attempts_is_not_committed():
    out, planner = run(FLAKY_FSM, 2, max_attempts=2, min_keep_turns=1)
    assert CALLS["flaky"] == 2
    assert out["status"] == "truncated"
    assert tool_calls(out["record"]) == ["login"]
    assert out["record"]["meta"]["truncated"] is True


BROKEN_FSM = FSM(states=states("start", "mid", "end"), initial="start", finals=["end"],
                 transitions=[edge("start", "mid", "broken_a", code=Tag.self_create),
                              edge("start", "mid", "broken_b", code=Tag.self_create),
                              edge("mid", "end", "login", **LOGIN)])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tools_always_failing_at_turn_zero_drop_the_trajectory_after_replans(seed):
    out, planner = run(BROKEN_FSM, 2, seed=seed)
    assert out["status"] == "dropped"
    assert out["record"] is None
    first, second = [e["tool"] for e in out["attempt_log"]][::3]
    assert {first, second} == {"broken_a", "broken_b"}  # replanned around the first onto the second
    assert CALLS == {"broken_a": 3, "broken_b": 3}  # login never ran
    assert [e["tool"] for e in out["attempt_log"]] == [first] * 3 + [second] * 3
    assert out["drop_reason"] == f"{second} failed 3 times at turn 0"
    assert out["drop_kind"] == "a tool kept failing"
    assert out["blacklist"] == [first]
    errors = {e["tool"]: e["error"] for e in out["attempt_log"]}
    assert errors["broken_a"] == "service A is down"
    assert "RuntimeError: service B exploded" in errors["broken_b"]
    # each retry saw the previous attempt's error
    for tool in ("broken_a", "broken_b"):
        assert [e for _, _, e in planner.seen(tool)] == [None, errors[tool], errors[tool]]


def test_no_replans_drops_on_the_first_failing_tool():
    out, _ = run(BROKEN_FSM, 2, max_replans=0)
    assert out["status"] == "dropped"
    (tool,) = {e["tool"] for e in out["attempt_log"]}
    assert out["drop_reason"] == f"{tool} failed 3 times at turn 0"
    assert CALLS == {tool: 3}


LATE_FSM = FSM(states=states("start", "authed", "stamped", "end"), initial="start", finals=["end"],
               transitions=[edge("start", "authed", "login", **LOGIN),
                            edge("authed", "stamped", "stamp", **USE_TOKEN),
                            edge("stamped", "end", "broken_a", code=Tag.self_create)],
               producers={"stamp": {"token": ["login"]}})


def test_tool_failing_at_a_later_turn_truncates_there():
    out, planner = run(LATE_FSM, 3)
    assert out["status"] == "truncated"
    assert CALLS["broken_a"] == 3
    record = out["record"]
    assert record is not None
    assert record["meta"]["truncated"] is True
    assert record["meta"]["states"] == ["authed", "stamped"]
    assert record["meta"]["retries"] == 3
    assert tool_calls(record) == ["login", "stamp"]
    assert sum(m["role"] == "user" for m in record["messages"]) == 2
    assert "broken_a" not in [p["name"] for p in record["provenance"]]
    assert [t["index"] for t in out["turns"]] == [0, 1]
    traj = record_to_trajectory(record)
    assert code_check(traj) == []
    stamp = traj.turns[1].calls[0]
    assert stamp.args_prov["token"].tag == Tag.prev_output and stamp.args_prov["token"].turn == 0
    assert stamp.result == {"stamped": traj.turns[0].calls[0].result["token"]}


def test_later_failure_below_min_keep_turns_is_dropped():
    out, _ = run(LATE_FSM, 3, min_keep_turns=3)
    assert out["status"] == "dropped" and out["record"] is None
    assert out["drop_reason"] == "broken_a failed 3 times at turn 2"
