"""LLM planner: code binds what code can (earlier outputs, c0, stated values); the model fills new values and
chooses among several candidate sources; it also writes the trajectory's narrative for global rewrites."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from sap.agents.llm_common import STATE_CHARS, LLMRole, call_line, compact
from sap.agents.planner import Binding, NarrativeRequest, PlanRequest, RulePlanner
from sap.model import ArgProvenance, Tag
from sap.provenance.fields import candidates, type_ok

MAX_OPTIONS = 8


class PlannerAnswer(BaseModel):
    """The model's part of a binding: values for the NEW arguments and option indexes for the CHOOSE ones."""

    values: dict[str, Any] = Field(default_factory=dict)
    choices: dict[str, int] = Field(default_factory=dict)


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


def options_for(req: PlanRequest, name: str, tag: Tag) -> list[Option]:
    """Distinct candidate values for `name` from its declared source that tie on the best name match (the
    choice code cannot make), at most MAX_OPTIONS; one or none means code's binding stands."""
    schema = req.spec.properties.get(name, {})
    found: list[tuple[int, Option]] = []
    if tag == Tag.prev_output:
        for h in req.history:
            if h.call.ok and not (h.turn == req.turn and h.call.name == req.spec.name):
                found += [(c.score, Option(c.value, ArgProvenance(tag=Tag.prev_output, turn=h.turn, call=h.index,
                                                                  path=c.path)))
                          for c in candidates(name, schema, h.call.result, req.spec.aliases(name))]
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
            "planner_bind", PlannerAnswer, check=lambda a: self._check(req, a, new, choose),
            tool=req.spec.name, description=req.spec.description or "(none)",
            schemas=compact({n: req.spec.properties.get(n, {}) for n in [*new, *choose]}, 1200),
            bound=compact({n: v for n, v in base.args_exec.items() if n not in new and n not in choose}, 600),
            open="\n".join([f"- {n} (NEW, code's draft: {compact(base.args_exec[n], 120)})" for n in new] + [
                f"- {n} (CHOOSE one index):\n" + "\n".join(
                    f"    {i}: {compact(o.value, 80)} {o.label()}" + (" (code's pick)" if o.value == base.args_exec[n] else "")
                    for i, o in enumerate(opts))
                for n, opts in choose.items()]),
            history="\n".join(call_line(h.turn, h.index, h.call) for h in req.history[-6:]) or "(none)",
            state=compact(req.c0, STATE_CHARS), error=req.last_error or "(none)",
            failed=compact(req.failed_args, 400) if req.failed_args else "(none)")
        args, prov = dict(base.args_exec), dict(base.args_prov)
        for n in new:
            args[n] = answer.values[n]
        for n, opts in choose.items():
            picked = opts[answer.choices[n]]
            args[n], prov[n] = picked.value, picked.prov
        return Binding(args, prov, base.virtual)

    @staticmethod
    def _check(req: PlanRequest, answer: PlannerAnswer, new: list[str], choose: dict[str, list[Option]]) -> None:
        """Raise ValueError naming every open argument the answer leaves out, mistypes or picks wrongly."""
        problems = []
        for n in new:
            schema = req.spec.properties.get(n, {})
            if n not in answer.values:
                problems.append(f"values.{n}: missing")
            elif not type_ok(answer.values[n], schema):
                problems.append(f"values.{n}: {answer.values[n]!r} does not fit {compact(schema, 200)}")
        for n, opts in choose.items():
            if n not in answer.choices:
                problems.append(f"choices.{n}: missing")
            elif not 0 <= answer.choices[n] < len(opts):
                problems.append(f"choices.{n}: {answer.choices[n]} is not an option index 0..{len(opts) - 1}")
        if problems:
            raise ValueError("; ".join(problems))

    def narrate(self, req: NarrativeRequest) -> str:
        """The model's background story for the trajectory."""
        return self.llm.ask("planner_narrative", NarrativeAnswer, toolset=req.toolset,
                            state=compact(req.c0, STATE_CHARS),
                            tasks="\n".join(f"turn {i}: " + "; ".join(t) for i, t in enumerate(req.tasks))).narrative
