"""Every bad input of issue 26 ends in one line on stderr and exit 2, never a traceback.

Tried, with the line each gives (`sap synthesize --toolset X.py -n 2 -o o.jsonl` unless said otherwise):

| bad input | one-line message |
|---|---|
| tools with no parameters (none changes state) | FSM for toolset 'noparams' still violates V_spec after 3 rounds (1 violation in the last round): [final_reachable] the FSM has no final state |
| a class with no public tools | X.py: TOOL_CLASS T has no public tool methods |
| 500 tools | X.py: TOOL_CLASS T has 500 tools; a toolset may have at most 128 (split it into several domain modules) |
| unicode tool names (get_ñame, 找), read-only | FSM for toolset 'unicode' still violates V_spec after 3 rounds (...): [final_reachable] the FSM has no final state |
| a 2 MB docstring (one read-only tool) | FSM for toolset 'bigdoc' still violates V_spec after 3 rounds (...): [final_reachable] the FSM has no final state |
| FSM with no reachable final state (ids only from each other) | FSM for toolset 'nofinal' still violates V_spec after 3 rounds (2 violations ...): [dead_end] ...; [final_reachable] the FSM has no final state |
| `--min-turns 0 --max-turns 0` | --min-turns must be at least 1, got 0 |
| `--seed 10**30` (out of range) | --seed must be between -2147483648 and 2147483647, got 1000000000000000000000000000000 |
| a non-JSON sample_config | X.py: sample_config(0) does not give a JSON object: TypeError: Object of type object is not JSON serializable |
| sample_config returning a list | X.py: sample_config(0) gives a list, not a dict |
| an exception raised while the module imports | X.py:1: RuntimeError: database not configured |
| `--max-cost -1` | --max-cost must be at least 0, got -1.0 |
| `--concurrency 0` | --concurrency must be at least 1, got 0 |
| a tool docstring naming an argument the method lacks | Arg x in docstring not found in function signature. |

A tool with unicode letters in its name or a 2 MB docstring loads like any other; such toolsets above are refused
only because their (read-only) tools give no final state, which the FSM check says in one line.
"""
from __future__ import annotations

import pytest

from sap.cli.main import main

HEAD = 'from sap.toolsets.domains.common import tool_method\nNAME = "{name}"\n\n\nclass T:\n    """t"""\n'
TAIL = '\n\nTOOL_CLASS = T\n\n\ndef sample_config(seed):\n    return {config}\n'


def tool(name: str) -> str:
    """A read-only tool method `name(x)`."""
    return (f'\n    @tool_method\n    def {name}(self, x: str) -> dict:\n        """Get it.\n\n        Args:\n'
            f'            x: a thing\n        """\n        return {{}}\n')


MODULES = {
    "nopublic": (HEAD + "    def _hidden(self):\n        return 1\n" + TAIL.format(config="{}"),
                 "TOOL_CLASS T has no public tool methods"),
    "many": (HEAD + "".join(tool(f"get_t{i}") for i in range(500)) + TAIL.format(config="{}"),
             "TOOL_CLASS T has 500 tools; a toolset may have at most 128"),
    "badconfig": (HEAD + tool("get_a") + TAIL.format(config="{'when': object()}"),
                  "sample_config(0) does not give a JSON object: TypeError"),
    "listconfig": (HEAD + tool("get_a") + TAIL.format(config="[1]"), "sample_config(0) gives a list, not a dict"),
    "importerr": ("raise RuntimeError('database not configured')\n", "importerr.py:1: RuntimeError: database not"),
}


def one_line_error(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """Run `sap argv`, which must fail with exit 2 and one line on stderr; that line."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"sap {argv[0]}: error: "), err
    return err


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_bad_domain_module_is_one_line(tmp_path, capsys, name):
    text, expected = MODULES[name]
    (tmp_path / f"{name}.py").write_text(text)
    err = one_line_error(["synthesize", "--toolset", str(tmp_path / f"{name}.py"), "-n", "2",
                          "-o", str(tmp_path / "o.jsonl"), "--db", f"sqlite:///{tmp_path / 'r.db'}"], capsys)
    assert expected in err


@pytest.mark.parametrize("flags, expected", [
    (["--min-turns", "0", "--max-turns", "0"], "--min-turns must be at least 1"),
    (["--max-turns", "2", "--min-turns", "3"], "--min-turns 3 is above --max-turns 2"),
    (["--seed", str(10**30)], "--seed must be between -2147483648 and 2147483647"),
    (["--max-cost", "-1"], "--max-cost must be at least 0, got -1.0"),
    (["--concurrency", "0"], "--concurrency must be at least 1, got 0"),
])
def test_a_bad_flag_is_one_line_before_any_work(tmp_path, capsys, flags, expected):
    db = tmp_path / "r.db"
    err = one_line_error(["synthesize", "--toolset", "store", "-n", "2", "-o", str(tmp_path / "o.jsonl"),
                          "--db", f"sqlite:///{db}", *flags], capsys)
    assert expected in err and not db.exists()


def test_resume_refuses_a_negative_cost_cap(tmp_path, capsys):
    err = one_line_error(["resume", "run-x", "--max-cost", "-1", "--db", f"sqlite:///{tmp_path / 'r.db'}"], capsys)
    assert "--max-cost must be at least 0" in err


@pytest.mark.parametrize("name", ["/abs/path", "../up", "sub/dir", ".."])
def test_an_export_name_outside_the_output_directory_is_refused(tmp_path, capsys, name):
    (tmp_path / "in.jsonl").write_text("")
    err = one_line_error(["export", str(tmp_path / "in.jsonl"), "--format", "bfcl", "-o", str(tmp_path / "out"),
                          "--name", name], capsys)
    assert "--name must be a plain file name" in err and not (tmp_path / "out").exists()
