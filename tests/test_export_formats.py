"""`sap export --format sharegpt|messages|hf|parquet`: LLaMA-Factory ShareGPT rows round-trip every call and result;
the messages, hf and parquet exports load in `datasets` (and parquet in pyarrow) as they are, with `tools` as lists of
the records' own tool objects, and carry a dataset card with the run config and statistics."""
from __future__ import annotations

import json
import sys

import pytest

from sap.cli import main
from sap.export.hf import to_hf_row
from sap.export.sharegpt import sharegpt_calls, to_sharegpt


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[str, str, list[dict]]:
    """A stored run of store-domain records (some with parallel calls), shared by this module's read-only exports:
    (run id, db URL, records)."""
    from sap import list_runs

    tmp_path = tmp_path_factory.mktemp("run")
    db, out = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "r.jsonl"
    assert main(["synthesize", "--toolset", "store", "-n", "6", "--seed", "5", "-o", str(out), "--db", db, "-q"]) == 0
    (row,) = list_runs(db)
    return row["id"], db, [json.loads(line) for line in out.read_text().splitlines()]


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


def _loaded_rows_equal_records(rows: list[dict], records: list[dict]) -> None:
    """Rows of the hf schema read back by `datasets` are the records: tools as the records' own objects (no keys of
    other tools filled in), the JSON-string columns exact to the last digit, the other columns as written."""
    assert len(rows) == len(records)
    for row, record in zip(rows, records):
        written = to_hf_row(record)
        assert row["tools"] == record["tools"] and all(isinstance(t, dict) for t in row["tools"])
        assert json.loads(row["initial_config"]) == record["initial_config"]
        assert json.loads(row["provenance"]) == record["provenance"] and json.loads(row["meta"]) == record["meta"]
        assert {k: v for k, v in row.items() if k != "tools"} == {k: v for k, v in written.items() if k != "tools"}


def test_hf_dataset_loads_back_with_the_same_rows_and_a_card(run, tmp_path, capsys):
    datasets = pytest.importorskip("datasets", reason="the hf extra (datasets) is not installed")
    run_id, db, records = run
    out = tmp_path / "ds"
    assert main(["export", run_id, "-o", str(out), "--format", "hf", "--db", db]) == 0
    loaded = datasets.load_from_disk(str(out))
    _loaded_rows_equal_records(loaded.to_list(), records)
    first = loaded[0]
    assert json.loads(first["meta"])["seed"] == records[0]["meta"]["seed"]
    call = next(tc for m in first["messages"] for tc in m["tool_calls"] or [])
    assert isinstance(json.loads(call["function"]["arguments"]), dict)
    card = (out / "README.md").read_text()
    assert f'"run": "{run_id}"' in card and '"seed": 5' in card
    args = sum(len(p["args"]) for r in records for p in r["provenance"])
    assert f'"arguments": {args}' in card and "tag_distribution" in card


@pytest.mark.parametrize("fmt", ["hf", "parquet"])
def test_hf_export_without_datasets_is_one_line_naming_the_extra(run, tmp_path, capsys, monkeypatch, fmt):
    run_id, db, _ = run
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets now raises ImportError
    assert main(["export", run_id, "-o", str(tmp_path / "ds"), "--format", fmt, "--db", db]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sap-synth[hf]" in err
    assert not (tmp_path / "ds").exists()


def test_the_export_command_takes_its_formats_and_their_help_from_the_format_table(capsys):
    from sap.export.formats import FORMATS

    with pytest.raises(SystemExit):
        main(["export", "-h"])
    help_text = "".join(capsys.readouterr().out.split())  # argparse wraps lines: compare without whitespace
    assert f"--format{{{','.join(FORMATS)}}}" in help_text
    assert all("".join(f"{f.name}: {f.help}".split()) in help_text for f in FORMATS.values())


def test_record_meta_is_the_typed_model_with_the_common_fields_first():
    import sap
    from sap.export.records import RecordMeta

    records = sap.synthesize("store", 6, seed=1, mix={"base": 0.5, "miss_func": 0.5}).records
    for record in records:
        meta = record["meta"]
        common = ["seed", "toolset", "sap_version", "rewrite_kind", "kind"] + (
            ["missed_function"] if meta["kind"] == "miss_func" else []) + ["virtual_history", "judge"]
        assert list(meta)[:len(common)] == common and meta["index"] == list(meta.values())[len(common)]
        assert json.dumps(RecordMeta.model_validate(meta).model_dump()) == json.dumps(meta)
    assert {r["meta"]["kind"] for r in records} == {"base", "miss_func"}


def _as_written(rows: list[dict]) -> list[dict]:
    """Loaded messages rows without the declared `tools_added` column where `datasets` filled it with None (rows that
    have none)."""
    return [{k: v for k, v in row.items() if k != "tools_added" or v is not None} for row in rows]


def test_messages_export_is_messages_and_tools_only_and_loads_in_datasets_as_it_is(run, tmp_path, capsys):
    datasets = pytest.importorskip("datasets", reason="the hf extra (datasets) is not installed")
    from sap.export.splits import split_of

    run_id, db, records = run
    out = tmp_path / "msgs"
    assert main(["export", run_id, "-o", str(out), "--format", "messages", "--db", db,
                 "--split", "train=0.5,test=0.5"]) == 0
    lines = {name: (out / f"{name}.jsonl").read_text().splitlines() for name in ("train", "test")}
    sizes = [len(line.encode()) for rows in lines.values() for line in rows]
    assert sum(sizes) / len(sizes) < 20_000  # a store row: the messages and 18 tool schemas (8.4 KB), no initial state
    written = {name: [json.loads(line) for line in rows] for name, rows in lines.items()}
    assert written["train"] and written["test"]
    for name, rows in written.items():
        mine = [r for r in records if split_of(r["id"], {"train": 0.5, "test": 0.5}) == name]
        assert len(rows) == len(mine)
        for row, record in zip(rows, mine):
            assert set(row) == {"messages", "tools"} and row["tools"] == record["tools"]
            assert [m["role"] for m in row["messages"]] == [m["role"] for m in record["messages"]]
            assert all(None not in m.values() for m in row["messages"])  # absent keys are left out, not null
            assert [tc for m in row["messages"] for tc in m.get("tool_calls", [])] == \
                [tc for m in record["messages"] for tc in m.get("tool_calls") or []]
    # the card names the split files; a cache of its own, since a reused pytest tmp path met stale cached rows
    loaded = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf-cache"))
    assert set(loaded) == {"train", "test"}
    for name, rows in written.items():
        # tools come back as the same objects: no keys of other tools added
        assert _as_written(loaded[name].to_list()) == rows


def test_parquet_export_loads_in_pyarrow_and_datasets_with_tools_as_lists(run, tmp_path, capsys):
    datasets = pytest.importorskip("datasets", reason="the hf extra (datasets) is not installed")
    import pyarrow.parquet as pq

    run_id, db, records = run
    out = tmp_path / "pq"
    assert main(["export", run_id, "-o", str(out), "--format", "parquet", "--db", db]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "train.parquet"]
    table = pq.read_table(out / "train.parquet")
    assert table.num_rows == len(records) and table.column("id").to_pylist() == [r["id"] for r in records]
    assert str(table.schema.field("tools").type).startswith("list<")
    _loaded_rows_equal_records(datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf-cache"))["train"].to_list(), records)


def test_hf_export_with_a_split_is_a_dataset_dict_of_the_splits(run, tmp_path, capsys):
    datasets = pytest.importorskip("datasets", reason="the hf extra (datasets) is not installed")
    from sap.export.splits import split_of

    run_id, db, records = run
    out = tmp_path / "ds"
    assert main(["export", run_id, "-o", str(out), "--format", "hf", "--db", db,
                 "--split", "a=0.5,b=0.4999999,c=0.0000001"]) == 0
    loaded = datasets.load_from_disk(str(out))
    assert set(loaded) == {"a", "b"}  # c, with no records, is left out: an empty saved split would not load
    assert [str(loaded[name].split) for name in ("a", "b")] == ["a", "b"]
    for name in ("a", "b"):
        _loaded_rows_equal_records(loaded[name].to_list(),
                                   [r for r in records if split_of(r["id"], {"a": 0.5, "b": 0.5}) == name])


def test_jsonl_formats_write_to_standard_output_with_the_summary_on_stderr(run, tmp_path, capsys):
    run_id, db, records = run
    capsys.readouterr()
    assert main(["export", run_id, "-o", "-", "--format", "sharegpt", "--db", db]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line) for line in out.splitlines()] == [to_sharegpt(r) for r in records]
    assert err.startswith(f"{len(records)} records of {run_id}")
    assert main(["export", run_id, "-o", "-", "--format", "messages", "--db", db]) == 2
    assert "writes a directory" in capsys.readouterr().err


def test_messages_rows_read_back_exactly_when_tools_differ_in_their_keys(run, tmp_path, capsys):
    datasets = pytest.importorskip("datasets", reason="the hf extra (datasets) is not installed")
    from sap.export.messages import to_messages_row

    _, _, records = run
    edited = json.loads(json.dumps(records))
    edited[0]["tools"][0]["function"]["parameters"].pop("required", None)  # a domain module's tool without it
    edited[1]["tools"][0]["function"]["strict"] = True  # and one with a key no other tool has
    src = tmp_path / "edited.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in edited))
    assert main(["export", str(src), "-o", str(tmp_path / "msgs"), "--format", "messages"]) == 0
    loaded = datasets.load_dataset(str(tmp_path / "msgs"), cache_dir=str(tmp_path / "hf-cache"))["train"]
    assert _as_written(loaded.to_list()) == [to_messages_row(r) for r in edited]
    assert "required" not in loaded[0]["tools"][0]["function"]["parameters"]
    assert "strict" not in loaded[0]["tools"][1]["function"] and loaded[1]["tools"][0]["function"]["strict"] is True
