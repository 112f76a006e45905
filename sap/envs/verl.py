"""verl adapter (the `verl` extra, verl 0.7.x): sap tasks as live environments in verl's multi-turn tool agent loop.

verl's `ToolAgentLoop` (the rows' `agent_name: tool_agent`) gives each trajectory a request id. It starts the row's
interaction with it (`start_interaction(request_id, **extra_info["interaction_kwargs"])`), and for every tool call it
creates a fresh tool instance, runs `execute(instance_id, arguments, agent_data=...)` and releases the instance, so
what lives for a whole trajectory is keyed by `agent_data.request_id`:

- `SapInteraction.start_interaction` opens one episode (`sap.envs.episode.ToolEnv`: a fresh executor reset to the
  task's initial_config) per request id, for the sap record that `sap export --format verl` puts in
  `extra_info.interaction_kwargs.record`.
- `SapTool` (one instance per tool of the toolset, named by its `tool_schema`) runs each call on the episode of the
  calling trajectory, so calls see the state earlier calls left.
- When the model answers without a tool call, `generate_response` ends the turn and hands back the next user
  message; after the last turn it ends the sequence with the episode's reward as the turn score. The reward is
  config `reward` of the interaction: "progress" (the default, the reward `PoolConfig.zone_reward` defaults to) or
  "graduated"; `rewards(request_id)` gives both (`rewards_row`), `calculate_score(request_id)` and each tool's
  `calc_reward(request_id)` the configured one.

`write_verl_configs(toolset, directory)` (CLI: `sap verl-config --toolset X -o DIR`) writes the two files verl reads:
`tool_config.yaml` (`actor_rollout_ref.rollout.multi_turn.tool_config_path`) and `interaction_config.yaml`
(`actor_rollout_ref.rollout.multi_turn.interaction_config_path`). verl 0.8 removed interactions (`verl.interactions`),
so multi-turn tasks need verl 0.7.x.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from verl.interactions.base import BaseInteraction
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from sap.envs.episode import ToolEnv
from sap.eval.tasks import task_from_record
from sap.export.verl import INTERACTION_NAME
from sap.model import Toolset
from sap.toolsets import load_toolset, toolset_for_data

REWARDS = ("progress", "graduated")
KEEP_FINISHED = 4096  # scored episodes kept for calculate_score/calc_reward before the oldest are dropped

_EPISODES: dict[str, ToolEnv] = {}  # request id -> episode, shared by the tools and the interaction of a worker


def _episode(request_id: str) -> ToolEnv:
    """The episode of trajectory `request_id`; KeyError naming it when no sap interaction started one."""
    if request_id not in _EPISODES:
        raise KeyError(f"no sap episode for request {request_id!r}: the row's extra_info.interaction_kwargs must name "
                       f"the sap interaction (name: {INTERACTION_NAME!r}), which starts the episode")
    return _EPISODES[request_id]


def _reward_name(config: dict[str, Any]) -> str:
    name = config.get("reward", "progress")
    if name not in REWARDS:
        raise ValueError(f"config reward: {name!r} is not one of {', '.join(REWARDS)}")
    return str(name)


def _drop_finished() -> None:
    """Forget the oldest scored episodes beyond KEEP_FINISHED (their executors are already closed)."""
    finished = [key for key, env in _EPISODES.items() if env.done]
    for key in finished[:max(0, len(finished) - KEEP_FINISHED)]:
        del _EPISODES[key]


class SapTool(BaseTool):
    """One tool of a sap toolset: its calls run on the executor of the calling trajectory's episode."""

    def __init__(self, config: dict[str, Any], tool_schema: OpenAIFunctionToolSchema) -> None:
        super().__init__(config, tool_schema)
        self.reward_name = _reward_name(config)

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[
            ToolResponse, float, dict[str, Any]]:
        """Run the call on the episode of `kwargs["agent_data"].request_id`: the tool message's text, no step
        reward, and whether the call succeeded."""
        agent_data = kwargs.get("agent_data")
        if agent_data is None:
            raise ValueError(f"tool {self.name}: verl passes agent_data to execute; it is missing")
        env = _episode(agent_data.request_id)
        message = env.call(self.name, parameters)
        return ToolResponse(text=str(message["content"])), 0.0, {"ok": env.calls[-1].ok}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """The configured reward of the episode `instance_id` (a request id), ending it where it stands."""
        return float(_episode(instance_id).finish()[self.reward_name])


class SapInteraction(BaseInteraction):
    """The user of a sap task: feeds each later user turn when the model ends its turn, and scores the episode."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        self.reward_name = _reward_name(config)
        self.max_steps = int(config.get("max_steps", 8))
        self.toolset: str | None = config.get("toolset")
        self.toolsets: dict[str, Toolset] = {}

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        """Open the episode of `kwargs["record"]` (a sap record as JSON) under `instance_id`, reset to its c0."""
        instance_id = await super().start_interaction(instance_id)
        if "record" not in kwargs:
            raise ValueError("interaction_kwargs: no 'record' (rows of `sap export --format verl` carry it)")
        record = json.loads(kwargs["record"]) if isinstance(kwargs["record"], str) else kwargs["record"]
        where = f"interaction_kwargs of task {record.get('id')!r}"
        toolset = toolset_for_data((record.get("meta") or {}).get("toolset"), self.toolset, where, self.toolsets)
        env = ToolEnv(task_from_record(record, toolset), max_steps=self.max_steps)
        env.reset()
        _EPISODES[instance_id] = env
        return instance_id

    async def generate_response(self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any) -> tuple[
            bool, str, float, dict[str, Any]]:
        """The model ended its turn: (done, the next user message, the turn score, the rewards when done). The turn
        score is 0 until the last turn, then the configured episode reward."""
        env = _episode(instance_id)
        last = messages[-1] if messages else {}
        if last.get("role") == "assistant":
            env.messages.append({"role": "assistant", "content": str(last.get("content") or "")})
        user = env.end_turn(answered=True)
        if user is not None:
            return False, str(user["content"]), 0.0, {}
        rewards = env.finish()
        _drop_finished()
        return True, "", float(rewards[self.reward_name]), rewards

    def rewards(self, instance_id: str) -> dict[str, Any]:
        """Both rewards of episode `instance_id` (sap.envs.episode.rewards_row), ending it where it stands."""
        return _episode(instance_id).finish()

    async def calculate_score(self, instance_id: str | None = None, **kwargs: Any) -> float:  # type: ignore[override]
        """The configured reward of episode `instance_id`, ending it where it stands."""
        if instance_id is None:
            raise ValueError("calculate_score needs the episode's instance_id (the request id)")
        return float(self.rewards(instance_id)[self.reward_name])

    async def finalize_interaction(self, instance_id: str | None = None, **kwargs: Any) -> None:  # type: ignore[override]
        """Close the episode `instance_id` and forget it."""
        env = _EPISODES.pop(instance_id, None) if instance_id is not None else None
        if env is not None:
            env.close()


def _verl_property(tool: str, param: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A parameter's JSON schema in the one-type form verl 0.7's OpenAIFunctionPropertySchema holds: an optional
    parameter's `anyOf: [T, null]` becomes T (optionality stays in `required`); ValueError naming the tool and
    parameter when no single type is left."""
    branches = [b for b in schema.get("anyOf", [schema]) if isinstance(b, dict) and b.get("type") != "null"]
    if len(branches) != 1 or not isinstance(branches[0].get("type"), str):
        raise ValueError(f"tool {tool!r}, parameter {param!r}: verl's tool schema needs one JSON type, got {schema}")
    out = {"type": branches[0]["type"], **({"enum": branches[0]["enum"]} if "enum" in branches[0] else {})}
    description = schema.get("description") or branches[0].get("description")
    return {**out, **({"description": description} if description else {})}


def verl_tool_schema(tool: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI tool spec in the form verl 0.7's OpenAIFunctionToolSchema validates (see _verl_property; keys it
    has no field for, such as `items` or `default`, are left out, as verl would drop them)."""
    function = tool["function"]
    params = function.get("parameters") or {}
    properties = {p: _verl_property(function["name"], p, s) for p, s in (params.get("properties") or {}).items()}
    return {"type": "function", "function": {
        "name": function["name"], "description": function.get("description") or function["name"],
        "parameters": {"type": "object", "properties": properties, "required": list(params.get("required") or [])}}}


def tool_config(toolset: Toolset, reward: str = "progress") -> dict[str, Any]:
    """verl's tool config of a toolset: one SapTool per tool, named and described by its tool_schema."""
    return {"tools": [{"class_name": f"{__name__}.SapTool", "config": {"type": "native", "reward": reward},
                       "tool_schema": verl_tool_schema(spec.to_openai())} for spec in toolset.tools]}


def interaction_config(toolset: str | None = None, reward: str = "progress", max_steps: int = 8) -> dict[str, Any]:
    """verl's interaction config: the sap interaction, named as `sap export --format verl` rows name it."""
    config: dict[str, Any] = {"reward": reward, "max_steps": max_steps, **({"toolset": toolset} if toolset else {})}
    return {"interaction": [{"name": INTERACTION_NAME, "class_name": f"{__name__}.SapInteraction", "config": config}]}


def write_verl_configs(toolset: str, directory: str | Path, reward: str = "progress",
                       max_steps: int = 8) -> tuple[Path, Path]:
    """Write `tool_config.yaml` and `interaction_config.yaml` for `toolset` into `directory`; their paths."""
    _reward_name({"reward": reward})
    loaded = load_toolset(toolset)
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    tools, interaction = out / "tool_config.yaml", out / "interaction_config.yaml"
    tools.write_text(yaml.safe_dump(tool_config(loaded, reward), sort_keys=False, allow_unicode=True))
    interaction.write_text(yaml.safe_dump(interaction_config(toolset, reward, max_steps), sort_keys=False,
                                          allow_unicode=True))
    return tools, interaction
