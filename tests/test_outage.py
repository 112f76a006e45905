"""An LLM outage pauses a run instead of burning it (issue 26): a server that turns to 500, or hangs, after 5 good
requests stops the run within K slot failures (a hang within 2 request timeouts), no slot is lost, and once the
server is healthy `sap resume` finishes with exactly the bytes of a run that never saw the outage."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sap.runs.health import FIRST_FAILURES, OUTAGE_FAILURES
from sap.testing.role_model import role_model
from sap.testing.scripted_llm import Hang, Outage, ScriptedLLMServer, Status

GOOD_REQUESTS = 5


def sap(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sap.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600, env={**os.environ})


def test_a_server_that_refuses_every_request_stops_the_run_after_the_first_slots(tmp_path):
    """A key revoked after the FSM is built: 401 on every later request fails each slot at whichever role asks
    first; the first slots' failures are one cause (the role left out), so the run stops early instead of
    spending every slot."""
    outage = Outage(Status(401, message="invalid api key"), GOOD_REQUESTS, role_model)
    with ScriptedLLMServer(responder=outage) as server:
        outage.server = server
        (tmp_path / "agents.toml").write_text(f'[model]\nmodel = "openai/scripted"\napi_base = "{server.api_base}"\n')
        done = sap("synthesize", "--toolset", "store", "-n", "10", "--max-slots", "30", "--agents-config",
                   "agents.toml", "-o", "out.jsonl", "--db", "sqlite:///run.db", cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert f"the first {FIRST_FAILURES} slots all failed the same way" in done.stderr, done.stderr[-2000:]
    run = json.loads(sap("runs", "--json", "--db", "sqlite:///run.db", cwd=tmp_path).stdout)[0]
    assert run["failed"] == FIRST_FAILURES, run


@pytest.mark.parametrize("step, retries", [(Status(500), 1), (Hang(60), 5)], ids=["500", "hang"])
def test_an_outage_pauses_the_run_and_resume_gives_the_bytes_of_a_run_without_it(tmp_path, step, retries):
    outage = Outage(step, GOOD_REQUESTS, role_model)
    with ScriptedLLMServer(responder=outage) as server:
        outage.server = server
        (tmp_path / "agents.toml").write_text(
            f'[model]\nmodel = "openai/scripted"\napi_base = "{server.api_base}"\ntimeout = 1.5\n'
            f'max_retries = {retries}\nbackoff_base = 0.01\nbackoff_max = 0.05\n')
        common = ["--toolset", "store", "-n", "3", "--seed", "3", "--agents-config", "agents.toml"]
        broken = sap("synthesize", *common, "-o", "broken.jsonl", "--db", "sqlite:///broken.db", cwd=tmp_path)
        failing_requests = len(server.requests) - GOOD_REQUESTS
        assert server.clear() > 0  # the server is healthy again
        assert broken.returncode == 1 and "Traceback" not in broken.stderr, broken.stderr
        line = broken.stderr.strip().splitlines()[-1]
        assert "paused, no slot lost" in line and "sap resume run-" in line
        if isinstance(step, Hang):  # a hang is given up after 2 request timeouts, not after max_retries of them
            assert failing_requests == 2 and "did not answer in time" in line
        else:  # K slots, each giving up after its retries
            assert failing_requests == OUTAGE_FAILURES * (retries + 1)
        run = json.loads(sap("runs", "--json", "--db", "sqlite:///broken.db", cwd=tmp_path).stdout)[0]
        assert run["status"] == "paused" and run["failed"] == 0 and run["rejected"] == 0  # no slot lost
        resumed = sap("resume", run["id"], "--db", "sqlite:///broken.db", "-o", "broken.jsonl", cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stderr
        clean = sap("synthesize", *common, "-o", "clean.jsonl", "--db", "sqlite:///clean.db", cwd=tmp_path)
        assert clean.returncode == 0, clean.stderr
    records = (tmp_path / "broken.jsonl").read_bytes()
    assert len(records.splitlines()) == 3 and records == (tmp_path / "clean.jsonl").read_bytes()
    final = json.loads(sap("runs", "--json", "--db", "sqlite:///broken.db", cwd=tmp_path).stdout)[0]
    assert final["status"] == "complete" and final["failed"] == 0
