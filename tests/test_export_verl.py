"""`sap export --format verl`: the parquet reads back in verl's RL dataset layout, and compute_score, reading the
row's ground truth, scores the record's own calls 1.0 and a wrong answer lower."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sap.api import synthesize
from sap.export.verl import verl_row
from sap.jsonutil import write_jsonl
from sap.rewards.verl import compute_score

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def records():
    return synthesize("store", 6, seed=3).records


def _gold_answer(record: dict) -> str:
    """The record's own assistant tool calls as Hermes <tool_call> blocks, the way a policy would write them."""
    return "\n".join(f"<tool_call>{json.dumps({'name': tc['function']['name'], 'arguments': json.loads(tc['function']['arguments'])})}</tool_call>"
                     for m in record["messages"] if m["role"] == "assistant" for tc in m.get("tool_calls") or [])


def test_cli_export_reads_back_and_compute_score_agrees(records, tmp_path: Path):
    source, out = tmp_path / "records.jsonl", tmp_path / "train.parquet"
    write_jsonl(source, records)
    done = subprocess.run([sys.executable, "-m", "sap.cli", "export", str(source), "--format", "verl", "-o", str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == len(records)
    assert set(rows[0]) == {"data_source", "prompt", "ability", "reward_model", "agent_name", "extra_info"}
    for i, (row, record) in enumerate(zip(rows, records)):
        assert row["data_source"] == "sap/store" and row["ability"] == "tool_use"
        assert row["reward_model"]["style"] == "rule"
        assert row["prompt"][-1] == {"role": "user", "content": next(m["content"] for m in record["messages"]
                                                                     if m["role"] == "user")}
        info = row["extra_info"]
        assert (info["task_id"], info["index"]) == (record["id"], i)
        assert json.loads(info["tools"]) == record["tools"]
        assert json.loads(info["initial_config"]) == record["initial_config"]
        users = [m["content"] for m in record["messages"] if m["role"] == "user"]
        assert info["user_turns"] == users[1:]
        gold = compute_score(row["data_source"], _gold_answer(record), row["reward_model"]["ground_truth"], info)
        assert gold["score"] == 1.0, record["id"]
    # the same row from the API; a record with a dependent call loses reward when it is answered backwards
    record = next(r for r in records if any(p["tag"] == "prev_output" for c in r["provenance"]
                                            for p in c["args"].values()))
    row = verl_row(record["id"], record)
    calls = _gold_answer(record).split("\n")
    backwards = compute_score("sap", "\n".join(reversed(calls)), row["reward_model"]["ground_truth"])
    assert backwards["r_atomic"] == 1.0 and backwards["r_orch"] < 1.0 and backwards["score"] < 1.0
    assert compute_score("sap", calls[0], row["reward_model"]["ground_truth"])["score"] < 1.0


def test_a_record_without_a_user_turn_is_refused_by_name(records):
    broken = {**records[0], "messages": [m for m in records[0]["messages"] if m["role"] == "system"]}
    with pytest.raises(Exception, match=f"record '{records[0]['id']}': no user message"):
        verl_row(records[0]["id"], broken)
