"""Light imports: `import sap`, `import sap.rewards`, the command line's parser (help, typos) and `sap toolsets` (tool
schemas come from signatures through pydantic) load no LangGraph, LiteLLM or LangChain, and no graph; the heavy
modules load inside the commands that need them."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("langgraph", "litellm", "langchain", "langchain_core", "langsmith", "sap.graphs")

# run a snippet, then print the heavy modules it loaded as a JSON list
REPORT = ("import json, sys; print(json.dumps(sorted(m for m in sys.modules "
          f"if any(m == h or m.startswith(h + '.') for h in {HEAVY!r}))))")


def heavy_modules_after(code: str, tmp_path: Path) -> list[str]:
    """The heavy modules loaded once `code` has run in a fresh interpreter (in `tmp_path`, on this checkout)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", f"{code}\n{REPORT}"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("code", ["import sap", "import sap.rewards", "import sap.errors"])
def test_imports_load_no_pipeline(tmp_path, code):
    assert heavy_modules_after(code, tmp_path) == []


CLI = ("import contextlib, io\nfrom sap.cli import main\n"
       "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
       "    try:\n        main({argv!r})\n    except SystemExit:\n        pass")


@pytest.mark.parametrize("argv", [["--help"], ["synthesize", "--help"], ["synthesise"], ["runs"], ["toolsets"],
                                  ["synthesize", "--toolset", "store", "-n", "0", "-o", "x.jsonl"]])
def test_cli_answers_help_typos_and_runs_without_the_pipeline(tmp_path, argv):
    assert heavy_modules_after(CLI.format(argv=argv), tmp_path) == []


def test_runs_on_an_existing_database_loads_no_pipeline(tmp_path):
    from sap.store import RunStore

    RunStore(f"sqlite:///{tmp_path}/sap.db").engine.dispose()
    assert heavy_modules_after(CLI.format(argv=["runs"]), tmp_path) == []


def test_the_heavy_modules_are_seen_when_loaded(tmp_path):
    assert "langgraph" in heavy_modules_after("import sap.graphs.synthesis", tmp_path)
