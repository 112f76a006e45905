"""`sap synthesize` with LLM agents end to end over real HTTP: the cost cap stops a run cleanly and a resume
finishes it with the uninterrupted run's bytes; API keys reach the server and nothing stored."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sap.store import RunStore
from sap.testing.role_model import role_model
from sap.testing.scripted_llm import ScriptedLLMServer


def sap(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sap.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def server():
    with ScriptedLLMServer(responder=role_model) as s:
        yield s


def _agents_toml(path: Path, api_base: str, extra: str = "") -> Path:
    path.write_text(f'[model]\nmodel = "openai/scripted"\napi_base = "{api_base}"\n'
                    f'input_cost_per_token = 0.00001\noutput_cost_per_token = 0.00002\n{extra}')
    return path


def test_cost_cap_stops_cleanly_and_resume_gives_the_uninterrupted_bytes(tmp_path, server):
    toml = _agents_toml(tmp_path / "agents.toml", server.api_base)
    common = ["--toolset", "store", "-n", "4", "--seed", "3", "--agents-config", str(toml)]
    full = sap("synthesize", *common, "-o", "full.jsonl", "--db", "sqlite:///full.db", cwd=tmp_path)
    assert full.returncode == 0, full.stderr
    capped = sap("synthesize", *common, "-o", "capped.jsonl", "--db", "sqlite:///capped.db", "--max-cost", "0.1",
                 cwd=tmp_path)
    assert capped.returncode == 1 and "stopped at the cost cap" in capped.stderr
    runs = json.loads(sap("runs", "--json", "--db", "sqlite:///capped.db", cwd=tmp_path).stdout)
    assert runs[0]["status"] == "budget" and runs[0]["accepted"] < 4
    assert 0.1 <= runs[0]["cost_usd"] < 0.3  # stops at the cap: at most the calls in flight past it
    kept = (tmp_path / "capped.jsonl").read_text().splitlines()
    assert len(kept) == runs[0]["accepted"]
    resumed = sap("resume", runs[0]["id"], "--db", "sqlite:///capped.db", "-o", "capped.jsonl",
                  "--max-cost", "100", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert (tmp_path / "capped.jsonl").read_bytes() == (tmp_path / "full.jsonl").read_bytes()
    final = json.loads(sap("runs", "--json", "--db", "sqlite:///capped.db", cwd=tmp_path).stdout)[0]
    full_cost = json.loads(sap("runs", "--json", "--db", "sqlite:///full.db", cwd=tmp_path).stdout)[0]["cost_usd"]
    assert final["status"] == "complete" and final["cost_usd"] >= full_cost * 0.95


def test_the_api_key_reaches_the_server_and_nothing_stored(tmp_path, server):
    secret = "sk-live-DO-NOT-STORE-4711"
    toml = _agents_toml(tmp_path / "agents.toml", server.api_base, 'api_key_env = "SAP_TEST_API_KEY"\n')
    before = len(server.request_headers)
    done = sap("synthesize", "--toolset", "filesystem", "-n", "2", "-o", "d.jsonl", "--agents-config", str(toml),
               cwd=tmp_path, env={"SAP_TEST_API_KEY": secret})
    assert done.returncode == 0, done.stderr
    sent = server.request_headers[before:]
    assert sent and all(h.get("authorization") == f"Bearer {secret}" or h.get("Authorization") == f"Bearer {secret}"
                        for h in sent)
    for path in tmp_path.iterdir():
        assert secret.encode() not in path.read_bytes(), path.name
    assert secret not in done.stdout + done.stderr


def test_a_missing_key_variable_stops_the_run_with_one_line(tmp_path, server):
    toml = _agents_toml(tmp_path / "agents.toml", server.api_base, 'api_key_env = "SAP_TEST_NO_SUCH_KEY"\n')
    done = sap("synthesize", "--toolset", "store", "-n", "2", "-o", "d.jsonl", "--agents-config", str(toml),
               cwd=tmp_path)
    assert done.returncode == 2
    assert "SAP_TEST_NO_SUCH_KEY" in done.stderr and "Traceback" not in done.stderr


def test_structured_auto_runs_against_a_server_that_refuses_json_schema(tmp_path):
    """A llama.cpp-like server answers a json_schema response_format with 400: `--structured auto` probes it once
    and the run completes with json_object requests; --timeout reaches every request."""
    with ScriptedLLMServer(responder=role_model, refuse_json_schema=True) as refusing:
        done = sap("synthesize", "--toolset", "store", "-n", "2", "-o", "d.jsonl", "--model", "openai/scripted",
                   "--api-base", refusing.api_base, "--structured", "auto", "--timeout", "7.5", cwd=tmp_path)
        requests = refusing.requests
    assert done.returncode == 0, done.stderr
    assert len((tmp_path / "d.jsonl").read_text().splitlines()) == 2
    kinds = [(body.get("response_format") or {}).get("type") for body in requests]
    assert kinds[0] == "json_schema" and kinds.count("json_schema") == 1  # the one probe, in one process
    assert len(kinds) > 5 and set(kinds[1:]) == {"json_object"}
    (run,) = RunStore(f"sqlite:///{tmp_path / 'sap.db'}").runs()
    models = [role["model"] for role in run.config["agents"]["roles"].values()]
    assert {(m["structured"], m["timeout"]) for m in models} == {("auto", 7.5)}
