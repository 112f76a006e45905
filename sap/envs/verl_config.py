"""The config files of verl's multi-turn agent loop for a sap toolset (`sap verl-config --toolset X -o DIR`), written
without verl installed: `tool_config.yaml` (`actor_rollout_ref.rollout.multi_turn.tool_config_path`: one
sap.envs.verl.SapTool per tool) and `interaction_config.yaml` (`actor_rollout_ref.rollout.multi_turn.
interaction_config_path`: the sap interaction, named as `sap export --format verl` rows name it)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sap.export.verl import INTERACTION_NAME
from sap.model import Toolset
from sap.toolsets import load_toolset

REWARDS = ("progress", "graduated")
ADAPTER = "sap.envs.verl"


def reward_name(config: dict[str, Any]) -> str:
    """The `reward` of a tool or interaction config (default progress); ValueError naming a bad one."""
    name = config.get("reward", "progress")
    if name not in REWARDS:
        raise ValueError(f"config reward: {name!r} is not one of {', '.join(REWARDS)}")
    return str(name)


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
    return {"tools": [{"class_name": f"{ADAPTER}.SapTool", "config": {"type": "native", "reward": reward},
                       "tool_schema": verl_tool_schema(spec.to_openai())} for spec in toolset.tools]}


def interaction_config(toolset: str | None = None, reward: str = "progress") -> dict[str, Any]:
    """verl's interaction config: the sap interaction, named as `sap export --format verl` rows name it."""
    config: dict[str, Any] = {"reward": reward, **({"toolset": toolset} if toolset else {})}
    return {"interaction": [{"name": INTERACTION_NAME, "class_name": f"{ADAPTER}.SapInteraction", "config": config}]}


def write_verl_configs(toolset: str, directory: str | Path, reward: str = "progress") -> tuple[Path, Path]:
    """Write `tool_config.yaml` and `interaction_config.yaml` for `toolset` into `directory`; their paths."""
    reward_name({"reward": reward})
    loaded = load_toolset(toolset)
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    tools, interaction = out / "tool_config.yaml", out / "interaction_config.yaml"
    tools.write_text(yaml.safe_dump(tool_config(loaded, reward), sort_keys=False, allow_unicode=True))
    interaction.write_text(yaml.safe_dump(interaction_config(toolset, reward), sort_keys=False,
                                          allow_unicode=True))
    return tools, interaction
