"""BFCL v4 multi-turn export: sap records over `bfcl/...` toolsets -> a question file and a possible_answer file."""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from sap.errors import ExportError
from sap.export.records import comeback_turns, record_to_trajectory
from sap.model import Toolset, Trajectory
from sap.toolsets.bfcl import is_bfcl_name, parse_bfcl_name

DEFAULT_NAME = "sap_multi_turn"


class BfclExportError(ExportError):
    """A record that cannot be written in BFCL's multi-turn format, named by id and the reason."""


def call_string(name: str, args: dict[str, Any]) -> str:
    """A BFCL ground-truth call: `name(key=literal, ...)`, each value a Python literal."""
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"


def _turns(traj: Trajectory) -> tuple[list[list[dict[str, str]]], list[list[str]], dict[str, list[str]]]:
    """Question turns, ground-truth turns and BFCL's missed_function of one trajectory.

    sap hides a MissFunc tool at turn k (no calls there) and hands it over in the user message of k + 1; BFCL
    says the same with an empty question at k + 1, where the tool comes back (`missed_function` {k + 1: tools}).
    MissParam needs no translation: turn k has no calls (empty ground truth), k + 1 reveals the values.
    """
    comeback = comeback_turns(traj) if traj.rewrite_kind == "miss_func" else {}
    questions, truth = [], []
    for turn in traj.turns:
        empty = turn.index in comeback
        questions.append([] if empty else [{"role": "user", "content": turn.user_message}])
        truth.append([call_string(c.name, c.args_exec) for c in turn.calls])
    return questions, truth, {str(k): list(tools) for k, tools in sorted(comeback.items())}


def to_bfcl(records: Iterable[dict[str, Any]], name: str | None,
            toolset_of: Callable[[str], Toolset]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(question entries, possible_answer entries) of sap records, ids `<name>_<i>` in record order (see
    `bfcl_entries`)."""
    pairs = list(bfcl_entries(records, name, toolset_of))
    return [q for q, _ in pairs], [a for _, a in pairs]


def bfcl_entries(records: Iterable[dict[str, Any]], name: str | None,
                 toolset_of: Callable[[str], Toolset]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(question entry, possible_answer entry) of each sap record in turn, ids `<name>_<i>` in record order: one
    record at a time, so an export streams.

    Every record must come from a `bfcl/...` toolset, all long-context or none (the first record decides; a record
    that differs is an error); BFCL's checker loads long-context scenarios only for ids containing `long_context`,
    so `name` must contain it exactly when the records are.
    """
    long_context: bool | None = None
    owners_cache: dict[str, dict[str, str]] = {}
    for i, rec in enumerate(records):
        toolset_name = rec.get("meta", {}).get("toolset", "")
        if not is_bfcl_name(toolset_name):
            raise BfclExportError(f"record {rec.get('id')}: toolset {toolset_name!r} is not a BFCL toolset "
                                  "(bfcl/<classes>); only records over BFCL's classes export to BFCL")
        classes, long = parse_bfcl_name(toolset_name)
        if long_context is None:
            long_context = long
            name = name or (f"{DEFAULT_NAME}_long_context" if long_context else DEFAULT_NAME)
            if ("long_context" in name) != long_context:
                raise BfclExportError(
                    f"name {name!r}: BFCL's checker treats ids containing 'long_context' as long-context scenarios; "
                    f"the records are {'' if long_context else 'not '}long-context, so the name must "
                    f"{'' if long_context else 'not '}contain it")
        elif long != long_context:
            raise BfclExportError("records mix long-context and plain BFCL toolsets; export them separately")
        if toolset_name not in owners_cache:
            owners_cache[toolset_name] = {t.name: t.owner or "" for t in toolset_of(toolset_name).tools}
        owners = owners_cache[toolset_name]
        traj = record_to_trajectory(rec)
        turn_questions, truth, missed = _turns(traj)
        path = list(dict.fromkeys(f"{owners.get(c.name, '')}.{c.name}" for _, _, c in traj.calls()))
        entry_id = f"{name}_{i}"
        entry: dict[str, Any] = {"id": entry_id, "question": turn_questions, "initial_config": traj.c0,
                                 "path": path, "involved_classes": classes}
        if traj.rewrite_kind == "miss_func":
            entry["missed_function"] = missed
        yield entry, {"id": entry_id, "ground_truth": truth}


def write_bfcl(records: Iterable[dict[str, Any]], out_dir: str | Path, name: str | None,
               toolset_of: Callable[[str], Toolset]) -> tuple[Path, Path]:
    """Write `DIR/<name>.json` and `DIR/possible_answer/<name>.json` (JSON lines, as BFCL's data files), one record
    at a time through temporary files renamed into place once every record is written."""
    out = Path(out_dir)
    (out / "possible_answer").mkdir(parents=True, exist_ok=True)
    tmps = (out / ".questions.json.tmp", out / "possible_answer" / ".answers.json.tmp")
    stem = None
    try:
        with open(tmps[0], "w", encoding="utf-8") as questions, open(tmps[1], "w", encoding="utf-8") as answers:
            for question, answer in bfcl_entries(records, name, toolset_of):
                stem = stem or question["id"].rsplit("_", 1)[0]
                questions.write(json.dumps(question, ensure_ascii=False) + "\n")
                answers.write(json.dumps(answer, ensure_ascii=False) + "\n")
        stem = stem or name or DEFAULT_NAME
        paths = (out / f"{stem}.json", out / "possible_answer" / f"{stem}.json")
        for tmp, path in zip(tmps, paths):
            os.replace(tmp, path)
    finally:
        for tmp in tmps:
            tmp.unlink(missing_ok=True)
    return paths
