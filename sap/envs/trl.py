"""TRL adapter: sap tasks as `GRPOTrainer(environment_factory=...)` environments (the `trl` extra).

TRL lists an environment's public methods as the model's tools, reading each one's signature and docstring, so
every group of tasks with the same tools gets a class of its own whose methods are those tools (built from the tool
specs by sap.envs.tools), plus `finish_turn`: TRL ends a rollout when the model answers without a tool call, so a
multi-turn task hands the model each later user turn as the result of `finish_turn(reply)`. `get_reward` scores the
episode (turns never reached count as turns with no calls) and returns the chosen reward, progress or graduated.

    factory, rows = trl_environments(catalog)
    GRPOTrainer(model, args=GRPOConfig(...), train_dataset=Dataset.from_list(rows), environment_factory=factory,
                reward_funcs=[env_reward("progress")])   # optional further columns read from the environments

With several groups `factory` is a dict keyed by each row's `environment` column, as TRL expects.

`sap export --format trl` writes such rows with the task itself in a `task` column (the sap record as JSON), so a
trainer needs only the dataset:

    ds = datasets.load_dataset("DIR", split="train")
    factory = trl_factory(ds)                     # the classes of the rows' tool groups; reset(task=...) per row"""
from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable
from dataclasses import replace
from typing import Any, ClassVar

from sap.envs.catalog import TaskCatalog
from sap.envs.episode import ToolEnv
from sap.envs.tools import tool_names, typed_callable
from sap.eval.tasks import EvalTask, tasks_from_records

REWARDS = ("progress", "graduated", "r_atomic", "r_orch")
RESERVED = frozenset({"reset", "get_reward", "finish_turn"})
NO_STEP_CAP = 10**9  # TRL's max_tool_calling_iterations bounds a rollout, not ToolEnv's per-turn cap


class SapTrlEnv:
    """The base of the per-tool-group environment classes: one instance per rollout, reset per task."""

    catalog: ClassVar[TaskCatalog | None]
    reward_name: ClassVar[str] = "graduated"

    def __init__(self) -> None:
        self.env: ToolEnv | None = None

    def reset(self, task_index: int | None = None, task: str | None = None, **row: Any) -> None:
        """Start the episode of the row's task: the catalog's task at `task_index`, or the sap record in `task` (a
        JSON text, as `sap export --format trl` writes it); the row's other columns are ignored."""
        if self.env is not None:
            self.env.close()
        if task is not None:
            chosen = row_task(task)
        elif self.catalog is not None and task_index is not None:
            chosen = before_comeback(self.catalog.get(index=task_index))
        else:
            raise ValueError("reset: the row has no `task` column (sap export --format trl writes one) and no "
                             "task_index into a catalog")
        self.env = ToolEnv(chosen, max_steps=NO_STEP_CAP)
        self.env.reset()

    def _episode(self) -> ToolEnv:
        if self.env is None:
            raise ValueError("the environment was not reset")
        return self.env

    def _run(self, name: str, arguments: dict[str, Any]) -> str:
        return str(self._episode().call(name, arguments)["content"])

    def finish_turn(self, reply: str) -> str:
        """Give the user your reply to their current request, once its tool calls are done, and get their next request.

        Args:
            reply: Your answer to the user's current request.

        Returns:
            The user's next request, or a note that the conversation is over.
        """
        episode = self._episode()
        episode.messages.append({"role": "assistant", "content": reply})
        user = episode.end_turn(answered=True)
        return str(user["content"]) if user else "The conversation is over."

    def _rewards(self) -> dict[str, Any]:
        """The episode's rewards_row, ending it where it stands (private: TRL offers public methods as tools)."""
        return self._episode().finish()

    def get_reward(self) -> float:
        """The episode's `reward_name` reward (TRL calls this once per finished rollout)."""
        return float(self._rewards()[self.reward_name])


def before_comeback(task: EvalTask) -> EvalTask:
    """A MissFunc task as TRL can play it: its turns up to the one where the hidden tool comes back, without that
    tool (TRL fixes an environment's tools for the whole rollout, so a tool cannot appear mid-dialogue); other tasks
    as they are."""
    if not any(turn.hidden for turn in task.turns):
        return task
    back = next((t for t in range(1, len(task.turns)) if task.turns[t].hidden < task.turns[t - 1].hidden),
                len(task.turns))
    hidden = frozenset().union(*(turn.hidden for turn in task.turns[:back]))
    return replace(task, tools=[t for t in task.tools if t["function"]["name"] not in hidden],
                   turns=[replace(turn, hidden=frozenset()) for turn in task.turns[:back]])


def row_task(task: str) -> EvalTask:
    """The task of a `task` column: one sap record as JSON text, over a built-in toolset its meta names."""
    try:
        record = json.loads(task)
    except (TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"task: not a sap record as JSON text: {exc}") from exc
    if not isinstance(record, dict):
        raise ValueError(f"task: a sap record is a JSON object, got {type(record).__name__}")
    return before_comeback(tasks_from_records([(1, record)], "the row's task")[0])


def environment_class(name: str, tools: list[dict[str, Any]], catalog: TaskCatalog | None, reward: str) -> type[SapTrlEnv]:
    """A SapTrlEnv subclass named `sap_<name>` whose methods are `tools`; a tool named like the protocol's own
    methods (reset, get_reward, finish_turn) or not a Python identifier is refused, named."""
    clash = RESERVED.intersection(tool_names(tools))
    if clash:
        raise ValueError(f"{name}: tool {sorted(clash)[0]!r} has the name of an environment method")
    methods = {tool["function"]["name"]: typed_callable(tool, SapTrlEnv._run, method=True) for tool in tools}
    return type(f"sap_{name}", (SapTrlEnv,), {**methods, "catalog": catalog, "reward_name": reward,
                                              "__doc__": f"sap tasks with the tools of {name}."})


def _group(task: EvalTask) -> str:
    return str(task.meta.get("toolset") or task.meta.get("format") or "tasks")


def trl_environments(catalog: TaskCatalog, reward: str = "graduated") -> tuple[
        Callable[[], SapTrlEnv] | dict[str, Callable[[], SapTrlEnv]], list[dict[str, Any]]]:
    """The `environment_factory` for GRPOTrainer and the training rows (prompt: system and first user message;
    task_index, task_id; `environment` when the catalog has several tool groups)."""
    classes, names = _classes(map(before_comeback, catalog), catalog, reward)
    rows = [{**prompt_row(task), "task_index": i, "environment": name}
            for i, (task, name) in enumerate(zip(catalog, names))]
    if len(classes) == 1:
        for row in rows:
            del row["environment"]
        return next(iter(classes.values())), rows
    return dict(classes), rows


def prompt_row(task: EvalTask) -> dict[str, Any]:
    """A training row's prompt (the system message and the first user message) and task id."""
    return {"prompt": [{"role": "system", "content": task.system},
                       {"role": "user", "content": task.turns[0].user if task.turns else ""}], "task_id": task.id}


def _group_name(task: EvalTask, taken: Collection[str]) -> str:
    """A new tool group's name: the task's toolset, numbered when that name is taken."""
    base = _group(task)
    return base if base not in taken else f"{base}_{sum(n.startswith(base) for n in taken) + 1}"


def _classes(tasks: Iterable[EvalTask], catalog: TaskCatalog | None, reward: str) -> tuple[
        dict[str, type[SapTrlEnv]], list[str]]:
    """One environment class per group of tasks with the same tools (named by toolset), and each task's group."""
    if reward not in REWARDS:
        raise ValueError(f"reward: {reward!r} is not one of {', '.join(REWARDS)}")
    groups: dict[tuple[str, ...], str] = {}
    classes: dict[str, type[SapTrlEnv]] = {}
    names = []
    for task in tasks:
        key = tuple(sorted(tool_names(task.tools)))  # a MissFunc record lists its returning tool last
        if key not in groups:
            groups[key] = _group_name(task, classes)
            classes[groups[key]] = environment_class(groups[key], task.tools, catalog, reward)
        names.append(groups[key])
    return classes, names


def trl_factory(rows: Iterable[dict[str, Any]], reward: str = "graduated") -> (
        Callable[[], SapTrlEnv] | dict[str, Callable[[], SapTrlEnv]]):
    """The `environment_factory` for rows of `sap export --format trl` (a datasets table or dicts): one class per
    `environment` group, each resetting from its row's `task`; a single callable when there is one group."""
    firsts: dict[str, EvalTask] = {}
    for row in rows:
        if row["environment"] not in firsts:
            firsts[row["environment"]] = row_task(row["task"])
    classes = {name: environment_class(name, task.tools, None, reward) for name, task in firsts.items()}
    return next(iter(classes.values())) if len(classes) == 1 else classes


def env_reward(name: str) -> Callable[..., list[float]]:
    """A GRPOTrainer reward function reading reward `name` from each rollout's environment."""
    if name not in REWARDS:
        raise ValueError(f"reward: {name!r} is not one of {', '.join(REWARDS)}")

    def reward(environments: list[SapTrlEnv], **_: Any) -> list[float]:
        return [float(env._rewards()[name]) for env in environments]

    reward.__name__ = f"sap_{name}"
    return reward
