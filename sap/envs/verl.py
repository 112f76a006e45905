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

The config files verl reads come from sap.envs.verl_config (`sap verl-config --toolset X -o DIR`). verl 0.8 removed
interactions (`verl.interactions`), so multi-turn tasks need verl 0.7.x.
"""
from __future__ import annotations

import json
from typing import Any

from verl.interactions.base import BaseInteraction
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from sap.envs.episode import ToolEnv
from sap.envs.verl_config import reward_name
from sap.eval.tasks import task_from_record
from sap.export.verl import INTERACTION_NAME
from sap.model import Toolset
from sap.toolsets import toolset_for_data

KEEP_FINISHED = 4096  # scored episodes kept for calculate_score/calc_reward before the oldest are dropped

_EPISODES: dict[str, ToolEnv] = {}  # request id -> episode, shared by the tools and the interaction of a worker


def _episode(request_id: str) -> ToolEnv:
    """The episode of trajectory `request_id`; KeyError naming it when no sap interaction started one."""
    if request_id not in _EPISODES:
        raise KeyError(f"no sap episode for request {request_id!r}: the row's extra_info.interaction_kwargs must name "
                       f"the sap interaction (name: {INTERACTION_NAME!r}), which starts the episode")
    return _EPISODES[request_id]


def _drop_finished() -> None:
    """Forget the oldest scored episodes beyond KEEP_FINISHED (their executors are already closed)."""
    finished = [key for key, env in _EPISODES.items() if env.done]
    for key in finished[:max(0, len(finished) - KEEP_FINISHED)]:
        del _EPISODES[key]


class SapTool(BaseTool):
    """One tool of a sap toolset: its calls run on the executor of the calling trajectory's episode."""

    def __init__(self, config: dict[str, Any], tool_schema: OpenAIFunctionToolSchema) -> None:
        super().__init__(config, tool_schema)
        self.reward_name = reward_name(config)

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
        self.reward_name = reward_name(config)
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
        env = ToolEnv(task_from_record(record, toolset))
        env.reset()
        previous = _EPISODES.pop(instance_id, None)
        if previous is not None:  # the same trajectory started again: its old episode is dropped
            previous.close()
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

    async def finalize_interaction(self, instance_id: str | None = None,  # type: ignore[override]
                                   **kwargs: Any) -> None:
        """Close the episode `instance_id` and forget it."""
        env = _EPISODES.pop(instance_id, None) if instance_id is not None else None
        if env is not None:
            env.close()
