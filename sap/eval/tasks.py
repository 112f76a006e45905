"""Evaluation tasks: a dialogue's user turns, ground-truth calls, offered tools and executor, from sap records."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sap.export.records import record_to_trajectory
from sap.provenance.record_tools import all_tools, tools_at_turns
from sap.model import Executor, Toolset
from sap.rewards.calls import GoldCall, gold_turns
from sap.toolsets import toolset_for_data
from sap.toolsets.system_prompt import system_prompt


@dataclass(frozen=True)
class EvalTurn:
    """One user turn: the message, the ground-truth calls, and the tools withheld at this turn."""

    user: str
    gold: list[GoldCall]
    hidden: frozenset[str] = frozenset()


@dataclass
class EvalTask:
    """A dialogue to run a model through, on a fresh executor reset to `c0` per rollout."""

    id: str
    system: str
    tools: list[dict[str, Any]]  # OpenAI tools
    c0: dict[str, Any]
    turns: list[EvalTurn]
    executor_factory: Callable[[], Executor]
    meta: dict[str, Any] = field(default_factory=dict)

    def tools_at(self, turn: int) -> list[dict[str, Any]]:
        """The tools offered at `turn`."""
        hidden = self.turns[turn].hidden
        return [t for t in self.tools if t["function"]["name"] not in hidden]


def _system_message(record: dict[str, Any], toolset: Toolset) -> str:
    first = (record.get("messages") or [{}])[0]
    if first.get("role") == "system" and isinstance(first.get("content"), str):
        return first["content"]
    return system_prompt(toolset)


def task_from_record(record: dict[str, Any], toolset: Toolset) -> EvalTask:
    """The task of one sap record (as `sap synthesize` writes it): its turns, calls, tools and initial_config."""
    traj = record_to_trajectory(record)
    gold = gold_turns(traj)
    tools = all_tools(record) or [spec.to_openai() for spec in toolset.tools]
    offered = [{t["function"]["name"] for t in at} for at in tools_at_turns(record)] if record.get("tools_added") else []
    turns = [EvalTurn(t.user_message, gold[t.index],
                      frozenset({t["function"]["name"] for t in tools} - offered[t.index]) if offered
                      else frozenset(traj.missed_function.get(t.index, ())))
             for t in traj.turns]
    return EvalTask(id=traj.id, system=_system_message(record, toolset), tools=tools, c0=traj.c0, turns=turns,
                    executor_factory=toolset.executor_factory,
                    meta={"format": "sap", "toolset": toolset.name, "kind": traj.rewrite_kind})


def tasks_from_records(records: Iterable[tuple[int, dict[str, Any]]], path: str | Path,
                       toolset: str | None = None,
                       open_cache: Callable[[str], Toolset] | None = None) -> list[EvalTask]:
    """Tasks of (line, record) pairs; each record's toolset is `toolset` if given, else its meta.toolset (a
    built-in name, never a module path: data never names code; a `cache:NAME` opened by `open_cache`)."""
    toolsets: dict[str, Toolset] = {}
    tasks = []
    for line, record in records:
        record_toolset = toolset_for_data((record.get("meta") or {}).get("toolset"), toolset, f"{path}:{line}",
                                          toolsets, open_cache)
        try:
            tasks.append(task_from_record(record, record_toolset))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}:{line}: not a usable sap record: {type(exc).__name__}: {exc}") from exc
    return tasks
