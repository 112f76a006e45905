"""Two command-line conventions: `sap synthesize --dry-run` prints the plan and runs and writes nothing, and a reader
that closes the pipe early (`sap export RUN -o - | head`) ends sap quietly with the shell's SIGPIPE code, 141."""
from __future__ import annotations

import json
import os
import re

from cli_fixtures import sap, sap_popen

from sap.cli import main


def _tree(path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_dry_run_prints_the_plan_and_creates_no_database_and_no_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["synthesize", "--toolset", "store", "-n", "20", "-o", "data.jsonl", "--dry-run",
                 "--judge-model", "openai/gpt-4o-mini", "--max-cost", "2"]) == 0
    plan = capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
    assert "toolset   store (18 tools)" in plan and "20 accepted, at most 120 slots; seed 0" in plan
    assert "LLM roles: judge openai/gpt-4o-mini; rule roles: fsm_builder, messenger, planner" in plan
    assert "sqlite:///sap.db (a new database file sap.db would be created; a new run)" in plan
    assert "output    data.jsonl" in plan and "cost cap $2" in plan
    calls = next(line for line in plan.splitlines() if line.startswith("  calls"))
    assert "judge" in calls and "planner" not in calls  # only the LLM roles are measured
    low, high = (float(x.replace(",", "")) for x in re.search(r"cost      \$([\d.e-]+) to \$([\d.,e-]+)", plan).groups())
    assert 0 < low <= high  # gpt-4o-mini's prices from LiteLLM's cost map


def test_dry_run_cost_scales_with_the_target_and_names_unpriced_models(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    costs = []
    for n in ("10", "40"):
        assert main(["synthesize", "--toolset", "filesystem", "-n", n, "-o", "d.jsonl", "--dry-run",
                     "--model", "openai/gpt-4o-mini"]) == 0
        costs.append(float(re.search(r"cost      \$([\d.e-]+)", capsys.readouterr().out).group(1)))
    assert costs[1] > 3 * costs[0]
    assert main(["synthesize", "--toolset", "filesystem", "-n", "5", "-o", "d.jsonl", "--dry-run",
                 "--model", "openai/my-own-server-model"]) == 0
    assert "no price for" in capsys.readouterr().out
    assert main(["synthesize", "--toolset", "filesystem", "-n", "5", "-o", "d.jsonl", "--dry-run"]) == 0
    assert "cost      $0: no LLM calls" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_dry_run_on_an_existing_database_names_the_run_it_would_continue_and_changes_nothing(tmp_path, capsys):
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    base = ["synthesize", "--toolset", "store", "-n", "2", "--seed", "4", "--db", db, "-q"]
    assert main([*base, "-o", str(tmp_path / "a.jsonl"), "--max-slots", "2"]) in (0, 1)
    capsys.readouterr()
    before = _tree(tmp_path)
    assert main([*base, "-o", str(tmp_path / "b.jsonl"), "--max-slots", "2", "--dry-run"]) == 0
    plan = capsys.readouterr().out
    from sap import list_runs

    (run,) = list_runs(db)
    assert f"continues run {run['id']} ({run['accepted']} of 2 accepted)" in plan
    assert _tree(tmp_path) == before  # no output file, no new run, the database's bytes as they were
    # a dry run refuses what the run would refuse: another run's output file
    assert main([*base, "-o", str(tmp_path / "a.jsonl"), "--seed", "5", "--dry-run", "--new-run"]) == 2
    assert "--overwrite" in capsys.readouterr().err


def test_a_reader_closing_the_pipe_ends_the_export_quietly_with_141(tmp_path):
    sap("synthesize", "--toolset", "store", "-n", "2", "--seed", "1", "-o", "data.jsonl", "-q", cwd=tmp_path)
    (tmp_path / "many.jsonl").write_text((tmp_path / "data.jsonl").read_text() * 20)
    assert os.path.getsize(tmp_path / "many.jsonl") > 8 * 65536  # far more than a pipe holds: the writer blocks
    proc = sap_popen("export", "many.jsonl", "-o", "-", cwd=tmp_path)
    first = proc.stdout.readline()
    proc.stdout.close()  # `| head -1`
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141
    assert json.loads(first)["id"] and err == ""
