"""The tasks an environment serves: from a records file (sap records or BFCL multi-turn) or a stored run."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sap.eval import load_tasks
from sap.eval.tasks import EvalTask, tasks_from_records
from sap.store.runs import existing_store


class TaskCatalog:
    """Tasks by position and by id; an id shared by several tasks can only be reached by position."""

    def __init__(self, tasks: list[EvalTask], source: str) -> None:
        if not tasks:
            raise ValueError(f"{source}: no tasks")
        self.tasks, self.source = tasks, source
        self.positions: dict[str, list[int]] = {}
        for i, task in enumerate(tasks):
            self.positions.setdefault(task.id, []).append(i)

    @classmethod
    def from_file(cls, path: str | Path, answers: str | Path | None = None, toolset: str | None = None) -> TaskCatalog:
        """The tasks of a JSONL file of sap records or a BFCL multi-turn question file (see sap.eval.load_tasks)."""
        return cls(load_tasks(path, answers, toolset), str(path))

    @classmethod
    def from_run(cls, db: str, run_id: str, toolset: str | None = None) -> TaskCatalog:
        """The tasks of the accepted records of run `run_id` in the run database `db`."""
        store = existing_store(db)
        try:
            store.run(run_id)
            records = store.records(run_id)
        finally:
            store.engine.dispose()
        source = f"run {run_id} in {db}"
        return cls(tasks_from_records(enumerate(records), source, toolset), source)

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[EvalTask]:
        return iter(self.tasks)

    def get(self, task_id: str | None = None, index: int | None = None) -> EvalTask:
        """The task at `index`, or the one task with id `task_id` (exactly one of the two)."""
        if (task_id is None) == (index is None):
            raise ValueError("give exactly one of task_id and index")
        if index is not None:
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self.tasks):
                raise ValueError(f"index: {index!r} is not a task position (0..{len(self.tasks) - 1})")
            return self.tasks[index]
        found = self.positions.get(str(task_id))
        if not found:
            raise KeyError(f"task_id: no task {task_id!r} in {self.source}")
        if len(found) > 1:
            raise ValueError(f"task_id: {task_id!r} names the tasks at positions {found} of {self.source}; "
                             f"reset by index")
        return self.tasks[found[0]]

    def summary(self) -> list[dict[str, Any]]:
        """One row per task: position, id, toolset or format, turns, tool names."""
        return [{"index": i, "task_id": t.id, "toolset": t.meta.get("toolset") or t.meta.get("format"),
                 "turns": len(t.turns), "tools": [tool["function"]["name"] for tool in t.tools]}
                for i, t in enumerate(self.tasks)]
