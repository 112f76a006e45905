"""Hugging Face `datasets` export (extra `hf`): one row per record with a fixed Arrow schema (tools, arguments,
initial config, provenance and meta as JSON strings) saved with `save_to_disk`, plus a dataset card (README.md)
holding the run config and the dataset statistics."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sap.provenance.stats import dataset_stats

INSTALL_HINT = "pip install 'sap-synth[hf]' (the Hugging Face datasets package)"


class HFUnavailable(ImportError):
    """The `datasets` package is not installed."""


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
                              "tools": text, "initial_config": text, "provenance": text, "meta": text})


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def to_hf_row(record: dict[str, Any]) -> dict[str, Any]:
    """A record as a dataset row: messages as structs (arguments and tool results are JSON strings already),
    tools / initial_config / provenance / meta as JSON strings (the seed, a 64-bit unsigned integer, stays in
    meta), and id, toolset and kind as plain columns to filter on."""
    meta = record.get("meta", {})
    return {"id": str(record["id"]), "toolset": str(meta.get("toolset", "")), "kind": str(meta.get("kind", "base")),
            "messages": [_message(m) for m in record["messages"]],
            "tools": _dump(record.get("tools", [])), "initial_config": _dump(record.get("initial_config", {})),
            "provenance": _dump(record.get("provenance", [])), "meta": _dump(meta)}


def dataset_card(records: list[dict[str, Any]], config: dict[str, Any]) -> str:
    """README.md of the saved dataset: YAML header, the run config and the statistics as JSON blocks."""
    stats = dataset_stats(records)
    toolsets = sorted({str(r.get("meta", {}).get("toolset", "")) for r in records}) or ["(none)"]
    tags = ", ".join(f"{k} {v:.1%}" for k, v in stats["tag_distribution"].items())
    return "\n".join([
        "---", "tags:", "- tool-use", "- synthetic", "- sap", "---", "",
        f"# sap dataset: {', '.join(toolsets)}", "",
        f"{len(records)} multi-turn tool-use trajectories synthesized by sap; every tool argument carries an "
        "executor-verified provenance tag (column `provenance`, JSON). Columns `tools`, `initial_config`, "
        "`provenance` and `meta` are JSON strings; tool-call `arguments` inside `messages` are JSON strings too.", "",
        f"Arguments: {stats['arguments']}; tags: {tags}.", "",
        "## Run config", "", "```json", json.dumps(config, indent=2, sort_keys=True, default=str), "```", "",
        "## Statistics", "", "```json", json.dumps(stats, indent=2, sort_keys=True), "```", ""])


def save_hf_dataset(records: list[dict[str, Any]], out_dir: str | Path, config: dict[str, Any]) -> Path:
    """Save `records` as a `datasets.Dataset` in `out_dir` (load it with `datasets.load_from_disk`) with a
    dataset card; HFUnavailable naming the install command when `datasets` is missing."""
    try:
        import datasets
    except ImportError as exc:
        raise HFUnavailable(f"--format hf needs the datasets package: {INSTALL_HINT}") from exc
    out = Path(out_dir)
    datasets.Dataset.from_list([to_hf_row(r) for r in records], features=_features(datasets)).save_to_disk(str(out))
    (out / "README.md").write_text(dataset_card(records, config), encoding="utf-8")
    return out
