"""`sap export --push-to-hub NAME` pushes an export through `datasets`' own push_to_hub (token from HF_TOKEN or
--hub-token-env, --private), against LocalHub (tests/hub_server.py), a local server playing the Hub endpoints
huggingface_hub calls: the commits hold the split files as datasets writes them and sap's dataset card with
datasets' configs merged in; the token reaches the Hub and is never printed."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hub_server import LocalHub
from sap.cli import main

TOKEN = "hf_local-test-token-0042"


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> Path:
    """Eight store records in a JSONL file."""
    tmp = tmp_path_factory.mktemp("hub")
    out = tmp / "data.jsonl"
    assert main(["synthesize", "--toolset", "store", "-n", "8", "--seed", "2", "-o", str(out),
                 "--db", f"sqlite:///{tmp / 'runs.db'}", "-q"]) == 0
    return out


def export(hub: LocalHub, tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`sap export ARGS` in a subprocess whose Hub is `hub` (huggingface_hub reads HF_ENDPOINT when imported);
    uploads go by the LFS protocol's basic transfer, which LocalHub plays, not by Xet storage."""
    home = tmp_path / "hf_home"
    return subprocess.run([sys.executable, "-m", "sap.cli", "export", *args], capture_output=True, text=True,
                          timeout=600, env={**{k: v for k, v in os.environ.items() if not k.startswith("HF_")},
                                            "HF_ENDPOINT": hub.endpoint, "HF_HUB_DISABLE_XET": "1",
                                            "HF_HOME": str(home),
                                            "HF_DATASETS_CACHE": str(home / "datasets"), **env})


def rows_of(files: dict[str, bytes], prefix: str) -> int:
    """The rows of the Parquet files under `prefix`."""
    return sum(pq.read_table(io.BytesIO(data)).num_rows for path, data in files.items() if path.startswith(prefix))


def test_a_messages_export_with_splits_is_pushed_private_with_its_card(records, tmp_path):
    with LocalHub() as hub:
        done = export(hub, tmp_path, str(records), "-o", str(tmp_path / "out"), "--format", "messages",
                      "--split", "train=0.5,test=0.5", "--license", "cc-by-4.0", "--push-to-hub", "me/sap-store",
                      "--private", env={"HF_TOKEN": TOKEN})
        assert done.returncode == 0, done.stderr
        files = hub.repos["me/sap-store"]
        assert hub.private["me/sap-store"] and hub.tokens == {TOKEN}
        assert [line for line in hub.unserved if "/api/agent-harnesses" not in line] == []  # an optional registry
    assert "pushed to the Hub as me/sap-store (private)" in done.stdout
    assert TOKEN not in done.stdout + done.stderr
    local = {name: len((tmp_path / "out" / f"{name}.jsonl").read_text().splitlines()) for name in ("train", "test")}
    assert {name: rows_of(files, f"data/{name}-") for name in local} == local and sum(local.values()) == 8
    card = files["README.md"].decode()
    assert "license: cc-by-4.0" in card and "# sap dataset: store" in card  # sap's card, kept
    assert "path: data/train-*" in card and "path: train.jsonl" not in card  # datasets' configs, merged in
    assert sorted(files) == ["README.md", *sorted(p for p in files if p.startswith("data/"))]


def test_an_hf_export_is_pushed_with_the_token_the_flag_names(records, tmp_path):
    with LocalHub() as hub:
        done = export(hub, tmp_path, str(records), "-o", str(tmp_path / "hf"), "--format", "hf", "--push-to-hub",
                      "me/sap-hf", "--hub-token-env", "MY_HUB_TOKEN", env={"MY_HUB_TOKEN": TOKEN})
        assert done.returncode == 0, done.stderr
        files = hub.repos["me/sap-hf"]
        assert not hub.private["me/sap-hf"] and hub.tokens == {TOKEN}
    assert rows_of(files, "data/train-") == 8 and "# sap dataset: store" in files["README.md"].decode()


@pytest.mark.parametrize("args, words", [
    (["--format", "messages", "--push-to-hub", "me/x"], "environment variable HF_TOKEN"),
    (["--format", "openai", "--push-to-hub", "me/x"], "--push-to-hub needs --format hf, parquet, messages"),
    (["--format", "messages", "--push-to-hub", "no-namespace"], "NAMESPACE/NAME"),
    (["--format", "messages", "--private"], "--private goes with --push-to-hub")])
def test_push_options_are_checked_before_anything_is_written(records, tmp_path, capsys, monkeypatch, args, words):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    out = tmp_path / "never"
    assert main(["export", str(records), "-o", str(out), *args]) == 2
    assert words in capsys.readouterr().err and not out.exists()
