"""Resuming a run database written by an older sap: tests/data/interrupted_run.sqlite.gz was written on 2026-12-07 by
the tree of the commit after 90a4f22 (a result a later turn points at still gives its answer; its store records
are that commit's; sap 0.2.0; regenerated whenever the records change on purpose; the first fixture, of 0d10259, and
those of c5755ed, 050da20, 6df64f7, 4c3f6ef, e602c79, 87e8c70 and 95ab40f predate it), so a later change that breaks
resuming old checkpoints fails here.

The fixture holds two `sap synthesize --toolset store -n 12` runs (seeds 11 and 12; exact arguments in
tests/data/interrupted_run.json), each SIGKILLed once 3 records were accepted and while the next slot's LangGraph
thread was mid-graph: that slot is still `running` in sap_slots, its thread has checkpoints in LangGraph's
`checkpoints` table and has not reached `persist` (no write to the `record` channel). The two runs were stopped in
the two states a kill can leave a thread in (`stopped_in` in the JSON file):
  - node_running: killed inside a node; the last checkpoint has no saved writes, so resuming runs its next node;
  - node_writes_saved: killed after a node's writes were saved but before the next checkpoint; resuming applies
    those writes without running the node again.
After each kill the WAL was folded into the file; at the end the file was VACUUMed. Nothing else was changed.

For each run the test resumes a copy with `sap resume RUN --db sqlite:///COPY -o OUT` and requires
  - the output (records and OUT.rejections.jsonl) to equal, sha256 per line, what an uninterrupted run with the
    same arguments wrote at that commit (resume at --concurrency 1 gives the uninterrupted bytes, by design);
  - the run to be complete, and none of its checkpoints left: each finished slot deletes its thread, so a leftover
    thread means the resumed slot did not run under the old thread id (an orphaned checkpoint).
Limit: a slot restarted from scratch writes the same bytes as one continued from its checkpoint (both follow from
the run seed), so the digests alone cannot tell the two apart; an unreadable checkpoint fails the resume, and a
checkpoint the new code ignores is caught by the leftover check. The checkpoint blobs name no sap module (the graph
state is plain JSON); what an old checkpoint does depend on is the graph's node names and edges, the thread id
`RUN:INDEX`, the run tables, and the run fingerprint (config, tool docs hash, sap version).

Regenerating (SAP_REGEN_CHECKPOINT=1 python -m pytest tests/test_checkpoint_compat.py) replaces the old-layout
fixture with one written by the current code, which throws away what this test is for: do it only when the records
are meant to change, and update the commit named above (the JSON file records it). The generator kills real runs
(polling their database from this process every millisecond or so) until it has one of each state, and keeps the
fixture only if resuming two copies of it gives, for each run, the bytes of two uninterrupted runs.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import sqlite3
import tempfile
import time
from pathlib import Path

import pytest

from cli_fixtures import DATA, assert_same_digests, fill, git_head, output_digests, sap, sap_popen, write_json

FIXTURE = DATA / "interrupted_run.sqlite.gz"
SPEC = DATA / "interrupted_run.json"
TARGET = 12
SEEDS = {"node_running": 11, "node_writes_saved": 12}
RESUME = ["resume", "{run}", "--db", "sqlite:///{db}", "-o", "{output}"]
KILL_AFTER_ACCEPTED = 3
KILL_AT_CHECKPOINTS = 6  # checkpoints of the running slot's thread: input, load_fsm, sample_path, some turns


def synthesize_args(seed: int) -> list[str]:
    return ["synthesize", "--toolset", "store", "-n", str(TARGET), "--seed", str(seed),
            "--mix", "base=0.6,miss_param=0.2,miss_func=0.2", "--new-run", "--db", "sqlite:///{db}", "-o", "{output}"]


def _query(db: Path, sql: str, *params: object) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def run_state(db: Path, run_id: str) -> dict:
    """What a killed run left: its status, its slots by status, and each of its threads that has checkpoints:
    how many, the last one's step, whether writes were saved after it, whether the thread reached `persist`."""
    (status,), = _query(db, "SELECT status FROM sap_runs WHERE id = ?", run_id)
    slots = dict(_query(db, 'SELECT thread_id, status FROM sap_slots WHERE run_id = ? ORDER BY "index"', run_id))
    threads = {}
    for thread, count in _query(db, "SELECT thread_id, count(*) FROM checkpoints WHERE thread_id LIKE ? "
                                    "GROUP BY thread_id", f"{run_id}:%"):
        (last, meta), = _query(db, "SELECT checkpoint_id, metadata FROM checkpoints WHERE thread_id = ? "
                                   "ORDER BY checkpoint_id DESC LIMIT 1", thread)
        (after,), = _query(db, "SELECT count(*) FROM writes WHERE thread_id = ? AND checkpoint_id = ?", thread, last)
        (persisted,), = _query(db, "SELECT count(*) FROM writes WHERE thread_id = ? AND channel = 'record'", thread)
        threads[thread] = {"checkpoints": count, "last_step": json.loads(meta)["step"],
                           "writes_after_last_checkpoint": after, "reached_persist": bool(persisted),
                           "slot_status": slots.get(thread)}
    statuses: dict[str, int] = {}
    for slot_status in slots.values():
        statuses[slot_status] = statuses.get(slot_status, 0) + 1
    return {"status": status, "slots": statuses, "threads": threads}


def stopped_in(state: dict) -> str | None:
    """node_running / node_writes_saved for a run killed as the fixture needs (see the module docstring)."""
    if state["status"] != "running" or state["slots"].get("accepted", 0) < KILL_AFTER_ACCEPTED:
        return None
    unfinished = [v for v in state["threads"].values()
                  if v["slot_status"] == "running" and not v["reached_persist"] and v["checkpoints"] > 1]
    if len(unfinished) != 1:
        return None
    return "node_writes_saved" if unfinished[0]["writes_after_last_checkpoint"] else "node_running"


def _resume(db: Path, run_id: str, where: Path) -> dict:
    output = where / f"{run_id}.jsonl"
    sap(*fill(RESUME, run=run_id, db=str(db), output=str(output)), cwd=where)
    return output_digests(output)


def _poll(db: Path, before: set[str]) -> tuple[str | None, str | None]:
    """(the new run's id, the state its running slot's thread is in right now if the run is ready to be killed)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.05)
    try:
        run_id = next((r for (r,) in conn.execute("SELECT id FROM sap_runs") if r not in before), None)
        (accepted,), = conn.execute("SELECT count(*) FROM sap_slots WHERE run_id = ? AND status = 'accepted'",
                                    (run_id,)).fetchall()
        rows = conn.execute("SELECT c.thread_id, count(*), max(c.checkpoint_id) FROM checkpoints c JOIN sap_slots s "
                            "ON s.thread_id = c.thread_id WHERE s.run_id = ? AND s.status = 'running' "
                            "GROUP BY c.thread_id", (run_id,)).fetchall()
        if accepted < KILL_AFTER_ACCEPTED or len(rows) != 1 or rows[0][1] < KILL_AT_CHECKPOINTS:
            return run_id, None
        (after,), = conn.execute("SELECT count(*) FROM writes WHERE thread_id = ? AND checkpoint_id = ?",
                                 rows[0][::2]).fetchall()
        return run_id, "node_writes_saved" if after else "node_running"
    finally:
        conn.close()


def _kill_mid_slot(args: list[str], db: Path, where: Path, want: str) -> str | None:
    """Start a new run in `db` and SIGKILL it once KILL_AFTER_ACCEPTED records are accepted and its running slot's
    thread has KILL_AT_CHECKPOINTS checkpoints and is seen in state `want`; fold the WAL in. The run id, or None if
    the run ended first. (The kill lands a moment after the look: the caller checks the state it left.)"""
    before = {r for (r,) in _query(db, "SELECT id FROM sap_runs")} if db.exists() else set()
    proc = sap_popen(*fill(args, db=str(db), output=str(where / "killed.jsonl")), cwd=where)
    run_id = None
    try:
        while proc.poll() is None:
            try:
                run_id, state = _poll(db, before)
            except sqlite3.OperationalError:  # no tables yet, or busy
                state = None
            if state == want:
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.001)
    finally:
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    conn = sqlite3.connect(db)  # fold the WAL in; the rows stay as the killed process left them
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    return run_id if proc.returncode == -signal.SIGKILL else None


def _regenerate() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        expected = {}
        for name, seed in SEEDS.items():
            outputs = []
            for i in (1, 2):
                where = tmp / f"ref-{name}-{i}"
                where.mkdir()
                sap(*fill(synthesize_args(seed), db=str(where / "run.db"), output=str(where / "out.jsonl")),
                    cwd=where)
                outputs.append(output_digests(where / "out.jsonl"))
            assert outputs[0] == outputs[1], f"two uninterrupted runs of seed {seed} wrote different files"
            expected[name] = outputs[0]
        db, kept = tmp / "fixture.db", tmp / "kept.db"
        runs = []
        for name, seed in SEEDS.items():
            for attempt in range(30):
                where = tmp / f"kill-{name}-{attempt}"
                where.mkdir()
                run_id = _kill_mid_slot(synthesize_args(seed), db, where, name)
                if run_id is not None and stopped_in(state := run_state(db, run_id)) == name:
                    shutil.copy(db, kept)
                    runs.append({"stopped_in": name, "run_id": run_id, "synthesize_args": synthesize_args(seed),
                                 "at_kill": state, "expected": expected[name]})
                    break
                if kept.exists():  # back to the runs kept so far
                    shutil.copy(kept, db)
                else:
                    db.unlink()
            else:
                raise AssertionError(f"no kill stopped a run in state {name} in 30 attempts")
        conn = sqlite3.connect(db)
        conn.execute("VACUUM")
        conn.close()
        for run in runs:
            assert run_state(db, run["run_id"]) == run["at_kill"]
            for i in (1, 2):
                copy = tmp / f"check-{run['stopped_in']}-{i}"
                copy.mkdir()
                shutil.copy(db, copy / "run.db")
                assert _resume(copy / "run.db", run["run_id"], copy) == run["expected"], \
                    f"resuming {run['run_id']} ({run['stopped_in']}) did not give the uninterrupted bytes"
        FIXTURE.write_bytes(gzip.compress(db.read_bytes(), compresslevel=9, mtime=0))
        write_json(SPEC, {"about": "interrupted_run.sqlite.gz: these runs, SIGKILLed mid-slot (state at_kill); "
                                   "`expected` is each uninterrupted run's output, which resuming it must give "
                                   "(tests/test_checkpoint_compat.py)",
                          "written_by": git_head(), "resume_args": RESUME,
                          "placeholders": {"{db}": "the fixture's copy, or a new SQLite file for an uninterrupted "
                                                   "run", "{output}": "the JSONL file to write", "{run}": "run_id"},
                          "runs": runs})


if os.environ.get("SAP_REGEN_CHECKPOINT") == "1":
    _regenerate()


def _runs() -> list[dict]:
    return json.loads(SPEC.read_text())["runs"]


@pytest.mark.parametrize("run", _runs(), ids=lambda r: r["stopped_in"])
def test_resuming_an_old_interrupted_run_gives_the_uninterrupted_records(run, tmp_path):
    db = tmp_path / "run.db"
    db.write_bytes(gzip.decompress(FIXTURE.read_bytes()))
    state = run_state(db, run["run_id"])
    assert state == run["at_kill"]  # the fixture is the one the digests were recorded for
    assert stopped_in(state) == run["stopped_in"]

    resumed = _resume(db, run["run_id"], tmp_path)
    assert_same_digests(resumed, run["expected"], f"sap resume {run['run_id']} of {FIXTURE.name}")

    listed = {r["id"]: r for r in json.loads(sap("runs", "--json", "--db", f"sqlite:///{db}", cwd=tmp_path).stdout)}
    assert (listed[run["run_id"]]["status"], listed[run["run_id"]]["accepted"]) == ("complete", TARGET)
    assert len(listed) == len(_runs())  # the other run is left as it was
    left = _query(db, "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id LIKE ?", f"{run['run_id']}:%")
    assert left == [], f"checkpoints left after the run completed (orphaned threads?): {left}"
