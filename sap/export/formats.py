"""The export formats, one table: each format's name, help text, whether it writes a file or a directory (then with
splits and a dataset card, or BFCL's own layout), and its writer (which imports its own dependencies only when
used)."""
from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sap.export.splits import NO_SPLIT, split_records
from sap.jsonutil import write_jsonl

STDOUT = "-"


@dataclass(frozen=True)
class ExportOptions:
    """What a writer may need besides the records: the BFCL file name, the dataset card's settings (a callable: only
    the formats with a card read it), the splits' shares and the data's license."""

    name: str | None = None
    card: Callable[[], dict[str, Any]] = dict
    split: dict[str, float] = field(default_factory=lambda: dict(NO_SPLIT))
    license: str = "unknown"


@dataclass(frozen=True)
class ExportFormat:
    """One export format: its name and help text, whether its output is a directory (else a JSONL file), and the
    writer that writes records to the output and says what it wrote; a `carded` format writes a directory of splits
    with a dataset card (README.md)."""

    name: str
    help: str
    directory: bool
    write: Callable[[list[dict[str, Any]], str, ExportOptions], str]
    carded: bool = False


def write_rows(output: str, rows: Iterable[dict[str, Any]]) -> None:
    """JSONL rows to the file `output` (atomically), or to standard output for `-`."""
    if output != STDOUT:
        write_jsonl(output, rows)
        return
    for row in rows:
        sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _write_card(out: Path, splits: dict[str, list[dict[str, Any]]], options: ExportOptions,
                data_files: dict[str, str] | None, columns: str, load: str,
                features: dict[str, str] | None = None) -> None:
    """README.md, the dataset card, in the export directory `out`."""
    from sap.export.card import dataset_card

    card = dataset_card(splits, options.card(), license=options.license, data_files=data_files, columns=columns,
                        load=load, features=features)
    (out / "README.md").write_text(card, encoding="utf-8")


def _written(output: str, fmt: str, splits: dict[str, list[dict[str, Any]]]) -> str:
    """What a carded writer wrote: `out (messages: train 90, val 10) and out/README.md`."""
    sizes = ", ".join(f"{name} {len(rows)}" + ("" if rows else " (no file)") for name, rows in splits.items())
    return f"{output} ({fmt}: {sizes}) and {Path(output) / 'README.md'}"


def _write_split_files(records: list[dict[str, Any]], output: str, options: ExportOptions, fmt: str, suffix: str,
                       write: Callable[[Path, list[dict[str, Any]]], None], columns: str, load: str,
                       features: dict[str, str] | None = None) -> str:
    """One file NAME.`suffix` per non-empty split (written by `write`), then the card naming them as its splits (and
    the columns' `features`, if given)."""
    splits = split_records(records, options.split)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    files = {name: f"{name}.{suffix}" for name, rows in splits.items() if rows}
    for name, path in files.items():
        write(out / path, splits[name])
    _write_card(out, splits, options, files, columns, load.format(dir=out.name), features)
    return _written(output, fmt, splits)


def _write_openai(records: list[dict[str, Any]], output: str, options: ExportOptions) -> str:
    """sap's own records as they are."""
    write_rows(output, records)
    return f"{output} (openai)"


def _write_sharegpt(records: list[dict[str, Any]], output: str, options: ExportOptions) -> str:
    """LLaMA-Factory ShareGPT rows."""
    from sap.export.sharegpt import to_sharegpt

    write_rows(output, (to_sharegpt(r) for r in records))
    return f"{output} (sharegpt)"


def _write_messages(records: list[dict[str, Any]], output: str, options: ExportOptions) -> str:
    """A directory of NAME.jsonl files of {messages, tools} rows, one per split, with the dataset card."""
    from sap.export.messages import to_messages_row

    return _write_split_files(
        records, output, options, "messages", "jsonl", lambda path, rows: write_jsonl(path, [to_messages_row(r) for r in rows]),
        "`messages` (OpenAI chat messages; tool-call `arguments` are JSON strings), `tools` (OpenAI function "
        "schemas offered at the first turn) and, in MissFunc rows only, `tools_added` ([{turn, tools}]: the tools that "
        "come back at that turn, also handed over by a system message there)",
        'import datasets\nds = datasets.load_dataset("{dir}")  # this directory, or its name on the Hub',
        # declared rather than inferred: every message and tool reads back as its own object, whatever keys others have
        {"messages": "list: json", "tools": "list: json", "tools_added": "list: json"})


def _write_trl(records: list[dict[str, Any]], output: str, options: ExportOptions) -> str:
    """A directory of NAME.jsonl files of TRL environment rows (the reset arguments), one per split, with the card."""
    from sap.envs.trl import trl_rows

    return _write_split_files(
        records, output, options, "trl", "jsonl", lambda path, rows: write_jsonl(path, trl_rows(rows)),
        "`prompt` (the system message and the first user message), `task_id`, `task` (the whole sap record as JSON "
        "text: what each environment's `reset(task=...)` plays, later user turns and ground truth included) and "
        "`environment` (the tool group: the key of `sap.envs.trl.trl_factory`'s classes)",
        'import datasets\nfrom sap.envs.trl import env_reward, trl_factory\n'
        'ds = datasets.load_dataset("{dir}", split="train")\n'
        'GRPOTrainer(model, train_dataset=ds, environment_factory=trl_factory(ds), reward_funcs=[env_reward("progress")])')


def _write_parquet(records: list[dict[str, Any]], output: str, options: ExportOptions) -> str:
    """A directory of NAME.parquet files of the hf rows, one per split, with the dataset card."""
    from sap.export.hf import ROW_COLUMNS, hf_dataset, require_datasets

    require_datasets()  # before the directory is made

    return _write_split_files(records, output, options, "parquet", "parquet",
                              lambda path, rows: hf_dataset(rows).to_parquet(str(path)), ROW_COLUMNS,
                              'import datasets\nds = datasets.load_dataset("{dir}")  # or pyarrow.parquet.read_table')


def _write_hf(records: list[dict[str, Any]], output: str, options: ExportOptions) -> str:
    """A Hugging Face datasets directory (a Dataset, or a DatasetDict of the splits) with its dataset card."""
    from sap.export.hf import ROW_COLUMNS, hf_dataset, require_datasets

    datasets = require_datasets()  # HFUnavailable (a SapError) names the missing extra
    splits = split_records(records, options.split)
    out = Path(output)
    if options.split == NO_SPLIT:
        hf_dataset(records).save_to_disk(str(out))
    else:
        # a split with no records is left out, as in the other formats (an empty saved split does not load)
        datasets.DatasetDict({name: hf_dataset(rows) for name, rows in splits.items() if rows}).save_to_disk(str(out))
    _write_card(out, splits, options, None, ROW_COLUMNS,
                f'import datasets\nds = datasets.load_from_disk("{out.name}")')
    return _written(output, "hf", splits)


def _write_bfcl(records: list[dict[str, Any]], output: str, options: ExportOptions) -> str:
    """BFCL's question and possible_answer files (records over built-in `bfcl/...` toolsets only)."""
    from sap.export.bfcl import write_bfcl
    from sap.toolsets import load_toolset

    questions, answers = write_bfcl(records, Path(output), options.name, load_toolset)
    return f"{questions} and {answers}"


def _write_verl(records: list[dict[str, Any]], output: str, options: ExportOptions) -> str:
    """verl's RL dataset parquet, with the ground truth sap.rewards.verl.compute_score reads."""
    from sap.export.verl import write_verl_parquet

    write_verl_parquet(records, output)  # MissingExtra (a SapError) names the missing extra
    return f"{output} (verl)"


FORMATS: dict[str, ExportFormat] = {f.name: f for f in (
    ExportFormat("openai", "sap's JSONL records (OpenAI messages + provenance, initial state, meta)", False,
                 _write_openai),
    ExportFormat("messages", "a directory of SPLIT.jsonl files of {messages, tools} rows for OpenAI fine-tuning, "
                 "TRL or datasets.load_dataset(DIR), with a dataset card", True, _write_messages, carded=True),
    ExportFormat("sharegpt", "LLaMA-Factory ShareGPT JSONL", False, _write_sharegpt),
    ExportFormat("hf", "a Hugging Face datasets directory (save_to_disk; a DatasetDict with --split) with a dataset "
                 "card (extra hf)", True, _write_hf, carded=True),
    ExportFormat("parquet", "a directory of SPLIT.parquet files of the hf rows with a dataset card (extra hf)", True,
                 _write_parquet, carded=True),
    ExportFormat("bfcl", "BFCL v4 multi-turn question file DIR/<name>.json and DIR/possible_answer/<name>.json",
                 True, _write_bfcl),
    ExportFormat("trl", "a directory of SPLIT.jsonl files of TRL GRPOTrainer rows (prompt, task, environment) for "
                 "sap.envs.trl.trl_factory environments, with a dataset card", True, _write_trl, carded=True),
    ExportFormat("verl", "verl RL dataset parquet (prompt, reward_model.ground_truth for sap.rewards.verl, "
                 "extra_info; extra verl)", False, _write_verl),
)}
