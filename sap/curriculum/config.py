"""Thresholds and sizes of the RODS active pool (zones, seeding, injection, retirement), as one pydantic model."""
from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator


class PoolConfig(BaseModel):
    """Every rule of the active pool is parameterised here; defaults follow the RODS method."""

    model_config = ConfigDict(extra="forbid")

    zone_reward: Literal["progress", "graduated"] = Field(
        "progress", description="the reward whose recent mean places a task in a zone: progress (state per turn, "
                                "RODS; the zone thresholds are set for it) or graduated (R_atomic and R_orch); the "
                                "verl sampler reads the batch key of this name")
    window: int = Field(16, ge=1, description="recent rollouts per task whose mean zone reward places it in a zone")
    min_rollouts: int = Field(4, ge=1, description="rollouts a task needs before it has a zone")
    mastered_above: float = Field(0.85, gt=0, lt=1, description="mean reward above this: mastered")
    out_of_reach_below: float = Field(0.20, gt=0, lt=1, description="mean reward below this: out of reach")
    seeding: Literal["boundary", "random"] = Field(
        "boundary", description="boundary: RODS seed selection; random: the same quota drawn at random among rated "
                                "tasks (an ablation)")
    signal: Literal["graded", "binary"] = Field(
        "graded", description="graded: the zone reward as measured (RODS); binary: 1 for a rollout that reached it "
                              "fully, else 0 (RODS's binary-signal ablation)")
    retire: bool = Field(True, description="retire tasks (entry screening, drift, staleness, capacity); false: "
                                           "never (RODS's no-retirement ablation)")
    seed_quota: int = Field(2, ge=1, description="seeds per task type per selection")
    cooldown_steps: int = Field(100, ge=0, description="steps before a task may seed again")
    inject_share: float = Field(0.20, gt=0, le=1, description="candidates entering at one epoch end, as a share of the pool size")
    variant_capacity: int = Field(400, ge=1, validation_alias=AliasChoices("variant_capacity", "max_size"),
                                  description="active variants above which the lowest-variance ones retire; the seeds "
                                              "(protected) do not count, so capacity is the same whatever the seed "
                                              "set's size (older pools stored it as max_size, the whole pool's size)")
    queue_size: int = Field(1000, ge=1, description="candidates waiting at most; the oldest are dropped beyond it")
    entry_rollouts: int = Field(4, ge=1, description="rollouts after which a new task's entry screening happens")
    entry_min_reward: float = Field(0.05, ge=0, lt=1, description="a new task whose mean reward at screening is below this retires")
    stale_steps: int = Field(300, ge=1, description="a task not sampled for this many steps retires")
    seed: int = Field(0, description="seed of the batch sampling (each step's draw is derived from it and the step)")

    @model_validator(mode="after")
    def _ordered(self) -> "PoolConfig":
        if self.out_of_reach_below >= self.mastered_above:
            raise ValueError(f"out_of_reach_below ({self.out_of_reach_below}) must be below mastered_above "
                             f"({self.mastered_above})")
        if self.min_rollouts > self.window:
            raise ValueError(f"min_rollouts ({self.min_rollouts}) exceeds window ({self.window})")
        if self.entry_rollouts > self.window:
            raise ValueError(f"entry_rollouts ({self.entry_rollouts}) exceeds window ({self.window})")
        return self
