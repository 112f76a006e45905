"""The agent roles, one table: each role's rule class, LLM class, prompts (by message mode) and the answer schema of
each prompt, as `module:Name` paths resolved only when a role is built (importing this table loads nothing else)."""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["planner", "messenger", "judge", "fsm_builder", "repair", "replanner"]
MessageMode = Literal["per_turn", "global"]


@dataclass(frozen=True)
class RoleSpec:
    """One role: its config name, its SynthesisContext keyword, its rule and LLM classes, the prompts its LLM class
    asks in each message mode, each prompt's answer schema, and the LLM class's options from the agents config."""

    name: Role
    slot: str
    rule: str
    llm: str
    prompts: dict[MessageMode, tuple[str, ...]]
    schemas: dict[str, str]
    llm_options: Callable[[Any], dict[str, Any]] = field(default=lambda cfg: {})

    def prompt_names(self) -> tuple[str, ...]:
        """Every prompt the role can ask, in either mode."""
        return tuple(dict.fromkeys(name for names in self.prompts.values() for name in names))


def _both(*names: str) -> dict[MessageMode, tuple[str, ...]]:
    """The same prompts in both message modes."""
    return {"per_turn": names, "global": names}


ROLE_TABLE: tuple[RoleSpec, ...] = (
    RoleSpec("planner", "planner", "sap.agents.planner:RulePlanner", "sap.agents.llm_planner:LLMPlanner",
             {"per_turn": ("planner_turn", "planner_bind"),
              "global": ("planner_turn", "planner_bind", "planner_narrative")},
             {"planner_turn": "sap.agents.llm_planner:TurnPlanAnswer",
              "planner_bind": "sap.agents.llm_planner:PlannerAnswer",
              "planner_narrative": "sap.agents.llm_planner:NarrativeAnswer"}),
    RoleSpec("messenger", "messenger", "sap.agents.messenger:RuleMessenger", "sap.agents.llm_messenger:LLMMessenger",
             {"per_turn": ("messenger_turn", "messenger_clarify", "messenger_withhold"),
              "global": ("messenger_global", "messenger_clarify", "messenger_withhold")},
             {"messenger_turn": "sap.agents.llm_messenger:TurnAnswer",
              "messenger_global": "sap.agents.llm_messenger:GlobalAnswer",
              "messenger_clarify": "sap.agents.llm_messenger:ClarifyAnswer",
              "messenger_withhold": "sap.agents.llm_messenger:WithheldAnswer"},
             llm_options=lambda cfg: {"mode": cfg.message_mode}),
    RoleSpec("judge", "judge", "sap.agents.judge:RuleJudge", "sap.agents.llm_judge:LLMJudge", _both("judge"),
             {"judge": "sap.agents.llm_judge:JudgeAnswer"}),
    RoleSpec("fsm_builder", "fsm_builder", "sap.fsm.build:RuleFSMBuilder", "sap.agents.llm_fsm_builder:LLMFSMBuilder",
             _both("fsm_draft"), {"fsm_draft": "sap.agents.llm_fsm_builder:FSMDraft"},
             llm_options=lambda cfg: {"fallback": "rule" if cfg.fsm_fallback == "rule" else None}),
    RoleSpec("repair", "repairer", "sap.agents.repair:RuleRepairer", "sap.agents.repair:LLMRepairer", _both("repair"),
             {"repair": "sap.agents.repair:RepairAnswer"}),
    RoleSpec("replanner", "replanner", "sap.agents.replanner:RuleReplanner", "sap.agents.replanner:LLMReplanner",
             _both("replan"), {"replan": "sap.agents.replanner:ReplanAnswer"}),
)
ROLES: tuple[Role, ...] = tuple(spec.name for spec in ROLE_TABLE)
ROLE_SPECS: dict[str, RoleSpec] = {spec.name: spec for spec in ROLE_TABLE}


def resolve(path: str) -> Any:
    """The object a `module:Name` path names, importing its module."""
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)
