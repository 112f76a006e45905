"""A synthesis run's settings: one typed object built by the Python API and the command line alike, checked before a
run is created, with errors that name the setting as the caller spelled it."""
from __future__ import annotations

from dataclasses import fields
from functools import cache
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field

from sap.agents.config import AgentsConfig
from sap.errors import UsageError
from sap.provenance.goals import USER_STYLES
from sap.runs.slots import KINDS

# SynthesisContext limits stored with a run (and so fingerprinted); the four the CLI sets are always stored
STORED_LIMITS = ("min_turns", "max_turns", "emphasis_size", "max_rewrites", "replay_check", "use_tags", "use_fsm",
                 "max_attempts", "max_replans", "max_repairs", "min_keep_turns", "user_style")
DEFAULT_LIMITS = {"min_turns": 3, "max_turns": 8, "emphasis_size": 3, "user_style": "goal"}
# SAP's pipeline ablations (Table 6) by name, as the stored limits that switch each part off
ABLATIONS: dict[str, dict[str, int | bool]] = {
    "no_tags": {"use_tags": False},  # the FSM without provenance declarations: the planner picks sources itself
    "no_retry": {"max_attempts": 1},  # a failing call is not re-bound with its error fed back (repair stays)
    "no_repair": {"max_repairs": 0},  # no c0 repair for a call at its attempt cap
    "no_fsm": {"use_fsm": False},  # free turn-by-turn planning: one phase where any tool may follow any other
}

Spell = Callable[[str], str]

SEED_RANGE = (-2**31, 2**31 - 1)  # a run's seed is stored in a 32-bit INTEGER column (PostgreSQL)


def python_name(name: str) -> str:
    """How the Python API spells a setting: as its keyword argument."""
    return name


class RunSettings(BaseModel):
    """What a synthesis run is asked for: the target and seed, the kind mix, the slot cap, the graph's limits, the agents
    (the same AgentsConfig the TOML file and the model options build), and how this process works on it."""

    model_config = ConfigDict(extra="forbid")

    n: int
    seed: int = 0
    mix: dict[str, float] | None = None
    max_slots: int | None = None
    limits: dict[str, int | bool | str] = Field(default_factory=lambda: dict(DEFAULT_LIMITS))
    agents: AgentsConfig = Field(default_factory=AgentsConfig)
    concurrency: int = 1
    max_cost: float | None = None
    ablations: tuple[str, ...] = ()  # names in ABLATIONS; their limits are stored (and fingerprinted) with the run

    def check(self, spell: Spell = python_name) -> None:
        """Refuse settings no run can use, naming them as `spell` spells them (`--min-turns` on the command line)."""
        if self.n < 1:
            raise UsageError(f"{spell('n')} must be at least 1, got {self.n}")
        if self.max_slots is not None and self.max_slots < self.n:
            raise UsageError(f"{spell('max_slots')} must be at least {spell('n')} ({self.n}), got {self.max_slots}")
        if self.concurrency < 1:
            raise UsageError(f"{spell('concurrency')} must be at least 1, got {self.concurrency}")
        if self.max_cost is not None and self.max_cost < 0:
            raise UsageError(f"{spell('max_cost')} must be at least 0, got {self.max_cost}")
        if not SEED_RANGE[0] <= self.seed <= SEED_RANGE[1]:
            raise UsageError(f"{spell('seed')} must be between {SEED_RANGE[0]} and {SEED_RANGE[1]}, got {self.seed}")
        if unknown := sorted(set(self.limits) - set(STORED_LIMITS)):
            raise UsageError(f"unknown setting {spell(unknown[0])}; settings are {', '.join(STORED_LIMITS)}")
        for name in self.ablations:
            if name not in ABLATIONS:
                raise UsageError(f"{spell('ablations')}: unknown ablation {name!r}; ablations are {', '.join(ABLATIONS)}")
            for limit, value in ABLATIONS[name].items():
                if limit in self.limits and self.limits[limit] != value:
                    raise UsageError(f"{spell(name)} sets {spell(limit)} to {value}, but it is also given as "
                                     f"{self.limits[limit]}")
        if self.limits.get("user_style", "goal") not in USER_STYLES:
            raise UsageError(f"{spell('user_style')} must be one of {', '.join(USER_STYLES)}, got "
                             f"{self.limits['user_style']!r}")
        lo, hi = self.limits.get("min_turns", 3), self.limits.get("max_turns", 8)
        if lo < 1:
            raise UsageError(f"{spell('min_turns')} must be at least 1, got {lo}")
        if hi < lo:
            raise UsageError(f"{spell('min_turns')} {lo} is above {spell('max_turns')} {hi}")
        for name in ("emphasis_size", "max_rewrites", "max_attempts", "max_replans", "max_repairs", "min_keep_turns"):
            if self.limits.get(name, 0) < 0:
                raise UsageError(f"{spell(name)} must not be negative, got {self.limits[name]}")
        if self.mix is not None:
            if bad := [k for k in self.mix if k not in KINDS]:
                raise UsageError(f"{spell('mix')}: unknown kind {bad[0]!r}; kinds are {', '.join(KINDS)}")
            if any(v < 0 for v in self.mix.values()) or sum(self.mix.values()) <= 0:
                raise UsageError(f"{spell('mix')}: shares must be non-negative and add up to more than zero")

    def run_config(self) -> dict[str, Any]:
        """The settings a run is created with and fingerprinted by (those of `sap.runs.driver.run_config`)."""
        from sap.runs.driver import run_config

        limits = {**self.limits, **{k: v for name in self.ablations for k, v in ABLATIONS[name].items()}}
        return run_config(self.n, self.seed, self.mix, limits, max_slots=self.max_slots, agents=self.agents)


@cache
def live_fields() -> tuple[str, ...]:
    """SynthesisContext fields that hold live objects (agents, a timing dict): usable from Python on a temporary
    database (loaded on first use: the graph is heavy)."""
    from sap.graphs.synthesis import SynthesisContext

    return tuple(f.name for f in fields(SynthesisContext)
                 if f.init and f.name not in (*STORED_LIMITS, "toolset", "run_seed", "fsm_preset", "fsm_note",
                                              "configs", "patched"))


def live_context(settings_limits: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split keyword arguments meant for SynthesisContext into (limits stored with the run, live objects that are
    not); TypeError naming an argument that is neither."""
    stored, live = {}, {}
    for name, value in settings_limits.items():
        if name in STORED_LIMITS:
            stored[name] = value
        elif name in live_fields():
            live[name] = value
        else:
            raise TypeError(f"unknown setting {name!r}; settings are {', '.join(STORED_LIMITS + live_fields())}")
    return stored, live
