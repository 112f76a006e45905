"""verl RL dataset export (extra `verl`): one parquet row per record in the layout of verl's RLHFDataset, with
the ground truth that `sap.rewards.verl.compute_score` reads.

Columns: `data_source` ("sap/<toolset>"), `prompt` (the system message and the first user turn, chat
messages), `ability` ("tool_use"), `reward_model` {`style`: "rule", `ground_truth`: `ground_truth_json` of the
record's calls per turn with their provenance tags and edges}, `agent_name` (verl's agent loop for the row) and
`extra_info` {`task_id`, `index`, `toolset`, `kind`, `tools` (JSON: the tools offered at the first turn),
`tools_added` (JSON: MissFunc's [{turn, tools}], the tools that come back at that turn; `[]` otherwise),
`initial_config` (JSON), `user_turns` (the later user messages, in order), `interaction_kwargs` {`name`: "sap",
`record`: the record as JSON}: what verl hands the sap interaction of sap.envs.verl to start the row's live
episode}. Nested documents are JSON strings so every row has one Arrow schema.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from itertools import islice
from pathlib import Path
from typing import Any

from sap.errors import ExportError, MissingExtra
from sap.export.records import record_to_trajectory
from sap.rewards.calls import gold_turns
from sap.rewards.verl import ground_truth_json

INSTALL_HINT = "pip install 'sap-synth[verl]' (pyarrow)"
VERL_BATCH = 50  # rows per parquet row group (a verl row holds its record's messages and ground truth)
AGENT_NAME = "tool_agent"
INTERACTION_NAME = "sap"  # the name sap.envs.verl's interaction config gives SapInteraction


def verl_row(task_id: str, record: dict[str, Any], data_source: str = "sap", index: int = 0,
             agent_name: str = AGENT_NAME) -> dict[str, Any]:
    """A verl dataset row for one sap record (see the module docstring); ExportError naming the task when the
    record has no user message."""
    traj = record_to_trajectory(record)
    messages = record.get("messages") or []
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
    if first_user is None or not traj.turns:
        raise ExportError(f"record {task_id!r}: no user message to start a verl prompt from")
    meta = record.get("meta", {})
    return {"data_source": f"{data_source}/{meta.get('toolset', '')}",
            "prompt": [{"role": m["role"], "content": m.get("content") or ""} for m in messages[:first_user + 1]],
            "ability": "tool_use",
            "reward_model": {"style": "rule", "ground_truth": ground_truth_json(gold_turns(traj))},
            "agent_name": agent_name,
            "extra_info": {"task_id": task_id, "index": index, "toolset": str(meta.get("toolset", "")),
                           "kind": str(meta.get("kind", "base")),
                           "tools": json.dumps(record.get("tools", []), ensure_ascii=False),
                           "tools_added": json.dumps(record.get("tools_added", []), ensure_ascii=False),
                           "initial_config": json.dumps(record.get("initial_config", {}), ensure_ascii=False),
                           "user_turns": [t.user_message for t in traj.turns[1:]],
                           "interaction_kwargs": {"name": INTERACTION_NAME,
                                                  "record": json.dumps(record, ensure_ascii=False)}}}


def _schema(pa: Any) -> Any:
    """The Arrow schema of the rows, fixed so that every export (an empty one too) has the same one."""
    text = pa.string()
    return pa.schema([
        ("data_source", text),
        ("prompt", pa.list_(pa.struct([("role", text), ("content", text)]))),
        ("ability", text),
        ("reward_model", pa.struct([("style", text), ("ground_truth", text)])),
        ("agent_name", text),
        ("extra_info", pa.struct([("task_id", text), ("index", pa.int64()), ("toolset", text), ("kind", text),
                                  ("tools", text), ("tools_added", text), ("initial_config", text),
                                  ("user_turns", pa.list_(text)),
                                  ("interaction_kwargs", pa.struct([("name", text), ("record", text)]))])),
    ])


def write_verl_parquet(records: Iterable[dict[str, Any]], output: str | Path) -> Path:
    """Write `records` as one verl parquet file, VERL_BATCH rows at a time as they stream by (one row group each);
    MissingExtra naming the install command without pyarrow."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise MissingExtra(f"--format verl needs pyarrow: {INSTALL_HINT}") from exc
    schema, out = _schema(pa), Path(output)
    rows = (verl_row(str(r.get("id", i)), r, index=i) for i, r in enumerate(records))
    with pq.ParquetWriter(out, schema) as writer:
        while batch := list(islice(rows, VERL_BATCH)):
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
    return out
