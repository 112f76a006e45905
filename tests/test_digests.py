"""Regression digests of `sap synthesize` on every built-in toolset: the records a fixed command writes must stay
byte-identical (sha256 per line, and the line count), e.g. across a refactor of the package layout.

Each case of tests/data/record_digests.json holds the exact CLI arguments (placeholders {db} and {output} are a
fresh SQLite file and JSONL file in the test's temporary directory) and the digests of the JSONL output and of its
companion OUTPUT.rejections.jsonl. The mix asks for base, miss_param and miss_func records, so the MissParam and
MissFunc rewrites are covered (the default --mix is base=1). All three were regenerated in the session of 2026-12-07
(intros tied to the tasks they are about; a place named by its city; a preparation said in an imperative wording; a
withheld value said last after a colon left out with its clause; "please" once a message; travel's destination
searches for places it serves, a search told from another by the city it found; a login said as what was done),
and again in the session of 2026-12-07 after ee8f6ca (replies name a flight by its number, a place by its city, a
profile by its person; a search's reply is not led by what it was asked; an update says the value it set; the
same finding of two calls told once; travel's places and flights have their airport codes and flight numbers as
ids; a field that names the thing is not what a message about the thing asked for; "an economy seat"; a value
stated ahead never "in a bit", two such notes not opened alike; an update without a status
says the value it set; a hidden tool refused by what it does, not every step of its docstring; a room a later turn
points at said by its room type; the customer's own account told as "you"; a result a later turn points at still gives its
answer; "a seat in economy", never "a first seat"); rejections as before.

Nothing is normalized: every field of every record and rejection line is compared byte for byte. No field is
non-deterministic at --concurrency 1 (the default): two runs, and runs with other PYTHONHASHSEED values and working
directories, wrote identical files. What does vary from run to run (the run id `run-<random hex>`, the created and
lease timestamps, the worker name host:pid#n) lives only in the run database and in the CLI's stdout, neither of
which is compared. `meta.sap_version` is in every record: bumping the version changes every digest, on purpose.

Regenerate only when the output is meant to change:  SAP_REGEN_DIGESTS=1 python -m pytest tests/test_digests.py
(each case is run twice and must agree before the file is written).
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from cli_fixtures import DATA, assert_same_digests, fill, git_head, output_digests, sap, write_json

DIGESTS = DATA / "record_digests.json"
MIX = "base=0.6,miss_param=0.2,miss_func=0.2"
CASES = {name: ["synthesize", "--toolset", name, "-n", "20", "--seed", "7", "--mix", MIX,
                "--db", "sqlite:///{db}", "-o", "{output}"] for name in ("filesystem", "store", "travel")}


def _run(args: list[str], where: Path) -> tuple[dict, Path]:
    where.mkdir(parents=True)
    output = where / "out.jsonl"
    sap(*fill(args, db=str(where / "run.db"), output=str(output)), cwd=where)
    return output_digests(output), output


def _kinds(output: Path) -> dict[str, int]:
    """How many records of each meta.kind, and how many requested rewrites were not kept (for the reader)."""
    counts: dict[str, int] = {}
    for line in output.read_text().splitlines():
        meta = json.loads(line)["meta"]
        for key in (meta["kind"], "rewrite_not_kept" if meta.get("rewrite_rejection") else None):
            if key:
                counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def _regenerate() -> None:
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in CASES.items():
            (first, output), (second, _) = (_run(args, Path(tmp) / f"{name}-{i}") for i in (1, 2))
            assert first == second, f"{name}: two runs of the same command wrote different files"
            cases.append({"name": name, "args": args, "kinds": _kinds(output), **first})
    write_json(DIGESTS, {"about": "sha256 of each line `sap synthesize` writes with these arguments (records, then "
                                  "OUTPUT.rejections.jsonl), checked by tests/test_digests.py; regenerate with "
                                  "SAP_REGEN_DIGESTS=1 python -m pytest tests/test_digests.py",
                         "generated_by": git_head(),
                         "placeholders": {"{db}": "a new SQLite file", "{output}": "the JSONL file to write"},
                         "cases": cases})


if os.environ.get("SAP_REGEN_DIGESTS") == "1":
    _regenerate()


def _cases() -> list[dict]:
    return json.loads(DIGESTS.read_text())["cases"]


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["name"])
def test_synthesize_writes_the_recorded_bytes(case, tmp_path):
    got, _ = _run(case["args"], tmp_path / case["name"])
    assert got["records"]["count"] > 0
    assert_same_digests(got, case, f"sap {' '.join(case['args'])}")
