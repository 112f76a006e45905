"""A checkpoint row crafted to call code on load (a msgpack extension naming `os.system`) is read as data by
`sap resume`, never executed; LangGraph's default serializer would run it."""
from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import ormsgpack
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_SINGLE_ARG,
    JsonPlusSerializer,
)

from sap.runs.driver import run_config, start_run
from sap.store import RunStore
from sap.store.checkpoint import checkpointer_for
from sap.toolsets import load_toolset


def _payload(marker: Path) -> ormsgpack.Ext:
    """An extension value whose permissive decoding calls os.system("touch MARKER")."""
    return ormsgpack.Ext(EXT_CONSTRUCTOR_SINGLE_ARG, ormsgpack.packb(("os", "system", f"touch {marker}")))


def _crafted_blob(marker: Path) -> bytes:
    """A whole checkpoint whose channel values hold the payload, as a row of the checkpoints table would."""
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"index": _payload(marker)}
    return ormsgpack.packb(checkpoint)


def test_the_permissive_serializer_would_run_the_payload(tmp_path):
    marker = tmp_path / "PWNED"
    JsonPlusSerializer(allowed_msgpack_modules=True).loads_typed(("msgpack", _crafted_blob(marker)))
    assert marker.exists()  # the threat is real: this is what the checkpointer must not do


def test_a_crafted_checkpoint_does_not_run_on_resume(tmp_path):
    db = tmp_path / "runs.db"
    url = f"sqlite:///{db}"
    store = RunStore(url)
    run_id = start_run(store, load_toolset("store"), run_config(2, 3, None, {"min_turns": 3, "max_turns": 8,
                                                                             "emphasis_size": 3}))
    config = {"configurable": {"thread_id": f"{run_id}:0", "checkpoint_ns": ""}}
    with checkpointer_for(url) as saver:  # slot 0's thread, as if a killed worker had left it
        saver.put(config, empty_checkpoint(), {"source": "loop", "step": 1}, {})
    marker = tmp_path / "PWNED"
    with sqlite3.connect(db) as conn:
        changed = conn.execute("UPDATE checkpoints SET checkpoint = ?, type = 'msgpack' WHERE thread_id = ?",
                               (_crafted_blob(marker), f"{run_id}:0")).rowcount
    assert changed == 1
    done = subprocess.run([sys.executable, "-m", "sap.cli", "resume", run_id, "--db", url,
                           "-o", str(tmp_path / "out.jsonl")], capture_output=True, text=True, timeout=300)
    assert not marker.exists(), done.stderr
    assert done.returncode in (0, 1, 2), done.stderr  # the run may end either way; no code ran
