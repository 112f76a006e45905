"""Query generation for a sampled chain: a user query stating every user-supplied argument verbatim, plus an
echo-back of those arguments as JSON; a sample whose echo differs from the sampled arguments is rejected."""
from __future__ import annotations

import json
import random
import re
from typing import Any, Protocol, Sequence

from pydantic import BaseModel, Field

from sap.agents.llm_common import LLMRole, compact
from sap.llm.schema import closed, closed_copy, containing
from sap.cache.sampling import Sample
from sap.model import ToolSpec
from sap.provenance.checks import mention_texts, normalize_text
from sap.text import describe_value, humanize, task_phrase

_OPENERS = ["Could you help me with this: ", "I need a hand. ", "Please do the following for me. ", ""]
_THEN = [" Then ", " After that, ", " Next, "]
QUERY_RUN = 600  # characters of a chain's request around its stated values: a step may state none, so several sentences


class EchoCall(BaseModel):
    """The arguments one step's user states, as the writer read them back from its own query."""

    function: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class QueryDraft(BaseModel):
    """A query with its echo-back."""

    query: str = Field(min_length=1)
    echo: list[EchoCall]


class QueryWriter(Protocol):
    """Writes the user query of a sampled chain (rule or LLM)."""

    def write(self, sample: Sample, specs: dict[str, ToolSpec], rng: random.Random,
              feedback: Sequence[str] = ()) -> QueryDraft:
        """The query and the echo of every argument it states; `feedback` lists what the judge found wrong with the
        previous query of this sample (empty for the first)."""


def echo_problems(sample: Sample, draft: QueryDraft) -> list[str]:
    """Why the draft does not fit the sample: an echo that differs from the sampled arguments (step, parameter,
    both values), or a stated value missing from the query text (`stated_alone`: on token boundaries, the other
    stated values masked)."""
    expected = sample.stated()
    got = [e.model_dump() for e in draft.echo]
    problems = []
    if len(got) != len(expected):
        problems.append(f"echo has {len(got)} step(s), the chain has {len(expected)}")
    for k, (want, have) in enumerate(zip(expected, got)):
        if have["function"] != want["function"]:
            problems.append(f"echo step {k}: function {have['function']!r}, sampled {want['function']!r}")
            continue
        for param in sorted(set(want["arguments"]) | set(have["arguments"])):
            a, b = want["arguments"].get(param, "<absent>"), have["arguments"].get(param, "<absent>")
            if json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True):
                problems.append(f"echo step {k} ({want['function']}) {param}: {json.dumps(b)}, sampled {json.dumps(a)}")
    stated = [(k, param, value) for k, want in enumerate(expected) for param, value in want["arguments"].items()]
    for k, param, value in stated:
        others = [v for kk, p, v in stated if (kk, p) != (k, param)]
        if not stated_alone(draft.query, value, others):
            problems.append(f"step {k} ({expected[k]['function']}) {param} {json.dumps(value)} is not stated in the "
                            f"query")
    return problems


def _on_boundaries(text: str, value_text: str) -> bool:
    """Whether `value_text` occurs in `text` as a token of its own: no letter or digit right beside it, and for a
    number no digit across a separator either (5 is not in 15, 5.5 or 2025-05-12)."""
    number = re.fullmatch(r"[\d.,]+", value_text) is not None
    before = r"(?<!\w)" + (r"(?<!\d[.,\-/:])" if number else "")
    after = r"(?!\w)" + (r"(?![.,\-/:]\d)" if number else "")
    return re.search(before + re.escape(value_text) + after, text) is not None


def stated_alone(query: str, value: Any, others: Sequence[Any]) -> bool:
    """Whether `query` states `value` itself: each of its texts on token boundaries once the texts of the other
    stated values are masked (a left-out 3 is not stated by the 3 inside "13 Elm St" another value brings)."""
    own = [normalize_text(t) for t in mention_texts(value)]
    text = normalize_text(query)
    masks = {normalize_text(t) for o in others for t in mention_texts(o)}
    for mask in sorted((m for m in masks if m and not any(m in t for t in own)), key=len, reverse=True):
        text = text.replace(mask, " ")
    return all(_on_boundaries(text, t) for t in own)


class RuleQueryWriter:
    """Template queries: each step's task phrase with its stated values verbatim and its upstream values by
    reference; the echo is the stated arguments. A rewrite after judge feedback draws its wording anew (the
    feedback itself names nothing a template could change)."""

    def write(self, sample: Sample, specs: dict[str, ToolSpec], rng: random.Random,
              feedback: Sequence[str] = ()) -> QueryDraft:
        position = {s.step: k for k, s in enumerate(sample.steps)}
        parts = []
        for k, step in enumerate(sample.steps):
            details = []
            for param, value in step.args.items():
                if param in step.sources:
                    upstream = sample.steps[position[step.sources[param][0]]].function
                    details.append(f"{humanize(param)}: the one from the {humanize(upstream)} result")
                else:
                    details.append(f"{humanize(param)} {describe_value(value)}")
            parts.append(task_phrase(specs[step.function]) + (f" ({'; '.join(details)})" if details else ""))
        text = rng.choice(_OPENERS) + parts[0][:1].upper() + parts[0][1:] + "."
        for part in parts[1:]:
            text += rng.choice(_THEN) + part + "."
        return QueryDraft(query=text, echo=[EchoCall(**e) for e in sample.stated()])


def chain_text(sample: Sample, specs: dict[str, ToolSpec]) -> str:
    """The chain as the LLM writer reads it: per step the task, the values to state and the ones taken from earlier
    results."""
    position = {s.step: k for k, s in enumerate(sample.steps)}
    lines = []
    for k, step in enumerate(sample.steps):
        stated = {p: v for p, v in step.args.items() if p not in step.sources}
        taken = {p: f"from step {position[src[0]]}'s result" for p, src in step.sources.items()}
        lines.append(f"step {k}: {step.function}: {task_phrase(specs[step.function])}; state verbatim: "
                     f"{compact(stated, 400)}; do not state (comes from an earlier result): {compact(taken, 300)}")
    return "\n".join(lines)


class QueryAnswer(BaseModel):
    """The LLM writer's answer: the query and its echo keyed step_0, step_1, ... in chain order."""

    query: str = Field(min_length=1)
    echo: dict[str, EchoCall]

    def draft(self) -> QueryDraft:
        """The answer as a QueryDraft, its echo in chain order."""
        return QueryDraft(query=self.query, echo=[self.echo[f"step_{k}"] for k in range(len(self.echo))])


def query_schema(sample: Sample, specs: dict[str, ToolSpec]) -> dict[str, Any]:
    """The exact answer schema for a chain: a query holding every stated value verbatim, in chain order, and an
    echo per step naming its function and exactly its stated parameters, each under the parameter's schema (what
    the echo says is the writer's reading, checked by echo_problems)."""
    stated = sample.stated()
    texts = [t for step in stated for value in step["arguments"].values() for t in mention_texts(value)]
    echo = {f"step_{k}": closed({
        "function": {"const": step["function"]},
        "arguments": closed({p: closed_copy(specs[step["function"]].properties.get(p, {}))
                             for p in step["arguments"]})})
        for k, step in enumerate(stated)}
    return closed({"query": containing(texts, run=QUERY_RUN), "echo": closed(echo)})


class LLMQueryWriter:
    """The model writes the query and the echo; a draft failing `echo_problems` is fed back to it, and so is the
    judge's rejection of its previous query."""

    def __init__(self, llm: LLMRole) -> None:
        self.llm = llm

    def write(self, sample: Sample, specs: dict[str, ToolSpec], rng: random.Random,
              feedback: Sequence[str] = ()) -> QueryDraft:
        def check(draft: QueryDraft) -> None:
            problems = echo_problems(sample, draft)
            if problems:
                raise ValueError("; ".join(problems))

        chain = chain_text(sample, specs)
        if feedback:
            chain += "\n\nA reviewer rejected your previous request for this chain; write it again, fixing: " + \
                "; ".join(feedback)
        return self.llm.ask("cache_query", QueryAnswer, query_schema(sample, specs),
                            check=lambda answer: check(answer.draft()), chain=chain).draft()
