"""Durable runs on a real SQLite file: kill -9 at random moments, resume, and get the uninterrupted bytes."""
from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sap.cli import main

N = 60
GATED = Path(__file__).with_name("gated_store_domain.py")


def _cmd(db: Path, out: Path, seed: int = 5, toolset: str = "store") -> list[str]:
    return [sys.executable, "-m", "sap.cli", "synthesize", "--toolset", toolset, "-n", str(N), "-o", str(out),
            "--seed", str(seed), "--db", f"sqlite:///{db}"]


def _slots(db: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(db) as conn:
        try:
            return conn.execute('SELECT "index", status FROM sap_slots ORDER BY "index"').fetchall()
        except sqlite3.OperationalError:  # the process was killed (or is still) before creating the tables
            return []


def test_kill_nine_and_resume_gives_the_uninterrupted_export(tmp_path):
    reference = tmp_path / "reference.jsonl"
    subprocess.run(_cmd(tmp_path / "ref.db", reference), check=True, capture_output=True, timeout=300)

    db, out = tmp_path / "killed.db", tmp_path / "killed.jsonl"
    rng = random.Random(11)
    kills = 0
    progress = []
    finished = None
    while kills < 12:
        proc = subprocess.Popen(_cmd(db, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(0.5, 1.8))
        if proc.poll() is not None:  # it finished before this kill
            finished = proc
            break
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
        if db.exists():
            progress.append(sum(status == "accepted" for _, status in _slots(db)))
    if finished is None:  # the same command again resumes the unfinished run
        finished = subprocess.Popen(_cmd(db, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = finished.communicate(timeout=300)
    assert finished.returncode == 0, err
    assert kills >= 10
    assert progress == sorted(progress)  # accepted slots never go back
    assert out.read_bytes() == reference.read_bytes()
    slots = _slots(db)
    with sqlite3.connect(db) as conn:
        runs = conn.execute("SELECT id, status FROM sap_runs").fetchall()
    assert len(runs) == 1, runs
    assert [i for i, _ in slots] == list(range(len(slots)))  # no slot twice, none skipped
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert len(ids) == N == len(set(ids))


def test_changed_settings_are_refused_naming_the_change(tmp_path, capsys):
    db = f"sqlite:///{tmp_path / 's.db'}"
    out = str(tmp_path / "o.jsonl")
    # an unfinished run: created, then interrupted before any slot (simulated by a zero-slot budget run)
    from sap.runs.driver import run_config, start_run
    from sap.store import RunStore
    from sap.toolsets import load_toolset

    store = RunStore(db)
    start_run(store, load_toolset("store"), run_config(4, 1, None, {"min_turns": 3, "max_turns": 8,
                                                                    "emphasis_size": 3, "user_style": "goal"}))
    code = main(["synthesize", "--toolset", "store", "-n", "5", "-o", out, "--seed", "1", "--db", db])
    err = capsys.readouterr().err
    assert code == 2
    assert "target: 4 -> 5" in err and "--new-run" in err
    code = main(["synthesize", "--toolset", "store", "-n", "4", "-o", out, "--seed", "1", "--db", db])
    assert code == 0
    assert "continuing run" in capsys.readouterr().out


def test_runs_json_and_export(tmp_path, capsys):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    out = tmp_path / "o.jsonl"
    assert main(["synthesize", "--toolset", "filesystem", "-n", "3", "-o", str(out), "--db", db]) == 0
    capsys.readouterr()
    assert main(["runs", "--json", "--db", db]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert {k: row[k] for k in ("status", "accepted", "target")} == {"status": "complete", "accepted": 3, "target": 3}
    exported = tmp_path / "e.jsonl"
    assert main(["export", row["id"], "-o", str(exported), "--db", db]) == 0
    assert exported.read_bytes() == out.read_bytes()


@pytest.mark.parametrize("content", [b"this is not a database at all" * 100, b""])
def test_a_foreign_or_unknown_database_is_a_clear_error(tmp_path, capsys, content):
    path = tmp_path / "foreign.db"
    path.write_bytes(content)
    if not content:
        code = main(["export", "run-nope", "-o", str(tmp_path / "x.jsonl"), "--db", f"sqlite:///{path}"])
        assert code == 2 and "no run 'run-nope'" in capsys.readouterr().err
        return
    code = main(["runs", "--db", f"sqlite:///{path}"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot use this database" in err and str(path) in err
    assert path.read_bytes() == content  # nothing written over it


def test_ctrl_c_stops_cleanly_and_says_how_to_resume(tmp_path):
    """The signal comes while the run provably has work left: after its first accepted record the gated store's
    next scenario load waits at a gate the test holds closed."""
    db, out, gate = tmp_path / "c.db", tmp_path / "c.jsonl", tmp_path / "gate"
    gate.touch()
    env = {**os.environ, "SAP_TEST_GATE": str(gate), "SAP_TEST_GATE_DB": str(db)}
    proc = subprocess.Popen(_cmd(db, out, toolset=str(GATED)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    deadline = time.time() + 300
    while not Path(f"{gate}.waiting").exists():
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    gate.unlink()
    assert proc.returncode == 130, err
    assert "sap resume run-" in err
    accepted = sum(s == "accepted" for _, s in _slots(db))
    assert 0 < accepted < N
    command = err.split("Continue with: ")[1].split(" (")[0].split()  # names the domain module: runs store names
    assert command[:2] == ["sap", "resume"] and command[command.index("--toolset") + 1] == str(GATED)
    assert main([*command[1:], "-o", str(tmp_path / "r.jsonl")]) == 0
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == N


def test_an_interrupted_run_resumes_in_the_same_process(tmp_path, monkeypatch):
    """Ctrl-C in a notebook puts the slot in flight back to pending (its checkpoint kept): the same command in the
    same process continues it and ends with the uninterrupted bytes."""
    import sap.graphs.synthesis as synthesis

    def cmd(name: str) -> list[str]:
        return ["synthesize", "--toolset", "store", "-n", "6", "-o", str(tmp_path / f"{name}.jsonl"), "--seed", "2",
                "--db", f"sqlite:///{tmp_path / name}.db"]

    assert main(cmd("whole")) == 0
    real = synthesis.policy_check  # the code check (and a toolset policy's rules) of every trajectory
    seen = {"n": 0}

    def interrupted(traj, *args, **kw):
        seen["n"] += 1
        if seen["n"] == 4:  # mid-run, inside a slot's graph
            raise KeyboardInterrupt
        return real(traj, *args, **kw)

    monkeypatch.setattr(synthesis, "policy_check", interrupted)
    assert main(cmd("cut")) == 130
    statuses = {status for _, status in _slots(tmp_path / "cut.db")}
    assert "pending" in statuses and "running" not in statuses
    assert main(cmd("cut")) == 0  # the same command, the same process
    assert (tmp_path / "cut.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
