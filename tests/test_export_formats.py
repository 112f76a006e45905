"""`sap export --format sharegpt|hf`: LLaMA-Factory ShareGPT rows round-trip every call and result; the HF dataset
loads back with the same rows and carries a dataset card with the run config and statistics."""
from __future__ import annotations

import json
import sys

import pytest

from sap.cli import main
from sap.export.hf import to_hf_row
from sap.export.sharegpt import sharegpt_calls, to_sharegpt


@pytest.fixture
def run(tmp_path, capsys) -> tuple[str, str, list[dict]]:
    """A stored run of store-domain records (some with parallel calls): (run id, db URL, records)."""
    db, out = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "r.jsonl"
    assert main(["synthesize", "--toolset", "store", "-n", "6", "--seed", "5", "-o", str(out), "--db", db]) == 0
    run_id = capsys.readouterr().out.split()[1]
    return run_id, db, [json.loads(line) for line in out.read_text().splitlines()]


def _record_calls(record: dict) -> list[tuple[str, dict, object]]:
    results = {m["tool_call_id"]: json.loads(m["content"]) for m in record["messages"] if m["role"] == "tool"}
    return [(tc["function"]["name"], json.loads(tc["function"]["arguments"]), results[tc["id"]])
            for m in record["messages"] for tc in m.get("tool_calls") or []]


def test_sharegpt_export_round_trips_calls_and_results_in_llama_factory_order(run, tmp_path, capsys):
    run_id, db, records = run
    out = tmp_path / "sg.jsonl"
    assert main(["export", run_id, "-o", str(out), "--format", "sharegpt", "--db", db]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == [r["id"] for r in records]
    assert any(isinstance(json.loads(t["value"]), list) for r in rows for t in r["conversations"]
               if t["from"] == "function_call")  # a parallel group is one function_call turn
    for row, record in zip(rows, records):
        assert sharegpt_calls(row) == _record_calls(record) and _record_calls(record)
        roles = [t["from"] for t in row["conversations"]]
        assert all(r in ("human", "observation") for r in roles[0::2])
        assert all(r in ("function_call", "gpt") for r in roles[1::2])
        assert roles[-1] == "gpt" and roles.count("human") == sum(m["role"] == "user" for m in record["messages"])
        assert json.loads(row["tools"]) == [t["function"] for t in record["tools"]]
        assert row["system"] == record["messages"][0]["content"]
    assert to_sharegpt(records[0]) == rows[0]


def test_hf_dataset_loads_back_with_the_same_rows_and_a_card(run, tmp_path, capsys):
    datasets = pytest.importorskip("datasets", reason="the hf extra (datasets) is not installed")
    run_id, db, records = run
    out = tmp_path / "ds"
    assert main(["export", run_id, "-o", str(out), "--format", "hf", "--db", db]) == 0
    loaded = datasets.load_from_disk(str(out))
    assert loaded.to_list() == [to_hf_row(r) for r in records]
    first = loaded[0]
    assert json.loads(first["tools"]) == records[0]["tools"]
    assert json.loads(first["meta"])["seed"] == records[0]["meta"]["seed"]
    call = next(tc for m in first["messages"] for tc in m["tool_calls"] or [])
    assert isinstance(json.loads(call["function"]["arguments"]), dict)
    card = (out / "README.md").read_text()
    assert f'"run": "{run_id}"' in card and '"seed": 5' in card
    args = sum(len(p["args"]) for r in records for p in r["provenance"])
    assert f'"arguments": {args}' in card and "tag_distribution" in card


def test_hf_export_without_datasets_is_one_line_naming_the_extra(run, tmp_path, capsys, monkeypatch):
    run_id, db, _ = run
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets now raises ImportError
    assert main(["export", run_id, "-o", str(tmp_path / "ds"), "--format", "hf", "--db", db]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sap-synth[hf]" in err
    assert not (tmp_path / "ds").exists()
