"""Tests for PythonObjectExecutor: rollback on failure, timeouts, result checks, snapshots and replay."""
import hashlib
import json
import threading
import time

import pytest

from helpers import call
from sap.executors.base import ReplayMismatch, replay
from sap.executors.python_object import PythonObjectExecutor, ToolHung

TIMEOUT = 0.2
SPIN_THREADS = []


@pytest.fixture(autouse=True)
def _clear_threads():
    SPIN_THREADS.clear()


class Counter:
    """A tiny stateful tool class: a counter, a list of notes, and tools that misbehave."""

    def __init__(self):
        self.count = 0
        self.notes = []
        self.runs = 0  # every tool entry, including failures (rolled back with the state)

    def _load_scenario(self, config):
        self.count = config.get("count", 0)
        self.notes = list(config.get("notes", []))

    def bump(self, by: int = 1):
        """Add `by` to the counter."""
        self.count += by
        return {"count": self.count}

    def note(self, text: str):
        """Append a note."""
        self.notes.append(text)
        return {"notes": list(self.notes)}

    def explode(self, text: str):
        """Change state, then raise."""
        self.count += 100
        self.notes.append(text)
        raise ValueError(f"cannot handle {text!r}")

    def spin(self):
        """Change state, then loop forever (pure bytecode)."""
        SPIN_THREADS.append(threading.current_thread())
        self.count = -1
        self.notes.append("spinning")
        while True:
            self.count -= 1

    def doze(self, seconds: float):
        """Change state, sleep in C, then change state again."""
        self.count = -7
        time.sleep(seconds)
        self.count = -8
        self.notes.append("woke up")
        return {"count": self.count}

    def give_set(self):
        """Return a non-JSON value after changing state."""
        self.count += 5
        return {1, 2, 3}

    def give_object(self):
        """Return an arbitrary object."""
        self.count += 5
        return object()

    def refuse(self, reason: str):
        """Change state, then return an error dict."""
        self.count += 1000
        self.notes.append("refused")
        return {"error": f"refused: {reason}", "code": 7}

    def need_two(self, a: int, b: str):
        """Two required arguments."""
        self.runs += 1
        return {"a": a, "b": b}


def make(c0=None, timeout=TIMEOUT):
    ex = PythonObjectExecutor([Counter], timeout=timeout)
    ex.reset(c0 if c0 is not None else {"count": 1, "notes": ["start"]})
    return ex


@pytest.fixture
def ex():
    executor = make()
    yield executor
    executor.close()


def test_reset_loads_config_and_state_reflects_it(ex):
    assert ex.state() == {"Counter": {"count": 1, "notes": ["start"], "runs": 0}}


def test_successful_call_returns_value_and_changes_state(ex):
    res = ex.execute(call("bump", {"by": 4}))
    assert res.ok and res.value == {"count": 5} and res.error is None
    assert ex.state()["Counter"]["count"] == 5


def test_raising_tool_gives_error_and_rolls_back(ex):
    ex.execute(call("bump", {"by": 2}))
    before = ex.state()
    res = ex.execute(call("explode", {"text": "boom"}))
    assert not res.ok
    assert "ValueError" in res.error and "cannot handle 'boom'" in res.error
    assert ex.state() == before  # count += 100 and the note were undone
    # and the executor keeps working from the rolled-back state
    assert ex.execute(call("bump")).value == {"count": 4}


def test_args_are_copied_so_tools_cannot_alias_caller_data(ex):
    args = {"text": "x"}
    tc = call("note", args)
    ex.execute(tc)
    ex.state()["Counter"]["notes"].append("mutated view")  # state() is a copy
    assert ex.state()["Counter"]["notes"] == ["start", "x"]
    assert tc.args_exec == {"text": "x"}


def test_spinning_tool_times_out_and_rolls_back(ex):
    ex.execute(call("bump", {"by": 1}))
    before = ex.state()
    t0 = time.monotonic()
    with pytest.raises(ToolHung, match=r"tool 'spin' did not return within 0.2 s"):
        ex.execute(call("spin"))
    assert time.monotonic() - t0 < TIMEOUT + 2.0
    assert ex.state() == before
    time.sleep(0.1)  # give the runaway thread a chance to run if it were still alive
    assert ex.state() == before
    assert ex.execute(call("bump", {"by": 3})).value == {"count": 5}
    assert ex.state()["Counter"] == {"count": 5, "notes": ["start"], "runs": 0}


def test_spinning_thread_is_interrupted(ex):
    with pytest.raises(ToolHung):
        ex.execute(call("spin"))
    assert len(SPIN_THREADS) == 1
    SPIN_THREADS[0].join(timeout=2.0)
    assert not SPIN_THREADS[0].is_alive()  # the runaway loop was stopped, not left burning a core


def test_sleeping_tool_times_out_and_cannot_corrupt_later_state(ex):
    before = ex.state()
    with pytest.raises(ToolHung, match="doze"):
        ex.execute(call("doze", {"seconds": 0.5}))
    assert ex.state() == before
    # keep working while the runaway thread is still asleep
    assert ex.execute(call("note", {"text": "during"})).ok
    time.sleep(0.5)  # the runaway thread wakes up here and would write count = -8 / "woke up"
    assert ex.state()["Counter"] == {"count": 1, "notes": ["start", "during"], "runs": 0}
    assert ex.execute(call("bump")).value == {"count": 2}


def test_executor_survives_repeated_timeouts(ex):
    for _ in range(3):
        with pytest.raises(ToolHung):
            ex.execute(call("spin"))
    assert ex.execute(call("bump", {"by": 9})).value == {"count": 10}


@pytest.mark.parametrize("tool", ["give_set", "give_object"])
def test_non_json_return_is_an_error_and_rolls_back(ex, tool):
    before = ex.state()
    res = ex.execute(call(tool))
    assert not res.ok
    assert "non-JSON" in res.error and tool in res.error
    assert ex.state() == before


def test_error_dict_is_not_ok_with_its_error_text_and_rolls_back(ex):
    before = ex.state()
    res = ex.execute(call("refuse", {"reason": "closed"}))
    assert not res.ok
    assert res.error == "refused: closed"
    assert res.value == {"error": "refused: closed", "code": 7}
    assert ex.state() == before
    # the failed call is not part of the replay log: a later restore does not re-run it
    ex.execute(call("bump"))
    snap, at_snap = ex.snapshot(), ex.state()
    ex.restore(snap)
    assert ex.state() == at_snap == {"Counter": {"count": 2, "notes": ["start"], "runs": 0}}


def test_trusted_error_results_skip_the_rollback():
    ex = PythonObjectExecutor([Counter], timeout=TIMEOUT, trust_error_results=True)
    ex.reset({"count": 1})
    res = ex.execute(call("refuse", {"reason": "closed"}))
    assert not res.ok and res.error == "refused: closed"
    assert ex.state()["Counter"]["count"] == 1001  # trusted: the class's own change is kept, no replay
    # a raising tool is still rolled back when error results are trusted
    ex.execute(call("explode", {"text": "t"}))
    assert ex.state()["Counter"]["count"] == 1001
    ex.close()


@pytest.mark.parametrize("name", ["nope", "_load_scenario", "__init__", "count"])
def test_unknown_or_private_tool_is_rejected(ex, name):
    before = ex.state()
    res = ex.execute(call(name))
    assert not res.ok and "unknown tool" in res.error and name in res.error
    assert ex.state() == before


@pytest.mark.parametrize("args, fragment", [
    ({"a": 1}, "'b'"),  # missing required
    ({"a": 1, "b": "x", "c": 3}, "'c'"),  # unexpected kwarg
    ({}, "'a'"),
])
def test_bad_arguments_are_rejected_without_running(ex, args, fragment):
    res = ex.execute(call("need_two", args))
    assert not res.ok
    assert "bad arguments" in res.error and fragment in res.error
    assert ex.state()["Counter"]["runs"] == 0
    assert ex.execute(call("need_two", {"a": 1, "b": "x"})).ok
    assert ex.state()["Counter"]["runs"] == 1


def test_snapshot_restore_returns_to_exact_state(ex):
    ex.execute(call("bump", {"by": 2}))
    ex.execute(call("note", {"text": "a"}))
    snap = ex.snapshot()
    at_snap = ex.state()
    ex.execute(call("bump", {"by": 10}))
    ex.execute(call("note", {"text": "b"}))
    assert ex.state() != at_snap
    ex.restore(snap)
    assert ex.state() == at_snap
    # continuing after a restore builds on the snapshot, and the snapshot can be reused
    ex.execute(call("note", {"text": "c"}))
    assert ex.state()["Counter"]["notes"] == ["start", "a", "c"]
    ex.restore(snap)
    assert ex.state() == at_snap


def test_restore_after_reset_to_other_config(ex):
    ex.execute(call("bump", {"by": 2}))
    snap, at_snap = ex.snapshot(), ex.state()
    ex.reset({"count": 50, "notes": []})
    assert ex.state()["Counter"]["count"] == 50
    ex.restore(snap)
    assert ex.state() == at_snap


def test_reset_does_not_alias_c0():
    c0 = {"count": 1, "notes": ["start"]}
    ex = make(c0)
    ex.execute(call("note", {"text": "x"}))
    assert c0 == {"count": 1, "notes": ["start"]}
    ex.close()


def _committed(ex, calls):
    out = []
    for tc in calls:
        res = ex.execute(tc)
        out.append(tc.model_copy(update={"result": res.value, "ok": res.ok, "error": res.error}))
    return out


def test_replay_rebuilds_live_state(ex):
    c0 = {"count": 1, "notes": ["start"]}
    committed = _committed(ex, [call("bump", {"by": 3}), call("note", {"text": "n1"}), call("bump", {"by": -1}),
                                call("note", {"text": "n2"})])
    fresh = PythonObjectExecutor([Counter], timeout=TIMEOUT)
    assert replay(fresh, c0, committed) is fresh
    assert fresh.state() == ex.state()
    fresh.close()


def test_replay_detects_altered_result(ex):
    c0 = {"count": 1, "notes": ["start"]}
    committed = _committed(ex, [call("bump", {"by": 3}), call("note", {"text": "n1"})])
    altered = [committed[0].model_copy(update={"result": {"count": 999}}), committed[1]]
    fresh = PythonObjectExecutor([Counter], timeout=TIMEOUT)
    with pytest.raises(ReplayMismatch):
        replay(fresh, c0, altered)
    # an altered ok flag is a mismatch too
    with pytest.raises(ReplayMismatch):
        replay(fresh, c0, [committed[0].model_copy(update={"ok": False, "error": "x"})])
    # and check=False tolerates it
    replay(fresh, c0, altered, check=False)
    assert fresh.state() == ex.state()
    fresh.close()


class Alpha:
    def __init__(self):
        self.items = []

    def _load_scenario(self, config):
        self.items = list(config["items"])

    def add_item(self, item: str):
        """Add an item."""
        self.items.append(item)
        return {"items": list(self.items)}


class Beta:
    def __init__(self):
        self.level = 0
        self.loaded = False

    def _load_scenario(self, config):
        self.level = config.get("level", 0)
        self.loaded = True

    def _state(self):
        return {"level": self.level}

    def raise_level(self):
        """Raise the level."""
        self.level += 1
        return {"level": self.level}


def test_multiple_classes_route_c0_by_class_name_and_calls_by_method():
    ex = PythonObjectExecutor([Alpha, Beta], timeout=TIMEOUT)
    ex.reset({"Alpha": {"items": ["a"]}, "Beta": {"level": 4}})
    assert ex.state() == {"Alpha": {"items": ["a"]}, "Beta": {"level": 4}}
    assert ex.execute(call("add_item", {"item": "b"})).value == {"items": ["a", "b"]}
    assert ex.execute(call("raise_level")).value == {"level": 5}
    assert ex.state() == {"Alpha": {"items": ["a", "b"]}, "Beta": {"level": 5}}
    # a class missing from c0 is loaded with an empty configuration
    ex.reset({"Alpha": {"items": []}})
    assert ex.state() == {"Alpha": {"items": []}, "Beta": {"level": 0}}
    assert ex.instances["Beta"].loaded
    ex.close()


def test_a_call_stuck_in_a_blocking_wait_is_abandoned_on_a_daemon_thread(ex):
    """A tool blocked where no interrupt reaches it (a lock wait) leaves its thread behind, and that thread never
    keeps the process from exiting."""
    stuck = threading.Event()

    class Stuck(Counter):
        def wait_forever(self):
            """Block on an event nobody sets."""
            SPIN_THREADS.append(threading.current_thread())
            stuck.wait()

    executor = PythonObjectExecutor([Stuck], timeout=TIMEOUT)
    executor.reset({"count": 2})
    with pytest.raises(ToolHung, match="wait_forever"):
        executor.execute(call("wait_forever"))
    assert SPIN_THREADS[0].is_alive() and SPIN_THREADS[0].daemon
    assert executor.execute(call("bump")).value == {"count": 3}  # a fresh thread serves the next call
    stuck.set()


def test_state_is_a_copy_and_its_hash_follows_every_change(ex):
    state = ex.state()
    state["Counter"]["notes"].append("tampered")
    assert ex.state()["Counter"]["notes"] == ["start"]
    first = ex.state_hash()
    assert first == hashlib.sha256(json.dumps(ex.state(), sort_keys=True).encode()).hexdigest()
    ex.execute(call("note", {"text": "x"}))
    assert ex.state_hash() != first  # a call is a new state: the kept hash is not reused
    ex.reset({"count": 1, "notes": ["start"]})
    assert ex.state_hash() == first
