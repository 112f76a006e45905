"""Several slots in flight in one process (`--concurrency`): exactly the target, no slot twice, real overlap."""
from __future__ import annotations

import json
import subprocess
import sys
import time

from sap.runs.driver import RunDriver, run_config, start_run
from sap.store import RunStore
from sap.store.checkpoint import checkpointer_for
from sap.testing.role_model import role_model
from sap.testing.scripted_llm import ScriptedLLMServer
from sap.toolsets import load_toolset
from sap.validate import validate_file


def test_concurrent_slots_fill_the_target_once_each_and_overlap(tmp_path):
    with ScriptedLLMServer(responder=role_model, latency=0.05) as server:
        out = tmp_path / "d.jsonl"
        done = subprocess.run([sys.executable, "-m", "sap.cli", "synthesize", "--toolset", "store", "-n", "8",
                               "-o", str(out), "--db", f"sqlite:///{tmp_path}/run.db", "--concurrency", "4",
                               "--model", "openai/scripted", "--api-base", server.api_base],
                              capture_output=True, text=True, cwd=tmp_path, timeout=300)
        peak = server.max_in_flight
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    indexes = [r["meta"]["index"] for r in records]
    assert len(records) == 8 and len(set(indexes)) == 8 and indexes == sorted(indexes)
    assert peak > 1  # slots really ran at the same time
    count, problems = validate_file(out)
    assert count == 8 and problems == []
    store = RunStore(f"sqlite:///{tmp_path}/run.db")
    run = store.runs()[0]
    assert store.counts(run.id).get("running", 0) == 0
    assert store.usage(run.id).snapshot()["total"]["calls"] > 0


class _SlowSlots(RunDriver):
    """Slots that take a while, so slot threads without a claimable slot have to wait for them."""

    def _outcome(self, index: int) -> dict:
        time.sleep(1.0)
        return super()._outcome(index)


def test_idle_slot_threads_wait_for_a_slot_to_end_instead_of_polling_the_store(tmp_path):
    url = f"sqlite:///{tmp_path}/run.db"
    store = RunStore(url)
    toolset = load_toolset("store")
    run_id = start_run(store, toolset, run_config(1, 2, None, {}))
    claims = []
    next_slot = store.next_slot
    store.next_slot = lambda *args: claims.append(next_slot(*args)) or claims[-1]
    with checkpointer_for(url) as saver:
        progress = _SlowSlots(store, run_id, toolset, saver).run(concurrency=8)
    assert progress.status == "complete" and progress.accepted == 1
    slots = len([c for c in claims if c is not None])
    # each thread asks once, then again only after a slot ends; polling every 0.2 s would ask ~5 times a second
    assert len(claims) <= slots + 8 * (slots + 1)
