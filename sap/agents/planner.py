"""Planner role: binds each argument of a call by its provenance tag; the rule implementation works by code."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Protocol

from sap.model import ArgProvenance, Tag, ToolCall, ToolSpec
from sap.provenance.fields import Candidate, candidates, match_score, type_ok
from sap.provenance.generate import generate

_OPTIONAL_RATE = 0.25


@dataclass(frozen=True)
class HistoryCall:
    """A committed call visible to the planner, located by turn and call index."""

    turn: int
    index: int
    call: ToolCall


@dataclass(frozen=True)
class StatedValue:
    """A value the user stated in an earlier turn (as a new or configuration value)."""

    turn: int
    param: str
    value: Any


@dataclass
class PlanRequest:
    """Everything the planner may use to bind one call."""

    spec: ToolSpec
    tags: dict[str, Tag]
    turn: int
    index: int
    history: list[HistoryCall]
    stated: list[StatedValue]
    c0: dict[str, Any]
    rng: random.Random
    last_error: str | None = None
    failed_args: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Binding:
    """The arguments to execute and where each value came from."""

    args_exec: dict[str, Any]
    args_prov: dict[str, ArgProvenance]


class Planner(Protocol):
    """Binds the arguments of one call (rule or LLM)."""

    def bind(self, req: PlanRequest) -> Binding:
        """Choose argument values honouring the tags, avoiding what failed before."""


def _fresh(options: list[Any], failed: list[Any]) -> list[Any]:
    """Options not tried in a failed attempt, or all options if every one was tried."""
    left = [o for o in options if o not in failed]
    return left or options


class RulePlanner:
    """Binds by code: P_o from earlier results, P_i from c0, P_u from stated values, P_c by generators."""

    def bind(self, req: PlanRequest) -> Binding:
        """Bind required arguments by tag, plus a few optional ones, with fallbacks recorded as P_f."""
        args: dict[str, Any] = {}
        prov: dict[str, ArgProvenance] = {}
        params = list(req.spec.required)
        for name, schema in req.spec.properties.items():
            if name not in params and self._wants_optional(name, schema, req):
                params.append(name)
        for name in params:
            schema = req.spec.properties.get(name, {})
            declared = req.tags.get(name, Tag.self_create)
            failed = [a[name] for a in req.failed_args if name in a]
            value, source = self._by_tag(declared, name, schema, req, failed)
            if source is None:
                value, source = self._fallback(declared, name, schema, req, failed)
            args[name], prov[name] = value, source
        return Binding(args, prov)

    def _wants_optional(self, name: str, schema: dict[str, Any], req: PlanRequest) -> bool:
        """Fill an optional parameter now and then, when it is an enum or flag (safe to choose)."""
        return ("enum" in schema or schema.get("type") == "boolean") and req.rng.random() < _OPTIONAL_RATE

    def _by_tag(self, tag: Tag, name: str, schema: dict[str, Any], req: PlanRequest,
                failed: list[Any]) -> tuple[Any, ArgProvenance | None]:
        """Bind from the declared source; (None, None) if that source has nothing usable."""
        if tag == Tag.prev_output:
            return self._from_history(name, schema, req, failed)
        if tag == Tag.initial_state:
            return self._from_config(name, schema, req, failed)
        if tag == Tag.prev_user_msg:
            return self._from_stated(name, schema, req, failed)
        return self._create(name, schema, req, failed), ArgProvenance(tag=Tag.self_create)

    def _fallback(self, declared: Tag, name: str, schema: dict[str, Any], req: PlanRequest,
                  failed: list[Any]) -> tuple[Any, ArgProvenance]:
        """The first other source that works, recorded as a fallback from the declared tag."""
        for tag in (Tag.prev_output, Tag.initial_state, Tag.prev_user_msg):
            if tag == declared:
                continue
            value, src = self._by_tag(tag, name, schema, req, failed)
            if src is not None:
                return value, src.model_copy(update={"tag": Tag.fallback, "fallback_from": declared})
        value = self._create(name, schema, req, failed)
        return value, ArgProvenance(tag=Tag.fallback, fallback_from=declared)

    def _pick(self, found: list[Candidate], failed: list[Any], rng: random.Random) -> Candidate:
        """Best-scoring candidate, avoiding failed values."""
        best = max(c.score for c in found)
        top = [c for c in found if c.score == best]
        values = _fresh([c.value for c in top], failed)
        return rng.choice([c for c in top if c.value in values])

    def _from_history(self, name: str, schema: dict[str, Any], req: PlanRequest,
                      failed: list[Any]) -> tuple[Any, ArgProvenance | None]:
        """A field of an earlier result: this turn's earlier calls first, else mostly the newest producer."""
        per_call = [(h, candidates(name, schema, h.call.result)) for h in req.history if h.call.ok]
        per_call = [(h, cs) for h, cs in per_call if cs]
        if not per_call:
            return None, None
        same_turn = [p for p in per_call if p[0].turn == req.turn]
        if same_turn:
            h, found = same_turn[-1]
        elif req.rng.random() < 0.6:
            h, found = per_call[-1]
        else:
            h, found = req.rng.choice(per_call)
        if all(c.value in failed for c in found):
            pool = [(h2, c) for h2, cs in per_call for c in cs if c.value not in failed]
            if pool:
                h, c = req.rng.choice(pool)
                return c.value, ArgProvenance(tag=Tag.prev_output, turn=h.turn, call=h.index, path=c.path)
        c = self._pick(found, failed, req.rng)
        return c.value, ArgProvenance(tag=Tag.prev_output, turn=h.turn, call=h.index, path=c.path)

    def _from_config(self, name: str, schema: dict[str, Any], req: PlanRequest,
                     failed: list[Any]) -> tuple[Any, ArgProvenance | None]:
        """A value of the initial configuration c0."""
        found = candidates(name, schema, req.c0)
        if not found:
            return None, None
        c = self._pick(found, failed, req.rng)
        return c.value, ArgProvenance(tag=Tag.initial_state, path=c.path)

    def _from_stated(self, name: str, schema: dict[str, Any], req: PlanRequest,
                     failed: list[Any]) -> tuple[Any, ArgProvenance | None]:
        """A value the user stated in an earlier turn for a parameter of the same meaning."""
        found = [s for s in req.stated if s.turn < req.turn and match_score(name, (s.param,)) and type_ok(s.value, schema)]
        values = _fresh([s.value for s in found], failed)
        found = [s for s in found if s.value in values]
        if not found:
            return None, None
        s = req.rng.choice(found)
        return s.value, ArgProvenance(tag=Tag.prev_user_msg, turn=s.turn)

    def _create(self, name: str, schema: dict[str, Any], req: PlanRequest, failed: list[Any]) -> Any:
        """A new value from the generators, different from failed ones where possible."""
        value = generate(name, schema, req.rng)
        for _ in range(5):
            if value not in failed:
                break
            value = generate(name, schema, req.rng)
        return value
