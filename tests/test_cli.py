"""The `sap` command: toolsets, synthesize (determinism, bad input), validate (tampering), stats."""
from __future__ import annotations

import json

import pytest

from sap.cli import main


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_toolsets_json_lists_builtins_with_counts(capsys):
    code, out, _ = _run(capsys, "toolsets", "--json")
    rows = json.loads(out)
    assert code == 0
    names = {r["name"] for r in rows}
    assert {"filesystem", "store", "travel", "tau2/retail", "tau2/airline"} <= names
    assert all(n.startswith("bfcl/") for n in names - {"filesystem", "store", "travel", "tau2/retail", "tau2/airline"})
    assert sum(r["tools"] for r in rows if r["name"] in ("filesystem", "store", "travel")) >= 30
    assert all(r["description"] for r in rows)


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path, capsys):
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    assert _run(capsys, "synthesize", "--toolset", "store", "-n", "8", "-o", str(a), "--seed", "3")[0] == 0
    assert _run(capsys, "synthesize", "--toolset", "store", "-n", "8", "-o", str(b), "--seed", "3",
                "--new-run")[0] == 0  # a second, independent run, not a re-export of the first
    assert _run(capsys, "synthesize", "--toolset", "store", "-n", "8", "-o", str(c), "--seed", "4")[0] == 0
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    assert len(a.read_text().splitlines()) == 8


def test_summary_reports_accepted(tmp_path, capsys):
    code, out, _ = _run(capsys, "synthesize", "--toolset", "filesystem", "-n", "5", "-o", str(tmp_path / "f.jsonl"))
    assert code == 0
    assert "accepted 5/5" in out and out.startswith("run run-")
    assert "P_f rate" in out
    rejections = tmp_path / "f.jsonl.rejections.jsonl"
    assert all(json.loads(line)["reason"] for line in rejections.read_text().splitlines())


@pytest.mark.parametrize("argv, message", [
    (["--toolset", "nope", "-n", "2"], "built-in: filesystem, store, travel"),
    (["--toolset", "store", "-n", "0"], "-n must be at least 1"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    out_path = tmp_path / "x.jsonl"
    code, _, err = _run(capsys, "synthesize", *argv, "-o", str(out_path))
    assert code == 2
    assert message in err and err.count("\n") == 1
    assert not out_path.exists()


def test_unwritable_output_is_refused_before_work(tmp_path, capsys):
    code, _, err = _run(capsys, "synthesize", "--toolset", "store", "-n", "2", "-o", str(tmp_path / "no" / "x.jsonl"))
    assert code == 2 and "does not exist" in err
    code, _, err = _run(capsys, "synthesize", "--toolset", "store", "-n", "2", "-o", str(tmp_path))
    assert code == 2 and "is a directory" in err


def test_validate_passes_clean_file_and_names_a_tampered_call(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    assert _run(capsys, "synthesize", "--toolset", "travel", "-n", "4", "-o", str(path))[0] == 0
    code, out, _ = _run(capsys, "validate", str(path))
    assert code == 0 and "4 records, 0 failed" in out
    records = [json.loads(line) for line in path.read_text().splitlines()]
    tool_msg = next(m for m in records[2]["messages"] if m["role"] == "tool")
    tool_msg["content"] = json.dumps({"forged": True})
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, out, _ = _run(capsys, "validate", str(path))
    assert code == 1
    assert f"record {records[2]['id']}" in out and tool_msg["tool_call_id"] in out


def test_validate_checks_the_recorded_end_state_hash(tmp_path, capsys):
    path = tmp_path / "s.jsonl"
    assert _run(capsys, "synthesize", "--toolset", "store", "-n", "3", "-o", str(path))[0] == 0
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert all(len(r["meta"]["end_state_hash"]) == 64 for r in records)
    assert len({r["meta"]["end_state_hash"] for r in records}) == 3  # different users, different end states
    records[1]["meta"]["end_state_hash"] = records[0]["meta"]["end_state_hash"]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, out, _ = _run(capsys, "validate", str(path))
    assert code == 1 and f"record {records[1]['id']}" in out and "end_state_hash" in out
    assert "3 records, 1 failed" in out


def test_validate_reports_bad_json_line(tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    path.write_text("{not json}\n")
    code, _, err = _run(capsys, "validate", str(path))
    assert code == 2 and "bad.jsonl:1" in err


def test_stats_json_has_the_documented_keys(tmp_path, capsys):
    path = tmp_path / "s.jsonl"
    assert _run(capsys, "synthesize", "--toolset", "filesystem", "-n", "6", "-o", str(path))[0] == 0
    code, out, _ = _run(capsys, "stats", str(path), "--json")
    stats = json.loads(out)
    assert code == 0
    assert stats["records"] == 6
    assert set(stats) >= {"records", "tag_distribution", "mean_chain_length", "max_chain_length",
                          "dependent_share", "mean_turns", "tool_coverage"}
    assert abs(sum(stats["tag_distribution"].values()) - 1.0) < 1e-9


USER_DOMAIN = '''
"""A user's own two-tool domain for the CLI test."""
import random

NAME = "counter"
DESCRIPTION = "Named counters."


class Counters:
    def __init__(self) -> None:
        self._counts = {}

    def _load_scenario(self, config: dict) -> None:
        self._counts = dict(config["counts"])

    def list_counters(self) -> dict:
        """List the counters and their values."""
        return {"counters": [{"counter_name": k, "value": v} for k, v in sorted(self._counts.items())]}

    def increment(self, counter_name: str, by: int = 1) -> dict:
        """Increment a counter.

        Args:
            counter_name: name of an existing counter
            by: amount to add
        """
        if counter_name not in self._counts:
            return {"error": f"no counter {counter_name!r}"}
        self._counts[counter_name] += by
        return {"counter_name": counter_name, "value": self._counts[counter_name]}


TOOL_CLASS = Counters


def sample_config(seed: int) -> dict:
    rng = random.Random(seed)
    return {"counts": {name: rng.randint(0, 9) for name in rng.sample(["apples", "pears", "plums", "figs"], 3)}}
'''


def test_a_user_domain_module_synthesizes_and_validates(tmp_path, capsys):
    module = tmp_path / "counters.py"
    module.write_text(USER_DOMAIN)
    out = tmp_path / "c.jsonl"
    code, _, err = _run(capsys, "synthesize", "--toolset", str(module), "-n", "5", "-o", str(out),
                        "--min-turns", "2", "--max-turns", "4")
    assert code == 0, err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    tags = {a["tag"] for r in records for p in r["provenance"] for a in p["args"].values()}
    assert "prev_output" in tags  # increment's counter_name is bound from list_counters' result
    assert _run(capsys, "validate", str(out), "--toolset", str(module))[0] == 0
    code, _, err = _run(capsys, "validate", str(out))  # meta.toolset is the module's NAME, never its path
    assert code == 2 and err == (f"sap validate: error: {out}:1: meta.toolset 'counter' is not a built-in toolset; "
                                 f"for the data of a domain module, pass the module's path: --toolset PATH\n")


def test_mix_produces_each_kind_and_every_record_validates(tmp_path, capsys):
    path = tmp_path / "mix.jsonl"
    code, out, _ = _run(capsys, "synthesize", "--toolset", "travel", "-n", "24", "-o", str(path),
                        "--mix", "base=0.4,miss_param=0.3,miss_func=0.3")
    assert code == 0
    records = [json.loads(line) for line in path.read_text().splitlines()]
    kinds = {r["meta"]["kind"] for r in records}
    assert kinds == {"base", "miss_param", "miss_func"}
    for r in records:
        if r["meta"]["kind"] == "miss_func":
            (turn, tools), = r["meta"]["missed_function"].items()
            user_turns = [i for i, m in enumerate(r["messages"]) if m["role"] == "user"]
            start, end = user_turns[int(turn)], user_turns[int(turn) + 1]
            called = {tc["function"]["name"] for m in r["messages"][start:end] for tc in m.get("tool_calls") or []}
            assert not called & set(tools)  # the missed tool is not called at its turn
    assert _run(capsys, "validate", str(path))[0] == 0
    code, out, _ = _run(capsys, "stats", str(path), "--json")
    assert set(json.loads(out)["kind_counts"]) == kinds


def test_bad_mix_is_refused(tmp_path, capsys):
    code, _, err = _run(capsys, "synthesize", "--toolset", "store", "-n", "2", "-o", str(tmp_path / "x.jsonl"),
                        "--mix", "base=1,miss_everything=2")
    assert code == 2 and "miss_everything" in err


def test_read_only_commands_create_no_database(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _run(capsys, "runs") == (0, "", "no run database at sap.db (--db sqlite:///sap.db)\n")
    assert _run(capsys, "runs", "--json")[:2] == (0, "[]\n")
    code, _, err = _run(capsys, "export", "run-abc", "-o", "out.jsonl")
    assert (code, err) == (2, "sap export: error: run-abc: no such file, and no run database at sap.db "
                              "(--db sqlite:///sap.db)\n")
    (tmp_path / "c.jsonl").write_text(json.dumps({"id": "c1", "meta": {"toolset": "cache:notes"}}) + "\n")
    code, _, err = _run(capsys, "validate", "c.jsonl", "--db", "sqlite:///other.db")
    assert (code, err) == (2, "sap validate: error: no run database at other.db (--db sqlite:///other.db)\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl"]


def test_a_bare_db_path_is_a_sqlite_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["synthesize", "--toolset", "filesystem", "-n", "1", "-o", "out.jsonl", "--db", "runs.db"]) == 0
    assert (tmp_path / "runs.db").is_file()  # the file the help says --db may name, not a URL error
    capsys.readouterr()
    assert main(["runs", "--db", "runs.db"]) == 0
    assert "1/1 accepted" in capsys.readouterr().out
