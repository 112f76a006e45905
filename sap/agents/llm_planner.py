"""LLM planner: code binds what code can (earlier outputs, c0, stated values); the model fills new values and
chooses where code's own ranking left several sources equal, for all calls of a turn in one request where it can;
in global message mode the first such request also writes the trajectory's narrative."""
from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, Field, RootModel

from sap.agents.llm_common import STATE_CHARS, Fit, LLMRole, call_line, compact, fit, newest_lines
from sap.agents.planner import (Ahead, Binding, HistoryCall, NarrativeRequest, PlanRequest, RulePlanner,
                                reference_selector, same_value)
from sap.llm.schema import closed, closed_copy, schema_errors
from sap.model import ArgProvenance, Tag, split_item_key
from sap.provenance.fields import Candidate

MAX_OPTIONS = 8
NARRATIVE_SCHEMA = closed({"narrative": {"type": "string", "minLength": 1}})
_SCALARS = (str, int, float)
_KEY = re.compile(r"\W+")


class PlannerAnswer(RootModel[dict[str, Any]]):
    """The model's part of a binding, one key per open argument: a NEW argument's value, a CHOOSE argument's
    option (its value, or its index when the options are not all strings or numbers)."""


class TurnPlanAnswer(RootModel[dict[str, Any]]):
    """The model's part of a turn's bindings: one PlannerAnswer per call with open arguments (`call_<i>`), and the
    narrative when it was asked for."""


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


def answer_key(name: str) -> str:
    """An argument's key in an answer schema: its name, an array item's field (`flights[0].number`) in word
    characters only (`flights_0_number`), which every provider's schema dialect takes."""
    return _KEY.sub("_", name).strip("_")


def arg_schema(req: PlanRequest, name: str) -> dict[str, Any]:
    """The JSON schema of argument `name` of the call, an array item's field included."""
    item = split_item_key(name)
    if item is None:
        return req.spec.properties.get(name, {})
    return req.spec.properties.get(item[0], {}).get("items", {}).get("properties", {}).get(item[2], {})


def tie_options(req: PlanRequest, ties: list[tuple[tuple[int, int] | None, Candidate]]) -> list[Option]:
    """The distinct values code's ranking left equal for one argument (each from its newest source), at most
    MAX_OPTIONS."""
    newest: dict[str, tuple[tuple[int, int] | None, Candidate]] = {}
    for doc, cand in ties:
        newest[json.dumps(cand.value, sort_keys=True, default=str)] = (doc, cand)
    out = []
    for doc, cand in list(newest.values())[:MAX_OPTIONS]:
        prov = (ArgProvenance(tag=Tag.initial_state, path=cand.path) if doc is None else
                ArgProvenance(tag=Tag.prev_output, turn=doc[0], call=doc[1], path=cand.path,
                              selector=reference_selector(req, doc[0], doc[1], cand.path)))
        out.append(Option(cand.value, prov))
    return out


@dataclass
class OpenCall:
    """What one call leaves to the model: code's binding (and the random state it started from), its NEW arguments
    and its CHOOSE arguments with their options."""

    req: PlanRequest
    base: Binding
    rng_state: Any
    new: list[str]
    choose: dict[str, list[Option]]

    def is_open(self) -> bool:
        """Whether any argument is the model's to decide."""
        return bool(self.new or self.choose)

    def schema(self, names: list[str]) -> dict[str, Any]:
        """The exact answer schema for the open arguments `names`: a NEW one under its parameter's own schema, a
        CHOOSE one as an enum of its option values (or indexes)."""
        properties: dict[str, Any] = {}
        for n in names:
            opts = self.choose.get(n)
            properties[answer_key(n)] = (closed_copy(arg_schema(self.req, n)) if opts is None else
                                         {"enum": [o.value for o in opts]} if by_value(opts) else
                                         {"type": "integer", "enum": list(range(len(opts)))})
        return closed(properties)

    def values(self, answer: dict[str, Any], names: list[str]) -> dict[str, Any]:
        """The argument values a schema-valid answer for `names` gives (a CHOOSE index read as its option's
        value)."""
        out = {}
        for n in names:
            got, opts = answer[answer_key(n)], self.choose.get(n)
            out[n] = got if opts is None or by_value(opts) else opts[got].value
        return out

    def given(self, answers: dict[str, Any]) -> dict[str, Any]:
        """The values decided ahead (in the turn's request) that still fit this binding: a NEW argument's value
        valid for its schema, a CHOOSE argument's value among its options now."""
        out = {}
        for n in self.new:
            if n in answers and not schema_errors(answers[n], closed_copy(arg_schema(self.req, n)), limit=1):
                out[n] = answers[n]
        for n, opts in self.choose.items():
            if n in answers and any(same_value(o.value, answers[n]) for o in opts):
                out[n] = answers[n]
        return out

    def open_lines(self, names: list[str]) -> str:
        """The open arguments `names` as the prompt lists them, code's draft or pick marked."""
        lines = []
        for n in names:
            if n in self.choose:
                opts = self.choose[n]
                lines.append(f"- {answer_key(n)} (CHOOSE one {'value' if by_value(opts) else 'index'}):\n" + "\n".join(
                    f"    {i}: {compact(o.value, 80)} {o.label()}"
                    + (" (code's pick)" if same_value(o.value, self.base.args_exec.get(n)) else "")
                    for i, o in enumerate(opts)))
            else:
                lines.append(f"- {answer_key(n)} (NEW, code's draft: {compact(draft(self.base, n), 400)})")
        return "\n".join(lines)

    def bound_text(self) -> str:
        """The arguments code bound and leaves as they are."""
        return compact({n: v for n, v in self.base.args_exec.items() if n not in self.new and n not in self.choose}, 600)


def draft(binding: Binding, name: str) -> Any:
    """The value a binding gives argument `name` (an array item's field included)."""
    item = split_item_key(name)
    if item is None:
        return binding.args_exec.get(name)
    param, index, field_name = item
    return binding.args_exec[param][index][field_name]


def _set(args: dict[str, Any], name: str, value: Any) -> None:
    """Set argument `name` (an array item's field included) in `args`."""
    item = split_item_key(name)
    if item is None:
        args[name] = value
    else:
        param, index, field_name = item
        args[param] = [dict(x) for x in args[param]]
        args[param][index][field_name] = value


class LLMPlanner:
    """Binds by code first (RulePlanner), then asks the model only for what code cannot decide: new values and
    choices among sources its ranking left equal. `ahead` asks for a whole turn at once; `bind` asks only for what
    that request did not settle (a retry after an error, a choice among results the turn made since)."""

    def __init__(self, llm: LLMRole, rule: RulePlanner | None = None) -> None:
        self.llm, self.rule = llm, rule or RulePlanner()

    def open_call(self, req: PlanRequest) -> OpenCall:
        """Code's binding of the call and what it leaves open."""
        rng_state = req.rng.getstate()
        base = self.rule.bind(req)
        new = [n for n, p in base.args_prov.items() if p.effective_tag() == Tag.self_create]
        choose = {n: opts for n, ties in base.ties.items() if len(opts := tie_options(req, ties)) > 1}
        return OpenCall(req, base, rng_state, new, choose)

    def bind(self, req: PlanRequest) -> Binding:
        """Code's binding with the model's new values and choices: those the turn's request gave (req.answers)
        where they still fit, the rest asked now."""
        call = self.open_call(req)
        values = call.given(req.answers)
        rest = [n for n in [*call.new, *call.choose] if n not in values]
        if rest:
            answer = self.llm.ask(
                "planner_bind", PlannerAnswer, call.schema(rest), tool=req.spec.name,
                description=req.spec.description or "(none)",
                schemas=compact({answer_key(n): arg_schema(req, n) for n in rest}, 1200), bound=call.bound_text(),
                open=call.open_lines(rest), history=_history(req.history), state=fit(req.c0, STATE_CHARS),
                error=req.last_error or "(none)",
                failed=compact(req.failed_args, 400) if req.failed_args else "(none)")
            values |= call.values(answer.root, rest)
        return self._apply(call, values) if values else call.base

    def ahead(self, reqs: list[PlanRequest], story: NarrativeRequest | None = None,
              later: list[PlanRequest] = ()) -> Ahead:
        """One request for the open arguments of a turn's calls (`reqs`, bound as code would bind them now; what
        `req.answers` decided before is not asked again), the new values of the `later` turns' calls (their choices
        wait for the results they choose among) and, with `story`, the trajectory's narrative; nothing open, no
        request."""
        calls: list[tuple[OpenCall, list[str]]] = []
        for req in reqs:
            call = self.open_call(req)
            given = call.given(req.answers)
            calls.append((call, [n for n in [*call.new, *call.choose] if n not in given]))
        for req in later:
            call = self.open_call(req)
            calls.append((call, [n for n in call.new if call.base.args_prov[n].tag == Tag.self_create]))
        calls = [(call, names) for call, names in calls if names]
        if not calls:
            return Ahead()
        properties: dict[str, Any] = {f"call_{k}": call.schema(names) for k, (call, names) in enumerate(calls)}
        if story is not None:
            properties["narrative"] = NARRATIVE_SCHEMA["properties"]["narrative"]
        now = reqs[0].turn if reqs else None
        blocks = "\n\n".join(
            f"call {k}: {call.req.spec.name}: {call.req.spec.description or '(no description)'}\n"
            + ("" if call.req.turn == now else f"  (in turn {call.req.turn}, later: its new values only)\n")
            + f"  parameter schemas: {compact({answer_key(n): arg_schema(call.req, n) for n in names}, 600)}\n"
            f"  already bound by code: {call.bound_text()}\n  open arguments:\n"
            + _indent(call.open_lines(names), "  ")
            for k, (call, names) in enumerate(calls))
        first = calls[0][0].req
        answer = self.llm.ask(
            "planner_turn", TurnPlanAnswer, closed(properties), calls=blocks, history=_history(first.history),
            state=fit(first.c0, STATE_CHARS),
            story="(none: do not write one)" if story is None else
            "\n".join(f"turn {i}: " + "; ".join(t) for i, t in enumerate(story.tasks)))
        values = {call.req.key: call.values(answer.root[f"call_{k}"], names) for k, (call, names) in enumerate(calls)}
        return Ahead(values, answer.root.get("narrative"))

    def _apply(self, call: OpenCall, values: dict[str, Any]) -> Binding:
        """The call bound again with the model's choices kept (so the arguments bound after a chosen one fit it),
        from the same random state, then its new values set."""
        picks = {n: v for n, v in values.items() if n in call.choose}
        binding = call.base
        if picks:
            rng = random.Random()
            rng.setstate(call.rng_state)
            binding = self.rule.bind(replace(call.req, rng=rng, picks=picks))
        args, prov = dict(binding.args_exec), dict(binding.args_prov)
        for n in call.new:
            if n in values and n in prov and prov[n].effective_tag() == Tag.self_create:
                _set(args, n, values[n])
        return Binding(args, prov, binding.virtual)

    def narrate(self, req: NarrativeRequest) -> str:
        """The model's background story for the trajectory."""
        return self.llm.ask("planner_narrative", NarrativeAnswer, NARRATIVE_SCHEMA, toolset=req.toolset,
                            state=fit(req.c0, STATE_CHARS),
                            tasks="\n".join(f"turn {i}: " + "; ".join(t) for i, t in enumerate(req.tasks))).narrative


def _history(history: list[HistoryCall]) -> Fit:
    """The conversation's last calls, one line each, as many of the newest as the prompt's budget allows."""
    return Fit(newest_lines([call_line(h.turn, h.index, h.call) for h in history[-6:]]), 6 * 800)


def _indent(text: str, prefix: str) -> str:
    """`text` with every line indented by `prefix`."""
    return "\n".join(prefix + line for line in text.splitlines())
