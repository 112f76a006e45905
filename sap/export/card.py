"""The dataset card (README.md) written beside a directory export: a YAML header that `datasets.load_dataset(DIR)`
and the Hugging Face Hub read (license, size category, the split files), then counts, toolsets, record kinds,
provenance-tag shares, the generator's version, the run's settings and the `sap stats` figures. It names no local
path: an absolute path in the settings is cut to its file name."""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

from sap.provenance.stats import dataset_stats
from sap.version import __version__

SQLITE_ABSOLUTE = re.compile(r"^(?P<scheme>sqlite(\+\w+)?:///)(?P<path>/.+)$")  # sqlite:////abs/x.db


def local_path_free(value: Any) -> Any:
    """`value` with every absolute file path (POSIX, Windows, or in a `sqlite:////...` URL) cut to its file name, in
    nested dicts and lists too."""
    if isinstance(value, dict):
        return {k: local_path_free(v) for k, v in value.items()}
    if isinstance(value, list):
        return [local_path_free(v) for v in value]
    if not isinstance(value, str):
        return value
    if match := SQLITE_ABSOLUTE.match(value):
        return match["scheme"] + PurePosixPath(match["path"]).name
    if PurePosixPath(value).is_absolute() or PureWindowsPath(value).drive:
        return PureWindowsPath(value).name if PureWindowsPath(value).drive else PurePosixPath(value).name
    return value


def size_category(count: int) -> str:
    """The Hub's `size_categories` label of `count` rows."""
    for bound, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if count < bound:
            return label
    return "n>1M"


def _share_line(counts: dict[str, int], total: int) -> str:
    """`base 59 (59.0%), miss_func 21 (21.0%)`."""
    return ", ".join(f"{name} {count} ({count / total:.1%})" for name, count in counts.items()) if total else "none"


def dataset_card(records: Iterable[dict[str, Any]], sizes: dict[str, int], source: dict[str, Any], *, license: str,
                 data_files: dict[str, str] | None, columns: str, load: str,
                 features: dict[str, str] | None = None) -> str:
    """README.md of an export: `records` the exported records (read once, as a stream), `sizes` the records of each
    split, `source` the run's settings (or the source file's name), `data_files` each split's file relative to the
    card (None: a `save_to_disk` directory, which `load_dataset` does not read), `columns` a sentence on the
    columns, `load` a Python line that loads it, and `features` each column's type as the header's `dataset_info`
    spells it (`list: json`), which `load_dataset` then uses instead of inferring one."""
    toolsets: set[str] = set()
    versions: set[str] = set()
    truncated = 0

    def noted(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """The records, noting each one's toolset, generator version and truncation on the way."""
        nonlocal truncated
        for r in rows:
            meta = r.get("meta", {})
            toolsets.add(str(meta.get("toolset", "")))
            versions.add(str(meta.get("sap_version", "unknown")))
            truncated += bool(meta.get("truncated"))
            yield r

    stats = dataset_stats(noted(records))
    count = sum(sizes.values())
    header = ["---", f"license: {license}", "tags:", "- tool-use", "- function-calling", "- synthetic", "- sap",
              "task_categories:", "- text-generation", "size_categories:", f"- {size_category(count)}"]
    if features:
        header += ["dataset_info:", "  features:"]
        header += [line for name, kind in features.items() for line in (f"  - name: {name}", f"    {kind}")]
    if data_files is not None:
        header += ["configs:", "- config_name: default", "  data_files:"]
        header += [line for name, path in data_files.items() for line in (f"  - split: {name}", f"    path: {path}")]
    split_sizes = ", ".join(f"{name} {size}" for name, size in sizes.items())
    tags = ", ".join(f"{k} {v:.1%}" for k, v in stats["tag_distribution"].items()) or "none"
    toolset_names, version_names = sorted(toolsets), sorted(versions)
    return "\n".join(header + [
        "---", "",
        f"# sap dataset: {', '.join(toolset_names) or '(no records)'}", "",
        f"{count} multi-turn tool-use dialogues synthesized by sap (generator version "
        f"{', '.join(version_names) or __version__}; exported by sap {__version__}). Every tool-call argument carries an "
        "executor-verified provenance tag saying where its value came from.", "",
        f"- **License:** {license}" + (" (not stated at export: pass `--license`)" if license == "unknown" else ""),
        f"- **Splits:** {split_sizes} (a record's split is fixed by the SHA-256 of its id)",
        f"- **Toolsets:** {', '.join(toolset_names) or 'none'}",
        f"- **Record kinds:** {_share_line(stats['kind_counts'], count)}",
        f"- **Truncated:** {truncated} records end at a turn "
        "whose call kept failing (`meta.truncated`; the turns before it replay)",
        f"- **Arguments:** {stats['arguments']}; provenance tags: {tags}",
        f"- **Columns:** {columns}", "",
        "```python", load, "```", "",
        "## Settings", "", "```json", json.dumps(local_path_free(source), indent=2, sort_keys=True, default=str),
        "```", "",
        "## Statistics (`sap stats`)", "", "```json", json.dumps(stats, indent=2, sort_keys=True), "```", ""])
