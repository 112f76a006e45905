"""A really full disk (a small tmpfs, filled): one clear line and a non-zero exit, no corruption, every accepted
record kept, and once space is freed `sap resume` writes exactly the bytes of an uninterrupted run."""
from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

N, SEED = 30, 5


def _sap(*argv: str) -> list[str]:
    return [sys.executable, "-m", "sap.cli", *argv]


def _synthesize(db: Path, out: Path) -> list[str]:
    return _sap("synthesize", "--toolset", "store", "-n", str(N), "--seed", str(SEED), "-o", str(out),
                "--db", f"sqlite:///{db}")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The export of the same run, uninterrupted, on an ordinary disk."""
    where = tmp_path_factory.mktemp("reference")
    subprocess.run(_synthesize(where / "ref.db", where / "ref.jsonl"), check=True, capture_output=True, timeout=120)
    return (where / "ref.jsonl").read_bytes()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[[int], Path]]:
    """Mounts a tmpfs of a given size in bytes at a fresh directory; unmounted after the test."""
    mounted: list[Path] = []

    def mount(size: int) -> Path:
        path = tmp_path / f"disk{len(mounted)}"
        path.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                              capture_output=True, text=True) if shutil.which("mount") else None
        if done is None or done.returncode != 0:
            pytest.skip(f"cannot mount a small tmpfs to fill (needs root or CAP_SYS_ADMIN): "
                        f"{done.stderr.strip() if done else 'no mount command'}")
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], check=True)


def _fill(path: Path) -> None:
    """Write `path` until the filesystem has no byte left."""
    with open(path, "wb", buffering=0) as f:
        for chunk in (b"\0" * 65536, b"\0" * 1024, b"\0"):
            try:
                while True:
                    f.write(chunk)
            except OSError:
                pass


def _accepted(db: Path) -> list[dict]:
    """The accepted records in slot order, read without writing to the database."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        try:
            return [json.loads(r) for (r,) in conn.execute('SELECT record FROM sap_records ORDER BY "index"')]
        except sqlite3.OperationalError:  # the tables are not there yet
            return []


def _integrity(db: Path) -> list[tuple]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute("PRAGMA integrity_check").fetchall()


def _one_clear_line(err: str, where: str) -> tuple[str, int]:
    """The run id and the kept-record count of a disk-full message; asserts it is one line, not a traceback."""
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{where}: disk is full" in err, err
    found = re.search(r"run (run-\w+) stopped; (\d+) accepted records are kept; free space and run: sap resume \1", err)
    assert found, err
    return found[1], int(found[2])


def _whole_line_prefix(out: Path, reference: bytes) -> int:
    """Asserts `out` is whole lines and the start of the reference export; how many lines."""
    data = out.read_bytes()
    assert data == b"" or data.endswith(b"\n")
    assert reference.startswith(data)
    return data.count(b"\n")


def test_a_full_database_disk_stops_cleanly_and_resume_gives_the_uninterrupted_export(reference, small_disk,
                                                                                      tmp_path):
    disk = small_disk(16 << 20)
    db, out = disk / "run.db", tmp_path / "out.jsonl"
    proc = subprocess.Popen(_synthesize(db, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline, before = time.time() + 60, []
    while len(before) < 3 and time.time() < deadline:
        time.sleep(0.05)
        before = _accepted(db) if db.exists() else []
    _fill(disk / "filler")
    assert os.statvfs(disk).f_bavail == 0
    _, err = proc.communicate(timeout=60)

    assert proc.returncode == 2
    run_id, kept = _one_clear_line(err, f"database {db}")
    assert _integrity(db) == [("ok",)]
    accepted = _accepted(db)
    assert len(accepted) == kept and kept >= len(before) >= 3 and kept < N
    assert accepted[:len(before)] == before  # nothing accepted before the disk filled is lost
    assert accepted == [json.loads(line) for line in reference.splitlines()[:kept]]
    assert _whole_line_prefix(out, reference) <= kept

    (disk / "filler").unlink()
    resumed = tmp_path / "resumed.jsonl"
    done = subprocess.run(_sap("resume", run_id, "--db", f"sqlite:///{db}", "-o", str(resumed)),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert resumed.read_bytes() == reference
    assert _integrity(db) == [("ok",)]


@pytest.mark.parametrize("room", [0.5, 1.5], ids=["while-streaming", "in-the-final-rewrite"])
def test_a_full_output_disk_leaves_whole_lines_and_resume_gives_the_uninterrupted_export(reference, small_disk,
                                                                                         tmp_path, room):
    disk = small_disk(int(len(reference) * room))  # the final slot-order rewrite needs room for a second copy
    db, out = tmp_path / "run.db", disk / "out.jsonl"
    done = subprocess.run(_synthesize(db, out), capture_output=True, text=True, timeout=120)

    assert done.returncode == 2
    run_id, kept = _one_clear_line(done.stderr, f"output {out}")
    assert kept == len(_accepted(db))
    lines = _whole_line_prefix(out, reference)
    assert (lines, kept) == ((kept - 1, kept) if room < 1 else (N, N))  # the record being written when it filled
    assert sorted(p.name for p in disk.iterdir()) == ["out.jsonl"]  # no temporary file left behind

    subprocess.run(["mount", "-o", f"remount,size={4 * len(reference)}", str(disk)], check=True)
    done = subprocess.run(_sap("resume", run_id, "--db", f"sqlite:///{db}", "-o", str(out)),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == reference
