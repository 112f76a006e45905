"""Data never names code: a record whose meta.toolset is a Python file never gets that file imported by a reading
command; a domain module given with --toolset that fails to import is one line, exit 2."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from sap.cli.main import main
from sap.testing import ScriptedLLMServer

POISON = 'from pathlib import Path\nPath(__file__).with_name("PWNED").write_text("ran")\n'


@pytest.fixture(scope="module")
def store_record(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One synthesized store record."""
    out = tmp_path_factory.mktemp("seed") / "store.jsonl"
    assert main(["synthesize", "--toolset", "store", "-n", "1", "-o", str(out), "--db", "sqlite:///:memory:"]) == 0
    return json.loads(out.read_text().splitlines()[0])


@pytest.fixture
def poisoned(tmp_path: Path, store_record: dict) -> Path:
    """A JSONL file of one record whose meta.toolset names evil.py beside it, a file that writes PWNED on import."""
    (tmp_path / "evil.py").write_text(POISON)
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({**store_record, "meta": {**store_record["meta"], "toolset": str(tmp_path / "evil.py")}})
                    + "\n")
    return data


def _sap(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str]:
    """Exit code and stderr of one `sap` command."""
    code = main(list(argv))
    return code, capsys.readouterr().err


@pytest.mark.parametrize("command", ["validate", "variants", "eval", "frontier"])
def test_a_command_needing_the_toolset_refuses_a_path_named_by_data_and_says_how_to_pass_it(
        command: str, poisoned: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    evil = tmp_path / "evil.py"
    with ScriptedLLMServer([]) as server:
        argv = {"validate": ["validate", str(poisoned)],
                "variants": ["variants", str(poisoned), "-o", str(tmp_path / "v.jsonl")],
                "eval": ["eval", "--assistant-model", "openai/m", "--api-base", server.api_base, "--data", str(poisoned)],
                "frontier": ["frontier", "--assistant-model", "openai/m", "--api-base", server.api_base, "--data", str(poisoned),
                             "-o", str(tmp_path / "f"), "--db", f"sqlite:///{tmp_path / 'f.db'}"]}[command]
        code, err = _sap(capsys, *argv)
        assert server.requests == []
    assert not (tmp_path / "PWNED").exists()
    assert code == 2 and err.count("\n") == 1
    assert err == (f"sap {command}: error: {poisoned}:1: meta.toolset '{evil}' names code to run (PATH.py (domain "
                   f"module)); sap runs no code named by data: if you trust it, pass --toolset {evil}\n")


@pytest.mark.parametrize("argv, code", [
    (["stats", "{data}"], 0),
    (["report", "{data}", "-o", "{tmp}/report"], 0),
    (["export", "{data}", "-o", "{tmp}/out.jsonl"], 0),
    (["export", "{data}", "-o", "{tmp}/out.jsonl", "--format", "sharegpt"], 0),
    (["export", "{data}", "-o", "{tmp}/hf", "--format", "hf"], 0),
    (["export", "{data}", "-o", "{tmp}/train.parquet", "--format", "verl"], 0),
    (["export", "{data}", "-o", "{tmp}/bfcl", "--format", "bfcl"], 2),
])
def test_a_command_not_needing_the_toolset_never_imports_it(argv: list[str], code: int, poisoned: Path,
                                                            tmp_path: Path, capsys: pytest.CaptureFixture):
    got, err = _sap(capsys, *(a.format(data=poisoned, tmp=tmp_path) for a in argv))
    assert not (tmp_path / "PWNED").exists()
    assert got == code, err
    if code:
        assert err.count("\n") == 1 and "is not a BFCL toolset" in err


def test_the_same_module_given_with_toolset_is_imported(poisoned: Path, tmp_path: Path, capsys):
    code, err = _sap(capsys, "validate", str(poisoned), "--toolset", str(tmp_path / "evil.py"))
    assert (tmp_path / "PWNED").exists()  # the user chose to run it
    assert code == 2 and "domain module lacks NAME, TOOL_CLASS, sample_config" in err


@pytest.mark.parametrize("source, message", [
    ('NAME = "x"\ndef broken(:\n    pass\n', "{path}:2: SyntaxError: invalid syntax"),
    ('NAME = "x"\n\nimport sap_no_such_module_here\n',
     "{path}:3: ModuleNotFoundError: No module named 'sap_no_such_module_here'"),
    ('NAME = "x"\n\n\nraise RuntimeError("no config file")\n', "{path}:4: RuntimeError: no config file"),
])
@pytest.mark.parametrize("command", [["synthesize", "-n", "1", "-o", "{tmp}/x.jsonl", "--db", "sqlite:///:memory:"],
                                     ["validate", "{data}"]])
def test_a_domain_module_that_fails_to_import_is_one_line_naming_file_and_line(
        source: str, message: str, command: list[str], poisoned: Path, tmp_path: Path, capsys):
    module = tmp_path / "broken.py"
    module.write_text(source)
    code, err = _sap(capsys, *(a.format(tmp=tmp_path, data=poisoned) for a in command), "--toolset", str(module))
    assert code == 2
    assert err == f"sap {command[0]}: error: {message.format(path=module)}\n"
