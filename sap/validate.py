"""Replay exported records on their toolset's executor and re-run the provenance code check."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from sap.executors.base import end_state_hash
from sap.export.records import record_to_trajectory
from sap.model import Toolset
from sap.provenance.checks import code_check
from sap.toolsets import load_toolset


@dataclass(frozen=True)
class Problem:
    """One reason a record fails validation."""

    record: str
    line: int
    detail: str

    def __str__(self) -> str:
        return f"record {self.record} (line {self.line}): {self.detail}"


def read_records(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for each non-empty line of a JSONL file; bad JSON raises ValueError naming the line."""
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield no, json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{no}: not a JSON record: {exc.msg}") from exc


def validate_record(record: dict[str, Any], toolset: Toolset, line: int = 0) -> list[Problem]:
    """Replay one record from its initial_config: every result must match, the end state must hash to the recorded
    `meta.end_state_hash` (when the record has one), and the code check must pass."""
    rid = str(record.get("id", f"#{line}"))
    traj = record_to_trajectory(record)
    ex = toolset.executor_factory()
    problems: list[Problem] = []
    try:
        ex.reset(traj.c0)
        for turn, index, call in traj.calls():
            res = ex.execute(call)
            if not res.ok or res.value != call.result:
                got = res.value if res.ok else f"error: {res.error}"
                problems.append(Problem(rid, line, f"turn {turn} call {index} ({call.call_id} {call.name}): replay gave "
                                                   f"{json.dumps(got)[:200]}, record has {json.dumps(call.result)[:200]}"))
                break
        else:
            recorded = record.get("meta", {}).get("end_state_hash")
            replayed = end_state_hash(ex) if recorded else None
            if replayed != recorded:
                problems.append(Problem(rid, line, f"end state after replay hashes to {replayed}, "
                                                   f"record meta has end_state_hash {recorded}"))
    finally:
        if hasattr(ex, "close"):
            ex.close()
    problems += [Problem(rid, line, f"provenance: {p}") for p in code_check(traj)]
    return problems


def _toolset(name: str, cache_db: str | None) -> Toolset:
    """A toolset by name; `cache:NAME` is that cache in `cache_db` (sqlite:///sap.db by default), replayed on the
    cache executor."""
    if not name.startswith("cache:"):
        return load_toolset(name)
    from sap.cache.store import CacheStore
    from sap.store import RunStore

    try:
        return CacheStore(RunStore(cache_db or "sqlite:///sap.db")).load(name[len("cache:"):]).toolset()
    except KeyError as exc:
        raise ValueError(exc.args[0]) from None


def validate_file(path: str | Path, toolset_name: str | None = None,
                  cache_db: str | None = None) -> tuple[int, list[Problem]]:
    """(records checked, problems) for a JSONL file; the toolset comes from each record's meta unless given, and
    cache-mode records replay on their cache in `cache_db`."""
    cache: dict[str, Toolset] = {}
    count, problems = 0, []
    for line, record in read_records(path):
        name = toolset_name or record.get("meta", {}).get("toolset")
        if not name:
            problems.append(Problem(str(record.get("id", f"#{line}")), line, "no toolset in meta; pass --toolset"))
            continue
        if name not in cache:
            cache[name] = _toolset(name, cache_db)
        problems += validate_record(record, cache[name], line)
        count += 1
    return count, problems
