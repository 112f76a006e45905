"""Runs on a real local two-node Ray cluster (`ray start --head` plus `ray start --address` on this machine) against
a PostgreSQL run database: exactly N records, no duplicate ids, byte-identical to a single-process run with the same
seed; the same with one worker node's raylet killed (kill -9) a third of the way through.

Marked ray_e2e (extra `ray`; the cluster takes about 20 s to start on two cores): .ci/run runs it as a step of its own
(pytest -m ray_e2e). Needs SAP_TEST_PG_URL, as tests/test_postgres.py does.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

pytestmark = [pytest.mark.ray_e2e,
              pytest.mark.skipif(not os.environ.get("SAP_TEST_PG_URL"), reason="SAP_TEST_PG_URL is not set")]
ray = pytest.importorskip("ray")

# 300 records, as the issue asks: each Ray run took 68 s and 72 s on two cores, the module 3m50s with the reference
# run and the cluster's start-up (SAP_RAY_E2E_N sets a smaller size for a quick check)
N, SEED = int(os.environ.get("SAP_RAY_E2E_N", "300")), 5
RAY = str(Path(sys.executable).with_name("ray"))
# a cluster of this machine's loopback only: Ray's token authentication off (a token file left in ~/.ray by another
# Ray instance made the head ask the worker node for a token it did not send)
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}


def _sap(*argv: str) -> list[str]:
    return [sys.executable, "-m", "sap.cli", *argv]


def _pids_of(temp_dir: str) -> set[int]:
    """Processes whose command line names the cluster's temp dir: this test's Ray processes and nobody else's."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if temp_dir in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    pids.add(int(entry.name))
            except OSError:
                continue
    return pids


def _raylets(pids: set[int]) -> list[int]:
    """The raylets among `pids`."""
    found = []
    for pid in pids:
        try:
            if (Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]).endswith(b"raylet/raylet"):
                found.append(pid)
        except OSError:
            continue
    return found


def _kill(pids: set[int]) -> None:
    """SIGTERM, then SIGKILL for what is left after a few seconds."""
    for sig, pause in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 0.0)):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        time.sleep(pause)


def _ray_start(*argv: str) -> None:
    """`ray start ...`, failing with Ray's own message."""
    done = subprocess.run([RAY, "start", *argv, "--disable-usage-stats"], capture_output=True, text=True, env=ENV,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def head() -> Iterator[tuple[str, str]]:
    """A Ray head node with 4 logical CPUs in a temp dir of its own: (address, temp dir); every process of the
    cluster is stopped afterwards."""
    temp_dir = tempfile.mkdtemp(prefix="sapray")  # short: Ray's socket paths must fit in 107 bytes
    address = f"127.0.0.1:{_free_port()}"
    _ray_start("--head", f"--port={address.rsplit(':', 1)[1]}", "--num-cpus=4", f"--temp-dir={temp_dir}",
               "--include-dashboard=false")
    try:
        yield address, temp_dir
    finally:
        _kill(_pids_of(temp_dir))
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture
def worker_node(head) -> Iterator[set[int]]:
    """A second node (4 logical CPUs) joined to the head: the pids of its processes."""
    address, temp_dir = head
    before = _pids_of(temp_dir)
    _ray_start(f"--address={address}", "--num-cpus=4")
    mine = _pids_of(temp_dir) - before
    try:
        yield mine
    finally:
        _kill(_pids_of(temp_dir) & mine)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> bytes:
    """The records of a single-process run with the same seed."""
    out = tmp_path_factory.mktemp("reference") / "reference.jsonl"
    subprocess.run(_sap("synthesize", "--toolset", "store", "-n", str(N), "--seed", str(SEED), "-o", str(out),
                        "--db", f"sqlite:///{out.with_suffix('.db')}", "-q"), check=True, capture_output=True,
                   timeout=600)
    return out.read_bytes()


def _ray_run(address: str, db: str, out: Path) -> subprocess.Popen:
    """`sap synthesize --ray ADDRESS --actors 4`, short leases so a lost node's slots come back quickly."""
    return subprocess.Popen(_sap("synthesize", "--toolset", "store", "-n", str(N), "--seed", str(SEED), "-o", str(out),
                                 "--db", db, "--ray", address, "--actors", "4", "--lease-seconds", "5"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


def _check(out: Path, reference: bytes) -> None:
    """Exactly N records, no duplicate ids, the single-process run's bytes."""
    import json

    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == N
    assert out.read_bytes() == reference


def test_four_actors_on_two_nodes_give_the_single_process_records(head, worker_node, pg_db, reference, tmp_path):
    out = tmp_path / "ray.jsonl"
    started = time.monotonic()
    proc = _ray_run(head[0], pg_db, out)
    stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr
    assert "4 actors x 1 slots on 2 nodes" in stderr
    print(f"ray run of {N}: {time.monotonic() - started:.1f} s")
    _check(out, reference)


def _a_third_done(proc: subprocess.Popen, db: str):
    """Wait until a third of the run is accepted, the driver still running; the run store."""
    from sap.store import RunStore

    store = None
    while proc.poll() is None:
        time.sleep(0.5)
        try:
            store = store or RunStore(db)
            runs = store.runs()
            if runs and store.counts(runs[0].id).get("accepted", 0) >= N // 3:
                break
        except Exception:  # the run's tables do not exist yet
            store = None
    assert proc.poll() is None, "the run ended before a third of it was done"
    return store


def test_a_worker_node_killed_a_third_of_the_way_through_changes_nothing(head, worker_node, pg_db, reference,
                                                                           tmp_path):
    out = tmp_path / "ray.jsonl"
    started = time.monotonic()
    proc = _ray_run(head[0], pg_db, out)
    store = _a_third_done(proc, pg_db)
    (raylet,) = _raylets(worker_node)
    os.kill(raylet, signal.SIGKILL)  # the worker node dies with the actors Ray placed on it
    killed_at = store.counts(store.runs()[0].id).get("accepted", 0)
    stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr
    print(f"ray run of {N} with a node killed at {killed_at}: {time.monotonic() - started:.1f} s")
    assert killed_at < N
    _check(out, reference)


def test_a_stopped_driver_stops_its_actors_and_resume_without_ray_finishes(head, worker_node, pg_db, reference,
                                                                            tmp_path):
    """Ctrl-C on the driver: it exits 130 naming the resume command, its actors stop working (the accepted count
    stays put), and that command, run without Ray, brings the output to the single-process bytes."""
    out = tmp_path / "ray.jsonl"
    proc = _ray_run(head[0], pg_db, out)
    store = _a_third_done(proc, pg_db)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    run_id = store.runs()[0].id
    stopped = store.counts(run_id).get("accepted", 0)
    time.sleep(8)  # longer than the 5 s leases: a live actor would have accepted more by now
    assert store.counts(run_id).get("accepted", 0) == stopped < N
    command = stderr.split("Continue with: ")[1].split(" (")[0].split()
    assert "--ray" not in command
    done = subprocess.run(_sap(*command[1:]), capture_output=True, text=True, timeout=900, env=ENV)
    assert done.returncode == 0, done.stderr
    _check(out, reference)
