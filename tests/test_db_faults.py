"""Database faults (issue 26): a SQLite lock held by another connection makes a run wait, not crash; a database
written by another program is refused in one line naming it; busy and dropped connections count as transient."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time

import pytest
from sqlalchemy.exc import OperationalError

from sap.cli.main import main
from sap.store.runs import is_transient_db_error


def test_a_sqlite_lock_held_12_seconds_makes_the_run_wait_and_complete(tmp_path):
    db = tmp_path / "r.db"
    run = subprocess.Popen([sys.executable, "-m", "sap.cli", "synthesize", "--toolset", "store", "-n", "6", "-o",
                            "o.jsonl", "--db", f"sqlite:///{db}"], cwd=tmp_path, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env={**os.environ})
    while run.poll() is None:  # wait for the first accepted slot, then lock the database mid-run
        try:
            with sqlite3.connect(db, timeout=0.1) as probe:
                if probe.execute("SELECT count(*) FROM sap_records").fetchone()[0]:
                    break
        except sqlite3.OperationalError:
            pass
        time.sleep(0.05)
    holder = sqlite3.connect(db, timeout=30, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    time.sleep(12)
    holder.execute("COMMIT")
    holder.close()
    out, err = run.communicate(timeout=600)
    assert run.returncode == 0 and "Traceback" not in err, err
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 6


def test_a_database_of_another_program_is_refused_in_one_line(tmp_path, capsys):
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    assert main(["synthesize", "--toolset", "store", "-n", "1", "-o", str(tmp_path / "o.jsonl"),
                 "--db", f"sqlite:///{db}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a sap run database" in err and "users" in err
    with sqlite3.connect(db) as conn:  # nothing of sap's was added to it
        assert [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["users"]


def test_busy_locked_and_dropped_connections_are_transient_and_other_errors_are_not():
    locked = OperationalError("INSERT", {}, sqlite3.OperationalError("database is locked"))
    dropped = OperationalError("SELECT", {}, Exception("terminating connection due to administrator command"))
    syntax = OperationalError("SELECT", {}, sqlite3.OperationalError("near \"SELEC\": syntax error"))
    assert is_transient_db_error(locked) and is_transient_db_error(dropped)
    assert not is_transient_db_error(syntax) and not is_transient_db_error(ValueError("locked"))


def test_psycopg_subclasses_of_a_dropped_connection_are_transient_and_a_bad_query_is_not():
    psycopg = pytest.importorskip("psycopg")
    from psycopg_pool import PoolTimeout

    assert is_transient_db_error(psycopg.errors.AdminShutdown("terminating connection due to administrator command"))
    assert is_transient_db_error(psycopg.OperationalError("consuming input failed: server closed the connection"))
    assert is_transient_db_error(PoolTimeout("couldn't get a connection after 30.00 sec"))
    assert not is_transient_db_error(psycopg.errors.UndefinedTable('relation "checkpoints" does not exist'))



def test_a_killed_but_unreaped_lease_holder_no_longer_holds_the_run(tmp_path):
    import socket

    from sap.store.runs import RunConflict, RunStore

    store = RunStore(f"sqlite:///{tmp_path / 'r.db'}")
    run_id = store.create_run("store", {}, 0, 1, "f", {}, {})
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    while open(f"/proc/{child.pid}/stat").read().rpartition(")")[2].split()[0] != "Z":  # exited, not reaped
        time.sleep(0.01)
    try:
        store.acquire(run_id, f"{socket.gethostname()}:{child.pid}#1", 60)
        store.acquire(run_id, f"{socket.gethostname()}:{os.getpid()}#1", 60)  # at once, not after the lease
        live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            store.release(run_id, f"{socket.gethostname()}:{os.getpid()}#1")
            store.acquire(run_id, f"{socket.gethostname()}:{live.pid}#1", 60)
            with pytest.raises(RunConflict):  # a live holder keeps it
                store.acquire(run_id, f"{socket.gethostname()}:{os.getpid()}#1", 60)
        finally:
            live.kill()
            live.wait()
    finally:
        child.wait()
