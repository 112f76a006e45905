"""LLM planner: code binds what code can (earlier outputs, c0, stated values); the model fills new values and
chooses among several candidate sources; it also writes the trajectory's narrative for global rewrites."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, RootModel

from sap.agents.llm_common import STATE_CHARS, LLMRole, call_line, compact
from sap.agents.planner import Binding, NarrativeRequest, PlanRequest, RulePlanner, reference_selector, referable
from sap.llm.schema import closed, closed_copy
from sap.model import ArgProvenance, Tag
from sap.provenance.fields import candidates

MAX_OPTIONS = 8
NARRATIVE_SCHEMA = closed({"narrative": {"type": "string", "minLength": 1}})
_SCALARS = (str, int, float)


class PlannerAnswer(RootModel[dict[str, Any]]):
    """The model's part of a binding, one key per open argument: a NEW argument's value, a CHOOSE argument's
    option (its value, or its index when the options are not all strings or numbers)."""


class NarrativeAnswer(BaseModel):
    """The background story of one trajectory."""

    narrative: str = Field(min_length=1)


@dataclass(frozen=True)
class Option:
    """One candidate source for an argument: its value and the provenance that value would carry."""

    value: Any
    prov: ArgProvenance

    def label(self) -> str:
        """Where the value is, in words the model can use."""
        if self.prov.tag == Tag.prev_output:
            return f"from turn {self.prov.turn} call {self.prov.call} result at {self.prov.path}"
        return f"from the initial state at {self.prov.path}"


def by_value(options: list[Option]) -> bool:
    """Whether a CHOOSE argument is answered with the option's value (all strings or numbers), not its index."""
    return all(isinstance(o.value, _SCALARS) and not isinstance(o.value, bool) for o in options)


def bind_schema(req: PlanRequest, new: list[str], choose: dict[str, list[Option]]) -> dict[str, Any]:
    """The exact answer schema of one planning request: every open argument required, nothing else; a NEW one
    under its parameter's own schema, a CHOOSE one as an enum of its option values (or indexes)."""
    properties: dict[str, Any] = {n: closed_copy(req.spec.properties.get(n, {})) for n in new}
    for n, opts in choose.items():
        properties[n] = ({"enum": [o.value for o in opts]} if by_value(opts)
                         else {"type": "integer", "enum": list(range(len(opts)))})
    return closed(properties)


def picked_option(options: list[Option], answer: Any) -> Option:
    """The option a schema-valid CHOOSE answer names (a value of the enum, or an index)."""
    if by_value(options):
        return next(o for o in options if o.value == answer and isinstance(o.value, str) == isinstance(answer, str))
    return options[answer]


def options_for(req: PlanRequest, name: str, tag: Tag) -> list[Option]:
    """Distinct candidate values for `name` from its declared source that tie on the best name match (the
    choice code cannot make), at most MAX_OPTIONS; one or none means code's binding stands."""
    schema = req.spec.properties.get(name, {})
    found: list[tuple[int, Option]] = []
    if tag == Tag.prev_output:
        pool = referable([((h.turn, h.index), c) for h in req.history
                          if h.call.ok and not (h.turn == req.turn and h.call.name == req.spec.name)
                          for c in candidates(name, schema, h.call.result, req.spec.aliases(name))], req.history)
        found = [(c.score, Option(c.value, ArgProvenance(tag=Tag.prev_output, turn=t, call=i, path=c.path,
                                                         selector=reference_selector(req, t, i, c.path))))
                 for (t, i), c in pool]
    elif tag == Tag.initial_state:
        found = [(c.score, Option(c.value, ArgProvenance(tag=Tag.initial_state, path=c.path)))
                 for c in candidates(name, schema, req.c0, req.spec.aliases(name))]
    failed = [a[name] for a in req.failed_args if name in a]
    found = [(score, opt) for score, opt in found if opt.value not in failed]
    best = max((score for score, _ in found), default=None)
    out: list[Option] = []
    for score, opt in found:
        if score == best and all(o.value != opt.value for o in out):
            out.append(opt)
    return out[:MAX_OPTIONS]


class LLMPlanner:
    """Binds by code first (RulePlanner), then asks the model only for what needs a choice; no open argument,
    no LLM call."""

    def __init__(self, llm: LLMRole, rule: RulePlanner | None = None) -> None:
        self.llm, self.rule = llm, rule or RulePlanner()

    def bind(self, req: PlanRequest) -> Binding:
        """The rule binding with NEW values and ambiguous source choices decided by the model."""
        base = self.rule.bind(req)
        new = [n for n, p in base.args_prov.items() if p.effective_tag() == Tag.self_create]
        choose = {n: opts for n, p in base.args_prov.items() if p.tag in (Tag.prev_output, Tag.initial_state)
                  and len(opts := options_for(req, n, p.tag)) > 1}
        if not new and not choose:
            return base
        answer = self.llm.ask(
            "planner_bind", PlannerAnswer, bind_schema(req, new, choose),
            tool=req.spec.name, description=req.spec.description or "(none)",
            schemas=compact({n: req.spec.properties.get(n, {}) for n in [*new, *choose]}, 1200),
            bound=compact({n: v for n, v in base.args_exec.items() if n not in new and n not in choose}, 600),
            open="\n".join([f"- {n} (NEW, code's draft: {compact(base.args_exec[n], 120)})" for n in new] + [
                f"- {n} (CHOOSE one {'value' if by_value(opts) else 'index'}):\n" + "\n".join(
                    f"    {i}: {compact(o.value, 80)} {o.label()}" + (" (code's pick)" if o.value == base.args_exec[n] else "")
                    for i, o in enumerate(opts))
                for n, opts in choose.items()]),
            history="\n".join(call_line(h.turn, h.index, h.call) for h in req.history[-6:]) or "(none)",
            state=compact(req.c0, STATE_CHARS), error=req.last_error or "(none)",
            failed=compact(req.failed_args, 400) if req.failed_args else "(none)")
        args, prov = dict(base.args_exec), dict(base.args_prov)
        for n in new:
            args[n] = answer.root[n]
        for n, opts in choose.items():
            picked = picked_option(opts, answer.root[n])
            args[n], prov[n] = picked.value, picked.prov
        return Binding(args, prov, base.virtual)

    def narrate(self, req: NarrativeRequest) -> str:
        """The model's background story for the trajectory."""
        return self.llm.ask("planner_narrative", NarrativeAnswer, NARRATIVE_SCHEMA, toolset=req.toolset,
                            state=compact(req.c0, STATE_CHARS),
                            tasks="\n".join(f"turn {i}: " + "; ".join(t) for i, t in enumerate(req.tasks))).narrative
