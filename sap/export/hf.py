"""Hugging Face `datasets` rows (extra `hf`): one row per record with a fixed schema, written in `save_to_disk`'s
layout (format hf) or as Parquet files (format parquet). `tools` is a list of JSON objects (the `datasets.Json` type: each tool
decodes to its own schema, with no keys of other tools added), so `apply_chat_template(row["messages"],
tools=row["tools"])` takes a row as it is; `initial_config`, `provenance` and `meta` are JSON strings, exact to the
last digit (a `Json` column reads its floats back a last digit off); tool-call arguments inside `messages` are JSON
strings, as in the OpenAI format."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from sap.errors import MissingExtra

INSTALL_HINT = "pip install 'sap-synth[hf]' (the Hugging Face datasets package)"
ARROW_BATCH = 50  # rows an ArrowWriter holds before it writes them (a store row is about 50 KB)
SHARD = "data-00000-of-00001.arrow"  # the name save_to_disk gives a Dataset's one Arrow shard
STATE = "state.json"  # what load_from_disk reads besides the shards and DatasetInfo's dataset_info.json


class HFUnavailable(MissingExtra):
    """The `datasets` package is not installed."""


ROW_COLUMNS = ("`id`, `toolset`, `kind`, `messages` (OpenAI chat messages, every key present; tool-call `arguments` "
               "are JSON strings), `tools` (a list of OpenAI function schemas: those offered at the first turn), and "
               "`initial_config`, `provenance` (each argument's tag and source), `meta` and `tools_added` (MissFunc: "
               "[{turn, tools}], the tools that come back at that turn, also handed over by a system message there; "
               "`[]` for other records) as JSON strings")


def _message(msg: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat message with every key present (None where absent), so all rows share one Arrow struct."""
    calls = msg.get("tool_calls")
    return {"role": msg["role"], "content": msg.get("content"),
            "tool_calls": [{"id": tc["id"], "type": tc.get("type", "function"),
                            "function": {"name": tc["function"]["name"], "arguments": tc["function"]["arguments"]}}
                           for tc in calls] if calls else None,
            "tool_call_id": msg.get("tool_call_id"), "name": msg.get("name")}


def _features(datasets: Any) -> Any:
    """The Arrow schema of the rows, fixed so that every export has the same one (empty or call-free ones too)."""
    text = datasets.Value("string")
    call = {"id": text, "type": text, "function": {"name": text, "arguments": text}}
    message = {"role": text, "content": text, "tool_calls": datasets.List(call), "tool_call_id": text, "name": text}
    return datasets.Features({"id": text, "toolset": text, "kind": text, "messages": datasets.List(message),
                              "tools": datasets.List(datasets.Json()), "initial_config": text, "provenance": text,
                              "meta": text, "tools_added": text})


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def to_hf_row(record: dict[str, Any]) -> dict[str, Any]:
    """A record as the row handed to `datasets`: messages as structs (arguments and tool results are JSON strings
    already), each tool as its JSON text (the Json type keeps the text, where it would write floats to 10 digits
    itself, and reads it back as the tool's object), initial_config / provenance / meta as JSON strings (the seed, a
    64-bit unsigned integer, stays in meta), and id, toolset and kind as plain columns to filter on."""
    meta = record.get("meta", {})
    return {"id": str(record["id"]), "toolset": str(meta.get("toolset", "")), "kind": str(meta.get("kind", "base")),
            "messages": [_message(m) for m in record["messages"]],
            "tools": [json.dumps(t, ensure_ascii=False) for t in record.get("tools", [])],
            "initial_config": _dump(record.get("initial_config", {})),
            "provenance": _dump(record.get("provenance", [])), "meta": _dump(meta),
            "tools_added": _dump(record.get("tools_added", []))}


def require_datasets() -> Any:
    """The `datasets` module, its progress bars off (an export prints its own summary); HFUnavailable naming the
    install command when it is missing."""
    try:
        import datasets
    except ImportError as exc:
        raise HFUnavailable(f"this export format needs the datasets package: {INSTALL_HINT}") from exc
    datasets.disable_progress_bars()
    return datasets


class ArrowRows:
    """`to_hf_row` rows written one record at a time to an Arrow file at `path` (datasets' ArrowWriter, ARROW_BATCH
    rows per write; with `parquet`, its ParquetWriter, which also records the features `datasets` restores), a
    split of any size in flat memory."""

    def __init__(self, path: Path, parquet: bool = False) -> None:
        from datasets.arrow_writer import ArrowWriter, ParquetWriter

        self.datasets, self.path = require_datasets(), path
        self.writer = (ParquetWriter if parquet else ArrowWriter)(features=_features(self.datasets), path=str(path),
                                                                  writer_batch_size=ARROW_BATCH)

    def add(self, record: dict[str, Any]) -> None:
        """Write one record's row."""
        self.writer.write(to_hf_row(record))

    def close(self) -> None:
        """Finish the file."""
        self.writer.finalize()
        self.writer.close()

    def discard(self) -> None:
        """Give the file up (an export that failed)."""
        self.writer.close()
        self.path.unlink(missing_ok=True)



class SavedDataset(ArrowRows):
    """A Dataset directory in `save_to_disk`'s layout, written as the rows stream in: one Arrow shard in `directory`,
    then at close the state.json and dataset_info.json `datasets.load_from_disk` reads (no copy of the rows through a
    memory map, so the memory an export takes does not grow with the records). `split` is the split name the
    loaded Dataset carries (None for a lone Dataset)."""

    def __init__(self, directory: Path, split: str | None) -> None:
        directory.mkdir(exist_ok=True)
        super().__init__(directory / SHARD)
        self.directory, self.split = directory, split

    def close(self) -> None:
        """Finish the shard, then write its state (a fingerprint from the shard's bytes) and the DatasetInfo."""
        super().close()
        digest = hashlib.sha256()
        with open(self.path, "rb") as shard:
            for block in iter(lambda: shard.read(1 << 20), b""):
                digest.update(block)
        state = {"_data_files": [{"filename": SHARD}], "_fingerprint": digest.hexdigest()[:16],
                 "_format_columns": None, "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False,
                 "_split": self.split}
        (self.directory / STATE).write_text(json.dumps(state, indent=2, sort_keys=True), encoding="utf-8")
        self.datasets.DatasetInfo(features=_features(self.datasets)).write_to_directory(str(self.directory),
                                                                                       pretty_print=True)

    def discard(self) -> None:
        """Give the shard up, and the split's directory with it when nothing else is in it."""
        super().discard()
        try:
            self.directory.rmdir()
        except OSError:
            pass
