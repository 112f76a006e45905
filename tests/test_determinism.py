"""Same seed, same bytes however a run is executed: `--concurrency 8`, four `sap worker` processes on PostgreSQL,
and three kill -9s then a resume (SQLite and PostgreSQL) each give the records of the one-process run of the same
seed, byte for byte, over 300 store and 100 travel records; `sap.api.synthesize` gives them too.

The one-process run of each toolset is made once per module and shared by every case. The PostgreSQL cases need
SAP_TEST_PG_URL (conftest.py's `pg_db` gives each a database of its own).

The default run uses 100 store records (past slot 64, the first block bound a new slot must wait for) and 20 travel
records, which keeps the suite's time down; SAP_DETERMINISM_FULL=1 runs the 300 / 100 of the issue.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sap.api import synthesize
from sap.runs.driver import run_config, start_run
from sap.store import RunStore
from sap.store.checkpoint import checkpointer_for
from sap.toolsets import load_toolset

SEED = 11
CONTEXT = {"min_turns": 3, "max_turns": 8, "emphasis_size": 3, "user_style": "goal"}  # `sap synthesize`'s defaults
TIMEOUT = 900


def _synthesize(toolset: str, n: int, out: Path, db: str, *extra: str) -> list[str]:
    """The `sap synthesize` command line of one case."""
    return [sys.executable, "-m", "sap.cli", "synthesize", "--toolset", toolset, "-n", str(n), "--seed", str(SEED),
            "-o", str(out), "--db", db, *extra]


def _lines(records: list[dict]) -> list[str]:
    """Records as `sap synthesize -o` writes them."""
    return [json.dumps(r, ensure_ascii=False) for r in records]


SIZES = {"store": 300, "travel": 100} if os.environ.get("SAP_DETERMINISM_FULL") else {"store": 100, "travel": 20}


@pytest.fixture(scope="module", params=sorted(SIZES.items(), reverse=True), ids=sorted(SIZES, reverse=True))
def reference(request, tmp_path_factory) -> tuple[str, int, list[str]]:
    """(toolset, n, lines of the one-process run): `sap synthesize` at concurrency 1 on SQLite."""
    toolset, n = request.param
    tmp = tmp_path_factory.mktemp(f"reference-{toolset}")
    out = tmp / "one.jsonl"
    subprocess.run(_synthesize(toolset, n, out, f"sqlite:///{tmp / 'one.db'}"), check=True, capture_output=True,
                   timeout=TIMEOUT)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == n
    return toolset, n, lines


def test_the_api_gives_the_records_of_the_cli_run(reference):
    toolset, n, lines = reference
    assert _lines(synthesize(toolset, n, seed=SEED, **CONTEXT).records) == lines


def test_concurrency_8_gives_the_one_process_records(reference, tmp_path):
    toolset, n, lines = reference
    out = tmp_path / "c8.jsonl"
    subprocess.run(_synthesize(toolset, n, out, f"sqlite:///{tmp_path / 'c8.db'}", "--concurrency", "8"),
                   check=True, capture_output=True, timeout=TIMEOUT)
    assert out.read_text(encoding="utf-8").splitlines() == lines


def test_four_postgres_workers_give_the_one_process_records(reference, pg_db):
    toolset, n, lines = reference
    store = RunStore(pg_db)
    run_id = start_run(store, load_toolset(toolset), run_config(n, SEED, None, CONTEXT))
    with checkpointer_for(pg_db):  # the checkpoint tables exist before the workers start, as after `sap synthesize`
        pass
    workers = [subprocess.Popen([sys.executable, "-m", "sap.cli", "worker", run_id, "--db", pg_db],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outputs = [w.communicate(timeout=TIMEOUT) for w in workers]
    assert all(w.returncode == 0 for w in workers), [err for _, err in outputs]
    assert _lines(store.records(run_id)) == lines


def _kill_three_times_then_resume(toolset: str, n: int, out: Path, db: str, backend: str) -> None:
    """Start the run, kill -9 it once its accepted count passes each of three random points, then let a last start
    finish it."""
    cmd = _synthesize(toolset, n, out, db)
    points = sorted(random.Random(f"{toolset}:{backend}").sample(range(n // 10, n - n // 10), 3))
    store = RunStore(db)
    for point in points:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + TIMEOUT
        while proc.poll() is None and time.monotonic() < deadline:
            runs = store.runs()
            if runs and store.counts(runs[0].id).get("accepted", 0) >= point:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert len(store.runs()) == 1
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert len(store.runs()) == 1  # the last start resumed the killed run


def test_three_kills_then_a_resume_on_sqlite_give_the_one_process_records(reference, tmp_path):
    toolset, n, lines = reference
    out = tmp_path / "killed.jsonl"
    _kill_three_times_then_resume(toolset, n, out, f"sqlite:///{tmp_path / 'killed.db'}", "sqlite")
    assert out.read_text(encoding="utf-8").splitlines() == lines


def test_three_kills_then_a_resume_on_postgres_give_the_one_process_records(reference, pg_db, tmp_path):
    toolset, n, lines = reference
    out = tmp_path / "killed.jsonl"
    _kill_three_times_then_resume(toolset, n, out, pg_db, "postgresql")
    assert out.read_text(encoding="utf-8").splitlines() == lines
