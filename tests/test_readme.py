"""The README's Python API blocks run as written (the model swap against the scripted OpenAI-compatible server,
which stands in at the README's address), and its quick-start `sap synthesize` command writes what it says."""
from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sap.testing.role_model import role_model
from sap.testing.scripted_llm import ScriptedLLMServer

README = Path(__file__).resolve().parent.parent / "README.md"
README_API_BASE = "http://127.0.0.1:8000/v1"  # the self-hosted server the README's snippets name


def section(title: str) -> str:
    """The README's text from `## title` to the next `## ` heading."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def python_blocks(text: str) -> list[str]:
    """The ```python blocks of `text`."""
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


API_BLOCKS = python_blocks(section("Python API"))


@pytest.mark.parametrize("block", API_BLOCKS, ids=[f"block{i}" for i in range(len(API_BLOCKS))])
def test_every_python_api_block_runs_as_written(block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with ScriptedLLMServer(responder=role_model) as server, contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(block.replace(README_API_BASE, server.api_base), "README.md", "exec"), {})
    assert out.getvalue()


def test_the_model_swap_block_resumes_to_a_complete_llm_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (swap,) = [b for b in API_BLOCKS if "sap.resume" in b]
    with ScriptedLLMServer(responder=role_model) as server, contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(swap.replace(README_API_BASE, server.api_base), "README.md", "exec"), {})
        assert server.requests  # the roles really called the model
    assert out.getvalue().split()[:2] == ["complete", "2"]


def test_the_quick_start_command_writes_its_records(tmp_path):
    setup = section("Set-up on a fresh machine")
    (command,) = [line for line in re.findall(r"```\n(.*?)```", setup, flags=re.S)[0].splitlines() if "sap " in line]
    sap_part = command.split("&& ")[-1].split()  # the install half is the environment this test runs in
    assert sap_part[:2] == ["sap", "synthesize"]
    done = subprocess.run([sys.executable, "-m", "sap.cli", *sap_part[1:]], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    n = int(sap_part[sap_part.index("-n") + 1])
    lines = (tmp_path / sap_part[sap_part.index("-o") + 1]).read_text().splitlines()
    assert len(lines) == n and all(json.loads(line)["meta"]["toolset"] == "store" for line in lines)
