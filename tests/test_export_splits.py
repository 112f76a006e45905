"""`sap export --split` places each record by the SHA-256 of its id alone (the same split on every export, for a
subset and for a grown dataset), and the dataset card says what a reader needs (license, sizes, toolsets, kinds,
provenance shares, versions, settings) without naming a local path."""
from __future__ import annotations

import hashlib
import json

import pytest

from sap.cli import main
from sap.errors import UsageError
from sap.export.card import local_path_free
from sap.export.splits import parse_split, split_of, split_records


@pytest.fixture(scope="module")
def records_file(tmp_path_factory) -> tuple[str, list[dict]]:
    """Eight store records in a JSONL file under an absolute path, shared by this module's exports: (file, records)."""
    tmp_path = tmp_path_factory.mktemp("records")
    out = tmp_path / "data.jsonl"
    assert main(["synthesize", "--toolset", "store", "-n", "8", "--seed", "2", "-o", str(out),
                 "--db", f"sqlite:///{tmp_path / 'runs.db'}", "-q"]) == 0
    return str(out), [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.parametrize("text, words", [
    ("train=0.9,val=0.2", "add up to 1.1"), ("train=0.9,train=0.1", "given twice"), ("train=x,val=1", "not a number"),
    ("train", "NAME=SHARE"), ("a b=0.5,c=0.5", "NAME=SHARE"), ("train=0,val=1", "above 0")])
def test_a_bad_split_is_refused_naming_the_flag_and_the_value(text, words):
    with pytest.raises(UsageError, match="--split") as err:
        parse_split(text)
    assert words in str(err.value)


def test_a_records_split_depends_on_its_id_alone():
    shares = parse_split("train=0.9,val=0.1")
    ids = [f"run-{k:x}-{k}" for k in range(20_000)]
    placed = [split_of(i, shares) for i in ids]
    assert placed == [split_of(i, dict(shares)) for i in ids]  # stable across calls
    assert 0.88 < placed.count("train") / len(ids) < 0.92  # the shares hold over many ids
    # a dataset grown by more records, or cut to a subset, leaves every record in its split
    rows = [{"id": i} for i in ids]
    whole = split_records(rows, shares)
    part = split_records(rows[5_000:7_000], shares)
    assert all(r in whole[name] for name, rows_ in part.items() for r in rows_)
    # the rule is pinned: a change of it would move records of published datasets between splits
    top_bit = [hashlib.sha256(f"r{k}".encode()).digest()[0] >= 128 for k in range(16)]
    assert [split_of(f"r{k}", {"a": 0.5, "b": 0.5}) for k in range(16)] == ["b" if b else "a" for b in top_bit]


def test_exports_of_a_subset_and_repeated_exports_keep_each_records_split(records_file, tmp_path, capsys):
    path, records = records_file
    assert main(["export", path, "-o", str(tmp_path / "all"), "--format", "messages", "--split", "tr=0.5,te=0.5"]) == 0
    assert main(["export", path, "-o", str(tmp_path / "again"), "--format", "messages",
                 "--split", "tr=0.5,te=0.5"]) == 0
    subset = tmp_path / "subset.jsonl"
    subset.write_text("".join(json.dumps(r) + "\n" for r in records[::2]))
    assert main(["export", str(subset), "-o", str(tmp_path / "sub"), "--format", "messages",
                 "--split", "tr=0.5,te=0.5"]) == 0
    for name in ("tr", "te"):
        whole = (tmp_path / "all" / f"{name}.jsonl").read_text()
        assert (tmp_path / "again" / f"{name}.jsonl").read_text() == whole
        sub = tmp_path / "sub" / f"{name}.jsonl"
        assert all(line in whole.splitlines() for line in (sub.read_text().splitlines() if sub.exists() else []))


def test_the_card_says_license_sizes_toolsets_kinds_tags_and_versions_and_no_local_path(records_file, tmp_path,
                                                                                       capsys):
    from sap.provenance.stats import dataset_stats
    from sap.version import __version__

    path, records = records_file
    out = tmp_path / "cards"
    assert main(["export", path, "-o", str(out), "--format", "messages", "--split", "train=0.75,test=0.25",
                 "--license", "cc-by-4.0"]) == 0
    card = (out / "README.md").read_text()
    header = card.split("---")[1]
    assert "license: cc-by-4.0" in header and "- n<1K" in header
    sizes = {n: len((out / f"{n}.jsonl").read_text().splitlines()) if (out / f"{n}.jsonl").exists() else 0
             for n in ("train", "test")}
    assert sum(sizes.values()) == len(records)
    assert f"**Splits:** train {sizes['train']}, test {sizes['test']}" in card
    assert "**Toolsets:** store" in card and f"generator version {__version__}" in card
    stats = dataset_stats(records)
    kinds = ", ".join(f"{k} {v} ({v / len(records):.1%})" for k, v in stats["kind_counts"].items())
    assert f"**Record kinds:** {kinds}" in card
    assert f"**Truncated:** {sum(bool(r['meta'].get('truncated')) for r in records)} records" in card
    assert all(f"{tag} {share:.1%}" in card for tag, share in stats["tag_distribution"].items())
    for name, count in sizes.items():
        assert (f"- split: {name}\n    path: {name}.jsonl" in header) == (count > 0)
    assert str(tmp_path) not in card and '"source": "data.jsonl"' in card
    assert main(["export", path, "-o", str(tmp_path / "plain"), "--format", "parquet"]) == 0
    assert "license: unknown" in (tmp_path / "plain" / "README.md").read_text()


def test_local_paths_in_settings_are_cut_to_file_names():
    settings = {"toolset": "/home/me/domains/shop.py", "agents": {"config": "C:\\Users\\me\\agents.toml",
                "db": "sqlite:////srv/runs/sap.db"}, "keep": ["sqlite:///runs.db", "relative/x.py", 3, "openai/gpt"]}
    assert local_path_free(settings) == {"toolset": "shop.py", "agents": {"config": "agents.toml",
                                         "db": "sqlite:///sap.db"},
                                         "keep": ["sqlite:///runs.db", "relative/x.py", 3, "openai/gpt"]}


@pytest.mark.parametrize("args, words", [
    (["--format", "openai", "--split", "train=1"], "--split needs a format that writes a dataset directory"),
    (["--format", "sharegpt", "--license", "mit"], "--license needs a format"),
    (["--format", "messages", "--license", "my license"], "--license 'my license'"),
    (["--format", "messages", "--split", "train=0.5"], "add up to 0.5")])
def test_export_options_that_do_not_fit_are_refused_before_anything_is_written(records_file, tmp_path, capsys,
                                                                               args, words):
    path, _ = records_file
    out = tmp_path / "out"
    assert main(["export", path, "-o", str(out), *args]) == 2
    assert words in capsys.readouterr().err and not out.exists()


def test_a_directory_that_is_not_empty_needs_overwrite(records_file, tmp_path, capsys):
    path, _ = records_file
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    assert main(["export", path, "-o", str(out), "--format", "messages"]) == 2
    assert "--overwrite" in capsys.readouterr().err and sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert main(["export", path, "-o", str(out), "--format", "messages", "--overwrite"]) == 0
    assert (out / "notes.txt").read_text() == "keep me" and (out / "train.jsonl").exists()


@pytest.mark.parametrize("fmt, stale", [("messages", "test.jsonl"), ("parquet", "test.parquet"), ("hf", "test")])
def test_overwrite_removes_the_split_files_the_new_export_no_longer_writes(records_file, tmp_path, capsys, fmt,
                                                                          stale):
    """A re-export without --split into a directory split before: the old `test` split is gone (a reader would load
    it as data), the user's own file stays, and the directory loads as the one split."""
    import datasets

    path, records = records_file
    out = tmp_path / fmt
    assert main(["export", path, "-o", str(out), "--format", fmt, "--split", "train=0.5,test=0.5"]) == 0
    assert (out / stale).exists()
    (out / "notes.txt").write_text("keep me")
    assert main(["export", path, "-o", str(out), "--format", fmt, "--overwrite"]) == 0
    assert not (out / stale).exists() and (out / "notes.txt").read_text() == "keep me"
    if fmt == "hf":
        assert len(datasets.load_from_disk(str(out))) == len(records)  # a Dataset: no dataset_dict.json left over
        assert main(["export", path, "-o", str(out), "--format", fmt, "--split", "train=0.5,test=0.5",
                     "--overwrite"]) == 0  # and back: the Dataset's own files go
        assert not (out / "state.json").exists() and set(datasets.load_from_disk(str(out))) == {"train", "test"}
    else:
        loaded = datasets.load_dataset(str(out))
        assert set(loaded) == {"train"} and len(loaded["train"]) == len(records)
