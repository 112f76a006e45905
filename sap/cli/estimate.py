"""The cost estimate of `sap synthesize --dry-run`: a few slots run against an in-process stand-in model (the
smallest answer each request's schema admits) measure every LLM role's calls and prompt tokens per slot, and each
role's prices (its own, else LiteLLM's cost map) turn them into dollars. Completion tokens are bounded: the
stand-in's short answers below, each role's max_tokens per call above."""
from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from sap.agents.config import AgentsConfig
from sap.llm.config import ModelConfig, load_litellm
from sap.llm.usage import role_prices
from sap.model import Toolset
from sap.runs.settings import RunSettings

_STAND_IN = "openai/sap-stand-in-"  # the stand-in model of a role: this prefix and the role's name
PER_RUN_ROLES = frozenset({"fsm_builder"})  # roles called once per run (the FSM is built once per toolset)


@dataclass
class RoleEstimate:
    """One LLM role's load measured over the sample's slots, its model and prices (None when neither the role nor
    LiteLLM knows them)."""

    model: str
    max_tokens: int
    calls: int = 0
    prompt_tokens: int = 0
    answer_tokens: int = 0  # the stand-in's answers: a lower bound on what a real model writes
    prices: tuple[float, float] | None = None


@dataclass
class CostEstimate:
    """What `sample` stand-in slots measured, and the dollar range for a run of `low_slots` to `high_slots` slots."""

    sample: int
    roles: dict[str, RoleEstimate] = field(default_factory=dict)
    low_slots: int = 0
    high_slots: int = 0

    def dollars(self) -> tuple[float, float] | None:
        """(low, high) USD: `low_slots` slots with the stand-in's answer lengths, `high_slots` slots with every
        answer at max_tokens; None if a role's model has no known price."""
        if any(r.prices is None for r in self.roles.values()):
            return None
        low = high = 0.0
        for role, r in self.roles.items():  # measured totals over the sample, scaled to the run (a per-run role once)
            pin, pout = r.prices  # type: ignore[misc]
            lows, highs = (1, 1) if role in PER_RUN_ROLES else (self.low_slots / self.sample,
                                                                   self.high_slots / self.sample)
            low += lows * (r.prompt_tokens * pin + r.answer_tokens * pout)
            high += highs * (r.prompt_tokens * pin + r.calls * r.max_tokens * pout)
        return low, high

    def lines(self) -> list[str]:
        """The estimate as the dry run prints it."""
        per_slot = [f"{role} {r.calls / self.sample:.1f} ({r.prompt_tokens / self.sample:.0f} prompt tokens)"
                    for role, r in sorted(self.roles.items()) if role not in PER_RUN_ROLES]
        per_run = [f"{role} {r.calls} ({r.prompt_tokens} prompt tokens)" for role, r in sorted(self.roles.items())
                   if role in PER_RUN_ROLES]
        out = [f"  calls     per slot, measured on {self.sample} slots with a stand-in model that gives the "
               "smallest answer its schema admits (it fails more often than a real model, so retries, repair and "
               "re-planning are counted high): " + "; ".join(per_slot) + ("; per run: " + "; ".join(per_run)
                                                                          if per_run else "")]
        money = self.dollars()
        if money is None:
            unknown = sorted(f"{role} ({r.model})" for role, r in self.roles.items() if r.prices is None)
            out.append(f"  cost      unknown: no price for {', '.join(unknown)} in LiteLLM's cost map; give "
                       "input_cost_per_token and output_cost_per_token in the agents file")
        else:
            out.append(f"  cost      {_usd(money[0])} to {_usd(money[1])} ({self.low_slots} slots with short answers "
                       f"to {self.high_slots} slots with every answer at max_tokens)")
        return out


def _usd(amount: float) -> str:
    """Dollars with cents, or three significant digits below a dollar ($0.00147)."""
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.3g}"


def _stand_in_agents(agents: AgentsConfig, api_base: str) -> AgentsConfig:
    """The same agents with every LLM role's model a stand-in on `api_base`, named after the role."""
    roles = {role: rc.model_copy(update={"model": rc.model.model_copy(update={
        "model": _STAND_IN + role, "api_base": api_base, "api_key_env": None, "max_retries": 0,
        "input_cost_per_token": 0.0, "output_cost_per_token": 0.0})}) if rc.agents == "llm" and rc.model else rc
        for role, rc in agents.roles.items()}
    return agents.model_copy(update={"roles": roles})


def estimate_cost(toolset: Toolset, settings: RunSettings, sample: int = 3) -> CostEstimate:
    """Run `sample` slots of this run's settings against the stand-in model on a temporary database (nothing of the
    user's is read or written) and price what they asked for; the range covers n to max_slots slots."""
    from sap.api import synthesize
    from sap.testing.minimal_model import minimal_model
    from sap.testing.scripted_llm import ScriptedLLMServer

    llm_roles = {role: rc.model for role, rc in settings.agents.roles.items() if rc.agents == "llm" and rc.model}
    estimate = CostEstimate(sample=sample, low_slots=settings.n,
                            high_slots=settings.run_config()["max_slots"])
    estimate.roles = {role: RoleEstimate(cfg.model, cfg.max_tokens, prices=role_prices(cfg))
                      for role, cfg in llm_roles.items()}
    if not llm_roles:
        return estimate
    litellm, lock = load_litellm(), threading.Lock()
    seen: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])

    def counting(request: dict[str, Any]) -> str:
        answer = minimal_model(request)
        role = str(request.get("model", "")).removeprefix(_STAND_IN.split("/", 1)[1])
        model = llm_roles[role].model  # every stand-in model is named after its LLM role
        prompt = litellm.token_counter(model=model, messages=request.get("messages", []))
        written = litellm.token_counter(model=model, text=answer)
        with lock:
            counts = seen[role]
            counts[0], counts[1], counts[2] = counts[0] + 1, counts[1] + prompt, counts[2] + written
        return answer

    with ScriptedLLMServer(responder=counting) as server:
        synthesize(toolset, sample, seed=settings.seed, agents_config=_stand_in_agents(settings.agents,
                                                                                        server.api_base),
                   mix=settings.mix, max_slots=sample, ablations=settings.ablations, **settings.limits)
    for role, (calls, prompt, written) in seen.items():
        if role in estimate.roles:
            r = estimate.roles[role]
            r.calls, r.prompt_tokens, r.answer_tokens = calls, prompt, written
    return estimate
