"""Replay exported records on their toolset's executor and re-run the provenance code check."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sap.executors.base import end_state_hash, same_result
from sap.export.records import record_to_trajectory
from sap.jsonutil import read_records
from sap.model import Toolset
from sap.provenance.policy import policy_check, policy_of
from sap.provenance.withheld import miss_param_problems
from sap.toolsets import toolset_for_data


@dataclass(frozen=True)
class Problem:
    """One reason a record fails validation."""

    record: str
    line: int
    detail: str

    def __str__(self) -> str:
        return f"record {self.record} (line {self.line}): {self.detail}"


def validate_record(record: dict[str, Any], toolset: Toolset, line: int = 0) -> list[Problem]:
    """Replay one record from its initial_config: every result must match, the end state must hash to the recorded
    `meta.end_state_hash` (when the record has one), and the code check (with the toolset's policy) and, for a
    MissParam record, the withheld-value check (`provenance/withheld.py`) must pass."""
    rid = str(record.get("id", f"#{line}"))
    traj = record_to_trajectory(record)
    ex = toolset.executor_factory()
    problems: list[Problem] = []
    try:
        ex.reset(traj.c0)
        for turn, index, call in traj.calls():
            res = ex.execute(call)
            if not res.ok or not same_result(ex, call.result, res.value):
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
    specs = {t.name: t for t in toolset.tools}
    problems += [Problem(rid, line, f"provenance: {p}") for p in policy_check(traj, policy_of(toolset), specs)]
    problems += [Problem(rid, line, p) for p in miss_param_problems(traj, specs)]
    return problems


def validate_file(path: str | Path, toolset_name: str | None = None,
                  cache_db: str | None = None) -> tuple[int, list[Problem]]:
    """(records checked, problems) for a JSONL file; the toolset is `toolset_name` if given, else each record's
    meta.toolset (a built-in name, never a module path: data never names code), and cache-mode records replay on
    their cache in `cache_db`."""
    from sap.cache.store import cache_opener  # here: sqlalchemy only for files that ask for it

    loaded: dict[str, Toolset] = {}
    count, problems = 0, []
    for line, record in read_records(path):
        toolset = toolset_for_data((record.get("meta") or {}).get("toolset"), toolset_name, f"{path}:{line}", loaded,
                                   cache_opener(cache_db))
        problems += validate_record(record, toolset, line)
        count += 1
    return count, problems
