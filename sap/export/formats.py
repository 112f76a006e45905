"""The export formats, one table: each format's name, help text, whether it writes a file or a directory (then with
splits and a dataset card, or BFCL's own layout), and its writer (which imports its own dependencies only when
used)."""
from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sap.export.splits import NO_SPLIT, record_split
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
    write: Callable[[Iterable[dict[str, Any]], str, ExportOptions], str]
    carded: bool = False


def write_rows(output: str, rows: Iterable[dict[str, Any]]) -> None:
    """JSONL rows to the file `output` (atomically), or to standard output for `-`."""
    if output != STDOUT:
        write_jsonl(output, rows)
        return
    for row in rows:
        sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _write_card(out: Path, records: Iterable[dict[str, Any]], sizes: dict[str, int], options: ExportOptions,
                data_files: dict[str, str] | None, columns: str, load: str,
                features: dict[str, str] | None = None) -> None:
    """README.md, the dataset card, in the export directory `out` (`records` read once more, as a stream)."""
    from sap.export.card import dataset_card

    card = dataset_card(records, sizes, options.card(), license=options.license, data_files=data_files,
                        columns=columns, load=load, features=features)
    (out / "README.md").write_text(card, encoding="utf-8")


def _written(output: str, fmt: str, sizes: dict[str, int]) -> str:
    """What a carded writer wrote: `out (messages: train 90, val 10) and out/README.md`."""
    listed = ", ".join(f"{name} {size}" + ("" if size else " (no file)") for name, size in sizes.items())
    return f"{output} ({fmt}: {listed}) and {Path(output) / 'README.md'}"


class SplitRows(Protocol):
    """Where one split's rows go as the records stream by: `add` one, then `close`, or `discard` on failure."""

    def add(self, record: dict[str, Any]) -> None: ...

    def close(self) -> None: ...

    def discard(self) -> None: ...


class JsonlRows:
    """The rows of records, written one at a time to a temporary file beside `path` and renamed over it on close."""

    def __init__(self, path: Path, to_row: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.path, self.to_row = path, to_row
        self.tmp = path.with_name(f".{path.name}.tmp")
        self.file = open(self.tmp, "w", encoding="utf-8")

    def add(self, record: dict[str, Any]) -> None:
        """Write one record's row."""
        self.file.write(json.dumps(self.to_row(record), ensure_ascii=False) + "\n")

    def close(self) -> None:
        """Put the file in place."""
        self.file.close()
        os.replace(self.tmp, self.path)

    def discard(self) -> None:
        """Give the file up (an export that failed)."""
        self.file.close()
        self.tmp.unlink(missing_ok=True)


def stream_splits(records: Iterable[dict[str, Any]], shares: dict[str, float],
                  open_split: Callable[[str], SplitRows]) -> tuple[dict[str, int], dict[str, SplitRows]]:
    """Send each record to its split's rows, opened by `open_split` at the split's first record, and close them:
    the records per split (every split of `shares`, 0 for an empty one) and the closed rows of the non-empty ones.
    One pass, one record at a time."""
    sizes = {name: 0 for name in shares}
    opened: dict[str, SplitRows] = {}
    try:
        for position, record in enumerate(records):
            name = record_split(record, position, shares)
            if name not in opened:
                opened[name] = open_split(name)
            opened[name].add(record)
            sizes[name] += 1
    except BaseException:
        for rows in opened.values():
            rows.discard()
        raise
    for rows in opened.values():
        rows.close()
    return sizes, {name: opened[name] for name in shares if name in opened}


def export_dir(output: str) -> Path:
    """The directory of a carded export, made if missing, with what an earlier export wrote into it removed (a
    non-empty directory is written only with --overwrite)."""
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    for path in previous_export(out):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    return out


def previous_export(out: Path) -> list[Path]:
    """What an earlier carded export wrote into `out`, as that export declared it (nothing else there is touched):
    the split files its card's `configs` name (messages, parquet), and a `save_to_disk` layout (hf):
    dataset_dict.json with its splits' directories, or a Dataset's state.json, dataset_info.json and data files."""
    found: list[Path] = []
    card = out / "README.md"
    if card.is_file():
        text = card.read_text(encoding="utf-8")
        if text.startswith("---\n") and "\n---\n" in text:
            import yaml  # only an export over an earlier one reads its card

            try:
                header = yaml.safe_load(text[4:text.index("\n---\n")]) or {}
            except yaml.YAMLError:
                header = {}
            configs = header.get("configs") if isinstance(header, dict) else None
            for config in configs if isinstance(configs, list) else []:
                for entry in config.get("data_files") or [] if isinstance(config, dict) else []:
                    if isinstance(entry, dict) and _own_name(entry.get("path")):
                        found.append(out / entry["path"])
    splits = _json_file(out / "dataset_dict.json").get("splits", [])
    found += [out / name for name in splits if _own_name(name) and (out / name / "state.json").is_file()]
    if splits:
        found.append(out / "dataset_dict.json")
    state = _json_file(out / "state.json")
    if state.get("_data_files"):
        found += [out / f["filename"] for f in state["_data_files"] if _own_name(f.get("filename"))]
        found += [out / "state.json", out / "dataset_info.json"]
    return [path for path in found if path.exists()]


def _own_name(name: Any) -> bool:
    """Whether `name` is a plain file name (so a removal stays inside the export directory)."""
    return isinstance(name, str) and name not in ("", ".", "..") and Path(name).name == name and "\\" not in name


def _json_file(path: Path) -> dict[str, Any]:
    """A JSON object file's content; {} if it is missing or not a JSON object."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _write_openai(records: list[dict[str, Any]], output: str, options: ExportOptions) -> str:
    """sap's own records as they are."""
    write_rows(output, records)
    return f"{output} (openai)"


def _write_sharegpt(records: list[dict[str, Any]], output: str, options: ExportOptions) -> str:
    """LLaMA-Factory ShareGPT rows."""
    from sap.export.sharegpt import to_sharegpt

    write_rows(output, (to_sharegpt(r) for r in records))
    return f"{output} (sharegpt)"


def _write_jsonl_splits(records: Iterable[dict[str, Any]], output: str, options: ExportOptions, fmt: str,
                        to_row: Callable[[dict[str, Any]], dict[str, Any]], columns: str, load: str,
                        features: dict[str, str] | None = None) -> str:
    """A directory of NAME.jsonl files of `to_row` rows, one per split, with the dataset card (`load` names the
    directory as {dir})."""
    out = export_dir(output)
    sizes, _ = stream_splits(records, options.split, lambda name: JsonlRows(out / f"{name}.jsonl", to_row))
    _write_card(out, records, sizes, options, {name: f"{name}.jsonl" for name, size in sizes.items() if size},
                columns, load.format(dir=out.name), features)
    return _written(output, fmt, sizes)


def _write_messages(records: Iterable[dict[str, Any]], output: str, options: ExportOptions) -> str:
    """A directory of NAME.jsonl files of {messages, tools} rows, one per split, with the dataset card."""
    from sap.export.messages import to_messages_row

    return _write_jsonl_splits(
        records, output, options, "messages", to_messages_row,
        "`messages` (OpenAI chat messages; tool-call `arguments` are JSON strings), `tools` (OpenAI function "
        "schemas offered at the first turn) and, in MissFunc rows only, `tools_added` ([{turn, tools}]: the tools that "
        "come back at that turn, also handed over by a system message there)",
        'import datasets\nds = datasets.load_dataset("{dir}")  # this directory, or its name on the Hub',
        # declared rather than inferred: every message and tool reads back as its own object, whatever keys others have
        {"messages": "list: json", "tools": "list: json", "tools_added": "list: json"})


def _write_trl(records: Iterable[dict[str, Any]], output: str, options: ExportOptions) -> str:
    """A directory of NAME.jsonl files of TRL environment rows (the reset arguments), one per split, with the card."""
    from sap.export.trl import trl_row_maker

    return _write_jsonl_splits(
        records, output, options, "trl", trl_row_maker(),  # one maker: a tool group keeps its name across splits
        "`prompt` (the system message and the first user message), `task_id`, `task` (the whole sap record as JSON "
        "text: what each environment's `reset(task=...)` plays, later user turns and ground truth included) and "
        "`environment` (the tool group: the key of `sap.envs.trl.trl_factory`'s classes)",
        'import datasets\nfrom sap.envs.trl import env_reward, trl_factory\n'
        'ds = datasets.load_dataset("{dir}", split="train")\n'
        'GRPOTrainer(model, train_dataset=ds, environment_factory=trl_factory(ds), reward_funcs=[env_reward("progress")])')


def _write_parquet(records: Iterable[dict[str, Any]], output: str, options: ExportOptions) -> str:
    """A directory of NAME.parquet files of the hf rows, one per split, with the dataset card."""
    from sap.export.hf import ROW_COLUMNS, ArrowRows, require_datasets

    require_datasets()  # before the directory is made
    out = export_dir(output)
    sizes, _ = stream_splits(records, options.split, lambda name: ArrowRows(out / f"{name}.parquet", parquet=True))
    _write_card(out, records, sizes, options, {name: f"{name}.parquet" for name, size in sizes.items() if size},
                ROW_COLUMNS, f'import datasets\nds = datasets.load_dataset("{out.name}")  # or pyarrow.parquet.read_table')
    return _written(output, "parquet", sizes)


def _write_hf(records: Iterable[dict[str, Any]], output: str, options: ExportOptions) -> str:
    """A Hugging Face datasets directory in `save_to_disk`'s layout (a Dataset, or a DatasetDict of the splits) with
    its dataset card, each split streamed straight into its Arrow shard."""
    from sap.export.hf import ROW_COLUMNS, SavedDataset, require_datasets

    require_datasets()  # HFUnavailable (a SapError) names the missing extra, before the directory is made
    out = export_dir(output)
    if options.split == NO_SPLIT:
        sizes, splits = stream_splits(records, options.split, lambda name: SavedDataset(out, None))
        if not splits:  # no records: an empty Dataset, every column still there
            SavedDataset(out, None).close()
    else:
        # a split with no records is left out, as in the other formats (an empty saved split does not load)
        sizes, splits = stream_splits(records, options.split, lambda name: SavedDataset(out / name, name))
        (out / "dataset_dict.json").write_text(json.dumps({"splits": list(splits)}), encoding="utf-8")
    _write_card(out, records, sizes, options, None, ROW_COLUMNS,
                f'import datasets\nds = datasets.load_from_disk("{out.name}")')
    return _written(output, "hf", sizes)


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
    ExportFormat("hf", "a Hugging Face datasets directory (load_from_disk; a DatasetDict with --split) with a dataset "
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
