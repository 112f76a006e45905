"""Keys never stored: a server that echoes the key in its errors, with the key given only through
OPENAI_API_KEY (read by LiteLLM itself, not by sap), leaves no trace of it in any output."""
from __future__ import annotations

import os
import subprocess
import sys

from sap.llm.secrets import redact, secret_values
from sap.testing.scripted_llm import ScriptedLLMServer, Status

KEY = "sk-live-0123456789abcdefSECRET"


def test_redact_covers_credential_variables_and_the_given_key(monkeypatch):
    monkeypatch.setenv("SOME_PROVIDER_API_KEY", "abcdefgh12345678")
    monkeypatch.setenv("PATH_LIKE_SETTING", "not-a-secret-value")
    text = "sent abcdefgh12345678 and mykey-987654321 with not-a-secret-value"
    assert redact(text, "mykey-987654321") == "sent *** and *** with not-a-secret-value"
    assert "abcdefgh12345678" in secret_values()


def test_an_echoed_key_from_the_environment_is_in_no_output(tmp_path):
    with ScriptedLLMServer([Status(401, message="invalid key", echo_key=True)] * 40) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        env.update(OPENAI_API_KEY=KEY, OPENAI_API_BASE=server.api_base)
        out = tmp_path / "out.jsonl"
        done = subprocess.run([sys.executable, "-m", "sap.cli", "synthesize", "--toolset", "store", "-n", "1",
                               "--max-slots", "2", "--agents", "llm", "--model", "openai/scripted", "-o", str(out),
                               "--db", f"sqlite:///{tmp_path / 'runs.db'}"],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        sent = [h.get("authorization", "") for h in server.request_headers]
    assert any(KEY in h for h in sent)  # the server did get the key, through LiteLLM's own lookup
    assert done.returncode != 0
    assert "invalid key" in done.stdout + done.stderr  # the server's error is reported...
    assert KEY not in done.stdout + done.stderr  # ...without the key
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
