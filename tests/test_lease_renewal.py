"""Slot leases renewed while a slot runs, on SQLite and on PostgreSQL (skipped without SAP_TEST_PG_URL): a slow
slot is not taken by another worker, a worker that loses its slot stores nothing, a killed worker's slot is taken."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from datetime import timedelta
from typing import Any, Iterator

import pytest
from sqlalchemy.exc import OperationalError

from sap.runs.driver import RunDriver, RunProgress, run_config, start_run
from sap.store import RunConflict, RunStore
from sap.store.checkpoint import checkpointer_for
from sap.store.runs import _now
from sap.store.schema import SlotRow
from sap.toolsets import load_toolset

LEASE = 0.6


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """A fresh run database: a SQLite file, or a database of its own on the PostgreSQL test server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'lease.db'}"
        return
    yield request.getfixturevalue("pg_db")


def _new_run(url: str, n: int) -> tuple[RunStore, str]:
    store = RunStore(url)
    run_id = start_run(store, load_toolset("store"),
                       run_config(n, 2, None, {"min_turns": 3, "max_turns": 8, "emphasis_size": 3}))
    with checkpointer_for(url):  # the checkpoint tables exist before workers start
        pass
    return store, run_id


def _slot(store: RunStore, run_id: str, index: int) -> SlotRow:
    with store.session() as s:
        return s.get(SlotRow, (run_id, index))


def _driver(stack: ExitStack, url: str, run_id: str, worker: str) -> RunDriver:
    """A driver with a store and checkpointer of its own and a short lease."""
    saver = stack.enter_context(checkpointer_for(url))
    return RunDriver(RunStore(url), run_id, load_toolset("store"), saver, worker=worker, lease_seconds=LEASE)


def _in_thread(driver: RunDriver) -> tuple[threading.Thread, dict[str, Any]]:
    """Runs `driver` in a thread; the dict gets its progress (or its error)."""
    result: dict[str, Any] = {}

    def work() -> None:
        try:
            result["progress"] = driver.run()
        except Exception as exc:  # the test thread reports it
            result["error"] = exc

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread, result


def _attempts(store: RunStore, run_id: str) -> dict[int, int]:
    with store.session() as s:
        return {r.index: r.attempts for r in s.query(SlotRow).filter(SlotRow.run_id == run_id)}


def test_renew_extends_only_a_lease_the_worker_still_holds(db_url):
    store, run_id = _new_run(db_url, 3)
    store.acquire(run_id, "a:1", 1)
    index = store.next_slot(run_id, "a:1", lease_seconds=1)
    first = _slot(store, run_id, index).lease_expiry

    assert not store.renew(run_id, index, "b:2", 60)
    assert (_slot(store, run_id, index).lease_expiry, _slot(store, run_id, index).worker) == (first, "a:1")
    assert store.renew(run_id, index, "a:1", 60)
    assert _slot(store, run_id, index).lease_expiry > first + timedelta(seconds=30)
    if store.single_process:  # the run-level lease too
        assert store.run(run_id).lease_expiry > first + timedelta(seconds=30)

    with store.session.begin() as s:  # a's lease runs out and b claims the slot
        s.get(SlotRow, (run_id, index)).lease_expiry = _now() - timedelta(seconds=1)
    assert store.next_slot(run_id, "b:2", lease_seconds=60) == index
    b_lease = _slot(store, run_id, index).lease_expiry
    assert not store.renew(run_id, index, "a:1", 60)
    assert _slot(store, run_id, index).lease_expiry == b_lease

    assert not store.finish(run_id, index, "a:1", {"id": "stale", "provenance": []}, None, None)
    assert store.finish(run_id, index, "b:2", {"id": "fresh", "provenance": []}, None, None)
    assert not store.finish(run_id, index, "b:2", None, "again", None)  # a repeat stores nothing
    assert [r["id"] for r in store.records(run_id)] == ["fresh"] and store.rejections(run_id) == []


def test_a_slot_slower_than_its_lease_is_not_taken_by_another_worker(db_url):
    store, run_id = _new_run(db_url, 2)
    started = threading.Event()
    with ExitStack() as stack:
        a = _driver(stack, db_url, run_id, "a:1")
        real_outcome, real_put = a._outcome, a.checkpointer.put

        def slow_outcome(index: int) -> dict[str, Any]:
            if index == 0:
                started.set()
                time.sleep(4 * LEASE)  # a slow agent
            return real_outcome(index)

        def slow_put(config: dict, *rest: Any) -> Any:  # checkpoint writes interleave with the renewals
            if config["configurable"]["thread_id"].endswith(":0"):
                time.sleep(0.02)
            return real_put(config, *rest)

        a._outcome, a.checkpointer.put = slow_outcome, slow_put
        thread, result = _in_thread(a)
        assert started.wait(30)
        time.sleep(2 * LEASE)  # slot 0's first lease ran out long ago
        b = _driver(stack, db_url, run_id, "b:2")
        if store.single_process:
            with pytest.raises(RunConflict, match="being worked on by a:1"):
                b.run()
        else:
            assert b.run().status == "complete"
        thread.join(60)

    assert "error" not in result, result
    assert result["progress"].status == "complete"
    assert a.lost == [] and b.lost == []
    assert _attempts(store, run_id) == {0: 1, 1: 1}  # no slot was claimed twice
    assert [r["meta"]["index"] for r in store.records(run_id)] == [0, 1]


def test_a_worker_that_lost_its_slot_stores_nothing_of_it(db_url, monkeypatch):
    store, run_id = _new_run(db_url, 2)
    started, b_done, reachable = threading.Event(), threading.Event(), threading.Event()
    with ExitStack() as stack:
        a = _driver(stack, db_url, run_id, "a:1")
        real_outcome, real_renew = a._outcome, a.store.renew

        def cut_off(*args: Any) -> bool:  # a cannot reach the database, so its lease runs out
            if not reachable.is_set():
                raise OperationalError("UPDATE sap_slots", {}, ConnectionError("server closed the connection"))
            return real_renew(*args)

        def outcome_after_b(index: int) -> dict[str, Any]:
            if index != 0:
                return real_outcome(index)
            started.set()
            assert b_done.wait(60)
            reachable.set()
            time.sleep(LEASE)  # a renewal finds the slot gone
            out = real_outcome(index)
            return {**out, "record": out["record"] and {**out["record"], "id": "stale"}}

        finished: list[int] = []
        real_finish = a.store.finish

        def finish(run: str, index: int, *rest: Any) -> bool:
            finished.append(index)
            return real_finish(run, index, *rest)

        monkeypatch.setattr(a.store, "renew", cut_off)
        monkeypatch.setattr(a.store, "finish", finish)
        a._outcome = outcome_after_b
        thread, result = _in_thread(a)
        assert started.wait(30)
        time.sleep(2 * LEASE)
        b = _driver(stack, db_url, run_id, "b:2")
        progress: RunProgress = b.run()
        b_done.set()
        thread.join(60)

    assert progress.status == "complete" and result["progress"].status == "complete", result
    assert a.lost == [0] and b.lost == []
    assert 0 not in finished  # its renewal found the slot gone: a did not even try to store it
    assert _attempts(store, run_id)[0] == 2
    records = store.records(run_id)
    assert [r["meta"]["index"] for r in records] == [0, 1]
    assert "stale" not in {r["id"] for r in records}


KILLED_WORKER = """
import sys, time
from sap.store import RunStore
from sap.store.checkpoint import checkpointer_for
from sap.runs.driver import RunDriver
from sap.toolsets import load_toolset

url, run_id, lease = sys.argv[1], sys.argv[2], float(sys.argv[3])
with checkpointer_for(url) as saver:
    driver = RunDriver(RunStore(url), run_id, load_toolset("store"), saver, worker="elsewhere:1", lease_seconds=lease)
    def hang(index):
        print("running", index, flush=True)
        time.sleep(600)
    driver._outcome = hang
    driver.run()
"""


def test_a_killed_workers_renewed_slot_is_claimed_again_after_its_lease(db_url):
    store, run_id = _new_run(db_url, 2)
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WORKER, db_url, run_id, str(LEASE)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "running 0\n", proc.stderr.read()
        time.sleep(3 * LEASE)
        assert _slot(store, run_id, 0).lease_expiry > _now()  # renewed past its first lease
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    time.sleep(LEASE + 0.2)
    with ExitStack() as stack:
        b = _driver(stack, db_url, run_id, "b:2")
        assert b.run().status == "complete"
    assert _attempts(store, run_id)[0] == 2
    assert [r["meta"]["index"] for r in store.records(run_id)] == [0, 1]
