"""Records are streamed from the run database (RunStore.iter_records), never loaded all at once, by the `-o` writes,
the run summary, every export format and the API's Run.records; bench/memory_export.py measures the memory this
saves."""
from __future__ import annotations

import json
from collections import Counter

import pytest

import sap
from sap.cli import main
from sap.export.sharegpt import to_sharegpt
from sap.provenance.stats import dataset_stats
from sap.runs.tally import RecordTally
from sap.store import RunStore


@pytest.fixture
def no_bulk_load(monkeypatch):
    """Make loading a whole run's records at once fail, so only streamed reads work."""
    def records(self, run_id):
        raise AssertionError(f"run {run_id}: every record loaded at once")

    monkeypatch.setattr(RunStore, "records", records)


def test_iter_records_gives_the_accepted_records_in_slot_order_across_batches(tmp_path, capsys):
    db, out = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "r.jsonl"
    assert main(["synthesize", "--toolset", "store", "-n", "7", "--seed", "4", "-o", str(out), "--db", db]) == 0
    run_id = capsys.readouterr().out.split()[1]
    store = RunStore(db)
    loaded = store.records(run_id)
    assert len(loaded) == 7
    for batch in (1, 3, 100):
        assert list(store.iter_records(run_id, batch=batch)) == loaded
    assert list(store.iter_records("run-none")) == []


def test_output_summary_and_exports_stream_the_run(tmp_path, capsys, no_bulk_load):
    db, out = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "r.jsonl"
    assert main(["synthesize", "--toolset", "store", "-n", "9", "--seed", "6", "-o", str(out), "--db", db]) == 0
    summary = capsys.readouterr().out
    run_id = summary.split()[1]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 9
    stats = dataset_stats(records)  # the summary's figures are those `sap stats` gives for the written file
    assert f"P_f rate {stats['fallback_rate']:.1%} of {stats['arguments']} arguments" in summary
    kinds = Counter(r["meta"]["kind"] for r in records)
    assert "kinds: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) in summary

    openai, sharegpt = tmp_path / "o.jsonl", tmp_path / "s.jsonl"
    assert main(["export", run_id, "-o", str(openai), "--format", "openai", "--db", db]) == 0
    assert main(["export", run_id, "-o", str(sharegpt), "--format", "sharegpt", "--db", db]) == 0
    assert "9 records of" in capsys.readouterr().out
    assert openai.read_bytes() == out.read_bytes()
    assert [json.loads(line) for line in sharegpt.read_text().splitlines()] == [to_sharegpt(r) for r in records]

    for fmt in ("messages", "parquet", "hf"):  # the carded formats stream too, to the same files as from the JSONL
        streamed, loaded = tmp_path / f"{fmt}-run", tmp_path / f"{fmt}-file"
        assert main(["export", run_id, "-o", str(streamed), "--format", fmt, "--split", "a=0.5,b=0.5", "--db", db]) == 0
        assert main(["export", str(out), "-o", str(loaded), "--format", fmt, "--split", "a=0.5,b=0.5"]) == 0
        files = sorted(p.relative_to(streamed) for p in streamed.rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(loaded) for p in loaded.rglob("*") if p.is_file())
        for name in files:
            if name.suffix in (".jsonl", ".parquet", ".arrow"):
                assert (streamed / name).read_bytes() == (loaded / name).read_bytes(), name
    handle = sap.resume(run_id, db=db)  # the API's records come from the database as they are read
    assert handle.records == records and handle.records[-1] == records[-1] and len(handle) == 9

    written = out.read_bytes()
    out.write_text(out.read_text().splitlines()[0] + "\n")  # resume brings a cut -o file back to the full run
    assert main(["resume", run_id, "--db", db, "-o", str(out)]) == 0
    assert out.read_bytes() == written


def test_tally_counts_truncated_kinds_rewrites_and_fallbacks():
    def record(kind, tags, **meta):
        return {"meta": {"kind": kind, **meta},
                "provenance": [{"args": {f"a{i}": {"tag": tag} for i, tag in enumerate(tags)}}]}

    tally = RecordTally.of(iter([record("base", ["fallback", "prev_output"], truncated=True),
                                 record("miss_param", ["fallback"], rewrite_rejection="kept base"),
                                 record("base", [])]))
    assert (tally.records, tally.truncated, tally.unkept_rewrites) == (3, 1, 1)
    assert tally.kinds == {"base": 2, "miss_param": 1}
    assert (tally.arguments, tally.fallbacks, tally.fallback_rate) == (3, 2, 2 / 3)
    assert RecordTally.of([]).fallback_rate == 0.0
