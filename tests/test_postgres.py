"""Runs on a real PostgreSQL server: several workers on one run, re-claimed slots, kill-and-resume equality.

Needs SAP_TEST_PG_URL (e.g. postgresql://postgres@127.0.0.1:5432/test; .ci/run sets it). Each test works in
a database of its own, created and dropped by the `pg_db` fixture (conftest.py).
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest

PG_URL = os.environ.get("SAP_TEST_PG_URL")
pytestmark = pytest.mark.skipif(not PG_URL, reason="SAP_TEST_PG_URL is not set (no PostgreSQL server to test on)")


def _sap(*argv: str) -> list[str]:
    return [sys.executable, "-m", "sap.cli", *argv]


def _new_run(url: str, n: int, seed: int = 2) -> str:
    from sap.runs.driver import run_config, start_run
    from sap.store import RunStore
    from sap.store.checkpoint import checkpointer_for
    from sap.toolsets import load_toolset

    run_id = start_run(RunStore(url), load_toolset("store"),
                       run_config(n, seed, None, {"min_turns": 3, "max_turns": 8, "emphasis_size": 3}))
    with checkpointer_for(url):  # the checkpoint tables exist before workers start, as after `sap synthesize`
        pass
    return run_id


def test_four_workers_make_exactly_n_unique_records(pg_db, tmp_path):
    from sap.store import RunStore

    n = 24
    run_id = _new_run(pg_db, n)
    workers = [subprocess.Popen(_sap("worker", run_id, "--db", pg_db), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for _ in range(4)]
    outputs = [w.communicate(timeout=300) for w in workers]
    assert all(w.returncode == 0 for w in workers), [err for _, err in outputs]
    store = RunStore(pg_db)
    records = store.records(run_id)
    assert len(records) == n
    assert len({r["id"] for r in records}) == n
    assert store.counts(run_id).get("accepted") == n
    slots_done = [r["meta"]["index"] for r in records]
    assert len(set(slots_done)) == n


def test_a_dead_workers_slot_is_claimed_again_after_its_lease(pg_db):
    from sap.store import RunStore
    from sap.store.runs import _now
    from sap.store.schema import SlotRow

    run_id = _new_run(pg_db, 3)
    store = RunStore(pg_db)
    index = store.next_slot(run_id, "elsewhere:4242", lease_seconds=60)
    assert index == 0
    assert store.next_slot(run_id, "me:1", lease_seconds=60) == 1  # slot 0 is still leased
    with store.session.begin() as s:  # the worker on the other host went quiet: its lease runs out
        s.get(SlotRow, (run_id, 0)).lease_expiry = _now() - timedelta(seconds=1)
        s.get(SlotRow, (run_id, 1)).status = "pending"
    assert store.next_slot(run_id, "me:1", lease_seconds=0.5) == 0  # re-claimed (and let go of again soon)
    time.sleep(0.6)
    done = subprocess.run(_sap("worker", run_id, "--db", pg_db), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert [r["meta"]["index"] for r in store.records(run_id)] == [0, 1, 2]


def test_kill_and_resume_on_postgres_gives_the_uninterrupted_export(pg_db, tmp_path):
    n, seed = 40, 9
    reference = tmp_path / "reference.jsonl"
    ref_db = f"sqlite:///{tmp_path / 'ref.db'}"
    subprocess.run(_sap("synthesize", "--toolset", "store", "-n", str(n), "--seed", str(seed), "-o", str(reference),
                        "--db", ref_db), check=True, capture_output=True, timeout=300)
    out = tmp_path / "pg.jsonl"
    cmd = _sap("synthesize", "--toolset", "store", "-n", str(n), "--seed", str(seed), "-o", str(out), "--db", pg_db)
    rng, kills, finished = random.Random(3), 0, None
    while kills < 10:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(0.6, 2.0))
        if proc.poll() is not None:
            finished = proc
            break
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
    if finished is None:
        finished = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = finished.communicate(timeout=300)
    assert finished.returncode == 0, err
    assert kills >= 10
    assert out.read_bytes() == reference.read_bytes()
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == n


def test_a_server_that_is_down_is_a_clear_error(capsys):
    from sap.cli import main

    code = main(["runs", "--db", "postgresql://postgres@127.0.0.1:1/none"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot use this database" in err


def _terminate_backends(admin_url: str, database: str) -> int:
    """Drop every connection to `database` as a server restart would (pg_terminate_backend); how many."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                            "WHERE datname = %s AND pid <> pg_backend_pid()) AS t", (database,)).fetchone()[0]


def test_backends_killed_mid_run_change_nothing_in_the_records(pg_db, tmp_path):
    """Four workers whose every connection (run store and checkpointer) is dropped several times mid-run reconnect
    and finish, with the records of an undisturbed run."""
    from sap.store import RunStore

    n = 24
    reference_url = f"sqlite:///{tmp_path / 'reference.db'}"
    reference_id = _new_run(reference_url, n)
    subprocess.run(_sap("worker", reference_id, "--db", reference_url), check=True, capture_output=True, timeout=300)
    reference = RunStore(reference_url).records(reference_id)

    run_id = _new_run(pg_db, n)
    store = RunStore(pg_db)
    workers = [subprocess.Popen(_sap("worker", run_id, "--db", pg_db), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for _ in range(4)]
    rounds = []  # (records accepted before the round, connections dropped)
    for threshold in (n // 6, n // 3, n // 2):  # once the workers are well into the run
        while store.counts(run_id).get("accepted", 0) < threshold and any(w.poll() is None for w in workers):
            time.sleep(0.1)
        rounds.append((store.counts(run_id).get("accepted", 0), _terminate_backends(PG_URL, pg_db.rsplit("/", 1)[1])))
    outputs = [w.communicate(timeout=300) for w in workers]
    assert all(w.returncode == 0 for w in workers), [err for _, err in outputs]
    mid_run = [dropped for accepted, dropped in rounds if accepted < n and dropped >= 4]
    assert len(mid_run) == 3, rounds  # every worker's connections really were dropped while slots were worked on
    # no slot failed or was rejected because of the drops: the slots end as the undisturbed run's did
    assert store.counts(run_id) == RunStore(reference_url).counts(reference_id)
    assert json.dumps(store.records(run_id)) == json.dumps(reference)
