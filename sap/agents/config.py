"""Which implementation and model each agent role uses: from a TOML file and command-line options."""
from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sap.agents.llm_common import LLMRole
from sap.agents.roles import ROLE_SPECS, ROLE_TABLE, ROLES, Role, resolve
from sap.errors import ConfigError
from sap.llm import LLMClient, ModelConfig
from sap.prompts import prompt

Impl = Literal["rule", "llm"]


class AgentsConfigError(ConfigError):
    """An agents config that cannot be used; the message names the file, the field and the value."""


class RoleConfig(BaseModel):
    """One role: its implementation and, for `llm`, its model."""

    model_config = ConfigDict(extra="forbid")

    agents: Impl = "rule"
    model: ModelConfig | None = None


class AgentsConfig(BaseModel):
    """Every role's choice, plus the messenger's mode (per_turn fragments or one global rewrite)."""

    model_config = ConfigDict(extra="forbid")

    roles: dict[Role, RoleConfig] = Field(default_factory=lambda: {r: RoleConfig() for r in ROLES})
    message_mode: Literal["per_turn", "global"] = "per_turn"
    fsm_fallback: Literal["rule", "none"] = "rule"  # the rule FSM stands in (recorded) if an LLM draft never verifies

    def uses_llm(self) -> bool:
        """Whether any role calls a model."""
        return any(rc.agents == "llm" for rc in self.roles.values())

    def public(self) -> dict[str, Any]:
        """JSON-safe view for fingerprints and record meta (no keys: configs hold only key variable names)."""
        return self.model_dump(mode="json")


def build_agents_config(file: str | Path | None = None, *, agents: Impl | None = None,
                        model_overrides: dict[str, Any] | None = None,
                        role_models: dict[str, str | None] | None = None,
                        message_mode: str | None = None, fsm_fallback: str | None = None) -> AgentsConfig:
    """Merge, in order: defaults, the TOML file, then command-line values (`--agents`, `--model`, `--api-base`,
    `--temperature`, `--max-tokens` for every role, `--planner-model` and so on per role).

    TOML layout: top-level `agents`, `message_mode` and `fsm_fallback`; a `[model]` table of ModelConfig fields shared by all
    roles; `[roles.<role>]` tables with `agents` and any ModelConfig fields for that role alone.
    A role given its own model on the command line becomes an LLM role."""
    where = str(file) if file else "command line"
    raw: dict[str, Any] = {}
    if file:
        try:
            raw = tomllib.loads(Path(file).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise AgentsConfigError(f"{file}: {exc}") from exc
    unknown = set(raw) - {"agents", "message_mode", "fsm_fallback", "model", "roles"}
    if unknown:
        raise AgentsConfigError(f"{where}: unknown key(s) {sorted(unknown)}; "
                                "expected agents, message_mode, fsm_fallback, model, roles")
    shared = {**raw.get("model", {}), **{k: v for k, v in (model_overrides or {}).items() if v is not None}}
    default_impl = agents or raw.get("agents") or ("llm" if shared.get("model") else "rule")
    roles_raw = raw.get("roles", {})
    if unknown := set(roles_raw) - set(ROLES):
        raise AgentsConfigError(f"{where}: unknown role(s) {sorted(unknown)}; roles are {list(ROLES)}")
    roles: dict[str, Any] = {}
    for role in ROLES:
        own = dict(roles_raw.get(role, {}))
        impl = own.pop("agents", default_impl)
        if (cli_model := (role_models or {}).get(role)) is not None:
            own["model"], impl = cli_model, "llm"
        fields = {**shared, **own}
        if impl == "llm" and "model" not in fields:
            raise AgentsConfigError(f"{where}: role {role} uses agents 'llm' but no model is given "
                                    f"(--model, --{role}-model, or model = ... in [model] / [roles.{role}])")
        roles[role] = {"agents": impl, "model": fields if impl == "llm" else None}
    try:
        cfg = AgentsConfig(roles=roles, message_mode=message_mode or raw.get("message_mode", "per_turn"),
                           fsm_fallback=fsm_fallback or raw.get("fsm_fallback", "rule"))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise AgentsConfigError(f"{where}: {field}: {first['msg']} (value {first.get('input')!r})") from exc
    _check_shared_limits(cfg, where)
    return cfg


def _check_shared_limits(cfg: AgentsConfig, where: str) -> None:
    """Roles on one endpoint share its limiter, so they must agree on concurrency, rpm and tpm."""
    seen: dict[tuple[str, str | None], tuple[str, tuple[Any, ...]]] = {}
    for role, rc in cfg.roles.items():
        if rc.model is None:
            continue
        key, limits = (rc.model.model, rc.model.api_base), (rc.model.concurrency, rc.model.rpm, rc.model.tpm)
        other = seen.setdefault(key, (role, limits))
        if other[1] != limits:
            raise AgentsConfigError(f"{where}: roles {other[0]} and {role} use {key[0]} with different limits "
                                    f"(concurrency, rpm, tpm) {other[1]} vs {limits}; one endpoint has one limiter")


def prompt_hashes() -> dict[str, str]:
    """The hash of every prompt file any role can use, by prompt name (for run fingerprints)."""
    names = sorted({name for spec in ROLE_TABLE for name in spec.prompt_names()})
    return {name: prompt(name).sha for name in names}


def agents_meta(cfg: AgentsConfig) -> dict[str, Any]:
    """What each record's meta says about its agents: implementation, model and the hash of every prompt used."""
    out: dict[str, Any] = {}
    for role, rc in cfg.roles.items():
        entry: dict[str, Any] = {"agents": rc.agents}
        if rc.agents == "llm" and rc.model is not None:
            entry["model"] = rc.model.model
            entry["prompts"] = {name: prompt(name).sha for name in ROLE_SPECS[role].prompts[cfg.message_mode]}
        out[role] = entry
    return {"roles": out, "message_mode": cfg.message_mode, "fsm_fallback": cfg.fsm_fallback}


def build_agents(cfg: AgentsConfig, client: LLMClient) -> dict[str, Any]:
    """SynthesisContext keyword arguments for `cfg`: one agent per role of the role table (its LLM class for an LLM
    role, else its rule class), the narrative switch and the meta. `client` is the run's LLMClient (only used by LLM
    roles)."""
    messenger = cfg.roles["messenger"]
    if cfg.message_mode == "global" and (messenger.agents != "llm" or messenger.model is None):
        raise AgentsConfigError("message_mode 'global' needs an LLM messenger (the rule messenger writes per turn)")
    agents: dict[str, Any] = {}
    for spec in ROLE_TABLE:
        rc = cfg.roles[spec.name]
        if rc.agents == "llm" and rc.model is not None:
            agents[spec.slot] = resolve(spec.llm)(LLMRole(client, rc.model, spec.name), **spec.llm_options(cfg))
        else:
            agents[spec.slot] = resolve(spec.rule)()
    return {**agents, "narrative": cfg.message_mode == "global",
            "agents_meta": agents_meta(cfg) if cfg.uses_llm() else {}}
