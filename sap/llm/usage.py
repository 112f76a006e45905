"""Token usage and cost per role (UsageLedger), the price of one response, and the run's spending cap (Budget)."""
from __future__ import annotations

import functools
import threading
from dataclasses import asdict, dataclass, fields
from typing import Any

from sap.errors import SapError
from sap.llm.config import ModelConfig, load_litellm


@dataclass
class RoleUsage:
    """Counters of one role. `priced` is False once any response's cost was unknown (counted as 0)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    transient_retries: int = 0
    retry_wait_s: float = 0.0
    validation_failures: int = 0
    failures: int = 0
    priced: bool = True

    def add(self, other: RoleUsage) -> None:
        """Add other's counters to these."""
        for f in fields(self):
            if f.name != "priced":
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        self.priced = self.priced and other.priced


@functools.lru_cache(maxsize=256)
def in_cost_map(model: str) -> bool:
    """Whether LiteLLM's bundled cost map knows `model` (looked up once per model and process: a miss searches
    LiteLLM's fallback names, about half a millisecond of CPU)."""
    try:
        load_litellm().get_model_info(model)
    except Exception:  # LiteLLM raises ModelNotMappedError, and others for odd names
        return False
    return True


@functools.lru_cache(maxsize=256)
def role_prices(cfg: ModelConfig) -> tuple[float, float] | None:
    """(input, output) USD per token: the role's own prices, else LiteLLM's cost map (looked up once per config),
    else None."""
    if cfg.input_cost_per_token is not None and cfg.output_cost_per_token is not None:
        return cfg.input_cost_per_token, cfg.output_cost_per_token
    if not in_cost_map(cfg.model):
        return None
    info = load_litellm().get_model_info(cfg.model)
    return float(info.get("input_cost_per_token") or 0.0), float(info.get("output_cost_per_token") or 0.0)


def token_cost(cfg: ModelConfig, prompt_tokens: int, completion_tokens: int) -> tuple[float, bool]:
    """(cost in USD, priced) of a request's tokens at `role_prices`; (0.0, False) if the model has none."""
    prices = role_prices(cfg)
    if prices is None:
        return 0.0, False
    return prompt_tokens * prices[0] + completion_tokens * prices[1], True


def response_cost(cfg: ModelConfig, prompt_tokens: int, completion_tokens: int,
                  response: Any) -> tuple[float, bool]:
    """(cost in USD, priced): the config's own prices if given, else LiteLLM's cost map; (0.0, False) if unknown.

    From the cost map, the price LiteLLM already stamped on the response (`_hidden_params["response_cost"]`, the
    completion_cost it computes for every response) is taken rather than computed a second time."""
    if cfg.input_cost_per_token is not None and cfg.output_cost_per_token is not None:
        return token_cost(cfg, prompt_tokens, completion_tokens)
    hidden = getattr(response, "_hidden_params", None)  # a dict on chat responses, an object on some others
    stamped = hidden.get("response_cost") if isinstance(hidden, dict) else getattr(hidden, "response_cost", None)
    if stamped is not None:
        return float(stamped), True
    if not in_cost_map(cfg.model):  # LiteLLM could not price it either: spare a second failing search
        return 0.0, False
    try:
        return float(load_litellm().completion_cost(completion_response=response)), True
    except Exception:  # LiteLLM raises ModelNotMappedError, and others for odd responses: the cost is unknown
        return 0.0, False


class UsageLedger:
    """Thread-safe usage counters per role, with totals; snapshots are JSON-safe and can be merged back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roles: dict[str, RoleUsage] = {}

    def _role(self, role: str) -> RoleUsage:
        return self._roles.setdefault(role, RoleUsage())

    def record_response(self, role: str, prompt_tokens: int, completion_tokens: int,
                        cost_usd: float, priced: bool) -> None:
        """Count one answered request."""
        with self._lock:
            self._role(role).add(RoleUsage(calls=1, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                                           cost_usd=cost_usd, priced=priced))

    def record_transient_retry(self, role: str, wait_s: float) -> None:
        """Count one retry of a transient error, after a wait of wait_s seconds."""
        with self._lock:
            self._role(role).add(RoleUsage(transient_retries=1, retry_wait_s=wait_s))

    def record_validation_failure(self, role: str) -> None:
        """Count one answer that did not parse or validate."""
        with self._lock:
            self._role(role).validation_failures += 1

    def record_failure(self, role: str) -> None:
        """Count one role call that gave up."""
        with self._lock:
            self._role(role).failures += 1

    def spent_usd(self) -> float:
        """The total cost so far."""
        with self._lock:
            return sum(u.cost_usd for u in self._roles.values())

    def snapshot(self) -> dict[str, Any]:
        """{"roles": {role: counters}, "total": counters}, JSON-safe."""
        with self._lock:
            total = RoleUsage()
            for usage in self._roles.values():
                total.add(usage)
            return {"roles": {role: asdict(u) for role, u in sorted(self._roles.items())}, "total": asdict(total)}

    def merge(self, snapshot: dict[str, Any]) -> None:
        """Add a stored snapshot's per-role counters (e.g. a resumed run's earlier usage)."""
        with self._lock:
            for role, counters in snapshot.get("roles", {}).items():
                self._role(role).add(RoleUsage(**counters))


class BudgetExceeded(SapError, RuntimeError):
    """The run has spent its cap; no further LLM request is sent."""

    def __init__(self, spent_usd: float, max_cost_usd: float):
        super().__init__(f"LLM budget exhausted: spent ${spent_usd:.6f} of the ${max_cost_usd:.6f} cap")
        self.spent_usd = spent_usd
        self.max_cost_usd = max_cost_usd


@dataclass(frozen=True)
class Budget:
    """A spending cap in USD, checked against a ledger before every request."""

    max_cost_usd: float

    def check(self, ledger: UsageLedger) -> None:
        """Raise BudgetExceeded when the ledger's spending has reached the cap."""
        spent = ledger.spent_usd()
        if spent >= self.max_cost_usd:
            raise BudgetExceeded(spent, self.max_cost_usd)
