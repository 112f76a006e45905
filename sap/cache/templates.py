"""Workflow templates: ordered functions and, per step, which argument comes from which field path of which
earlier step. Stored as JSON or YAML, validated on load, derived from the tool specs and a probe."""
from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Hashable, Iterator

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sap.cache.index import CacheIndex
from sap.cache.keys import value_key
from sap.errors import ConfigError
from sap.fsm.probe import probe
from sap.model import Toolset, ToolSpec
from sap.provenance.fields import candidates

_TOKEN = re.compile(r'\.([^.\[\]]+)|\[(\d+|\*)\]|\[("(?:[^"\\]|\\.)*")\]')
_INDEX = re.compile(r"\[\d+\]")


class TemplateError(ConfigError):
    """A templates file that cannot be used; the message names the file, the field and the value."""


class Binding(BaseModel):
    """An argument filled from an earlier step's response: the step index and a field path (`[*]` for any item)."""

    model_config = ConfigDict(extra="forbid")

    step: int
    path: str


class Step(BaseModel):
    """One call of a workflow; unbound arguments are whatever the cached entry holds (the user states them)."""

    model_config = ConfigDict(extra="forbid")

    function: str
    bind: dict[str, Binding] = Field(default_factory=dict)
    optional: bool = False


class Template(BaseModel):
    """A named chain of steps."""

    model_config = ConfigDict(extra="forbid")

    name: str
    steps: list[Step] = Field(min_length=1)


class TemplateFile(BaseModel):
    """The file: the toolset it was made for (informative) and the templates."""

    model_config = ConfigDict(extra="forbid")

    toolset: str | None = None
    templates: list[Template] = Field(min_length=1)


def path_tokens(path: str) -> list[str | int | None]:
    """The keys and indices of a field path (None for `[*]`); ValueError if it is malformed."""
    if not path.startswith("$"):
        raise ValueError(f"path {path!r} does not start with '$'")
    out: list[str | int | None] = []
    pos = 1
    for m in _TOKEN.finditer(path, 1):
        if m.start() != pos:
            break
        pos = m.end()
        if m.group(2) is not None:
            out.append(None if m.group(2) == "*" else int(m.group(2)))
        else:
            out.append(json.loads(m.group(3)) if m.group(3) else m.group(1))
    if pos != len(path):
        raise ValueError(f"malformed path {path!r} at character {pos}")
    return out


def extract(doc: Any, path: str) -> list[tuple[str, Any]]:
    """Every (concrete path, value) that `path` selects in `doc`, in document order; `[*]` matches each item."""
    found: list[tuple[str, Any]] = [("$", doc)]
    for token in path_tokens(path):
        step: list[tuple[str, Any]] = []
        for where, value in found:
            if token is None and isinstance(value, list):
                step += [(f"{where}[{i}]", v) for i, v in enumerate(value)]
            elif isinstance(token, int) and isinstance(value, list) and token < len(value):
                step.append((f"{where}[{token}]", value[token]))
            elif isinstance(token, str) and isinstance(value, dict) and token in value:
                key = f".{token}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", token) else f"[{json.dumps(token)}]"
                step.append((where + key, value[token]))
        found = step
    return found


def generalize(path: str) -> str:
    """A concrete path with every list index replaced by `[*]`."""
    return _INDEX.sub("[*]", path)


def _loc(file: str, loc: tuple[Any, ...]) -> str:
    return f"{file}: " + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def check_templates(doc: TemplateFile, specs: dict[str, ToolSpec], file: str = "templates") -> None:
    """Raise TemplateError at the first template that does not fit the tools: unknown function or parameter, a
    binding to a later step or an optional one from a required step, a malformed path."""
    for t, template in enumerate(doc.templates):
        for s, step in enumerate(template.steps):
            where = f"{file}: templates[{t}].steps[{s}]"
            if step.function not in specs:
                raise TemplateError(f"{where}.function: unknown function {step.function!r} "
                                    f"(known: {', '.join(sorted(specs))})")
            props = specs[step.function].properties
            for param, b in step.bind.items():
                at = f"{where}.bind.{param}"
                if param not in props:
                    raise TemplateError(f"{at}: {step.function} has no parameter {param!r} "
                                        f"(it has: {', '.join(props) or 'none'})")
                if not 0 <= b.step < s:
                    raise TemplateError(f"{at}.step: {b.step} is not an earlier step (0..{s - 1})" if s else
                                        f"{at}.step: {b.step}: the first step cannot take values from another step")
                if template.steps[b.step].optional and not step.optional:
                    raise TemplateError(f"{at}.step: {b.step} is optional, so step {s} must be optional too")
                try:
                    path_tokens(b.path)
                except ValueError as exc:
                    raise TemplateError(f"{at}.path: {exc}") from None


def parse_templates(text: str, specs: dict[str, ToolSpec], file: str = "templates") -> list[Template]:
    """Templates from JSON or YAML text, checked against `specs`."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise TemplateError(f"{file}: not JSON or YAML: {exc}") from None
    try:
        doc = TemplateFile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise TemplateError(f"{_loc(file, tuple(err['loc']))}: {err['msg']} (value {err.get('input')!r})") from None
    check_templates(doc, specs, file)
    return doc.templates


def load_templates(path: str | Path, specs: dict[str, ToolSpec]) -> list[Template]:
    """Read and check a templates file."""
    return parse_templates(Path(path).read_text(encoding="utf-8"), specs, str(path))


def dump_templates(templates: list[Template], toolset: str | None = None, yaml_format: bool = False) -> str:
    """The templates file text (JSON, or YAML when asked)."""
    doc = TemplateFile(toolset=toolset, templates=templates).model_dump(mode="json", exclude_defaults=True)
    return yaml.safe_dump(doc, sort_keys=False) if yaml_format else json.dumps(doc, indent=2) + "\n"


def feeds(toolset: Toolset, probe_seeds: int = 3) -> dict[str, dict[str, dict[str, tuple[str, int]]]]:
    """consumer -> param -> producer -> (field path with `[*]`, match score), from probed outputs matched to
    parameters by name and type (the rule FSM builder's matching); parameters that want fresh values are left out."""
    report = probe(toolset, seeds=probe_seeds)
    out: dict[str, dict[str, dict[str, tuple[str, int]]]] = {}
    for consumer in toolset.tools:
        prof = report.profiles[consumer.name]
        for param, schema in consumer.properties.items():
            if prof.prefers_new(param):
                continue
            for producer in toolset.tools:
                if producer.name == consumer.name:
                    continue
                seen: Counter = Counter()
                for output in report.profiles[producer.name].outputs:
                    for cand in candidates(param, schema, output, consumer.aliases(param)):
                        if not isinstance(cand.value, list) or schema.get("type") == "array":
                            seen[(cand.score, generalize(cand.path))] += 1
                if seen:
                    (score, path), _ = max(seen.items(), key=lambda kv: (kv[0][0], kv[1], -len(kv[0][1])))
                    out.setdefault(consumer.name, {}).setdefault(param, {})[producer.name] = (path, score)
    return out


def _leaves(doc: Any, where: str = "$") -> Iterator[tuple[str, Any]]:
    """Every (concrete path, scalar value) in a JSON document."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _leaves(value, where + (f".{key}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key)
                                               else f"[{json.dumps(key)}]"))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from _leaves(value, f"{where}[{i}]")
    else:
        yield where, doc


def _telling(value: Any) -> bool:
    """Whether a value is specific enough that finding it in a response and in a later request means one fed the
    other: a string of 3 or more characters, or a number of 10 or more (not 1, 2, true)."""
    if isinstance(value, str):
        return len(value) >= 3
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) >= 10


def response_feeds(index: CacheIndex, specs: dict[str, ToolSpec]) -> dict[str, dict[str, dict[str, tuple[str, int]]]]:
    """The feeding graph (as `feeds` gives it) read from recorded calls alone: a consumer parameter is fed by a
    producer's generalized response path when a recorded request's value of it sits at that path in a recorded
    response of the producer that did not get the value in its own request; the score is how many requests it
    explains."""
    found: dict[Hashable, Counter] = {}
    for entry in index.entries.values():
        asked = {value_key(v) for _, v in _leaves(entry.args)}
        for path, value in _leaves(entry.response):
            if _telling(value) and value_key(value) not in asked:
                found.setdefault(value_key(value), Counter())[(entry.function, generalize(path))] += 1
    seen: dict[tuple[str, str, str], Counter] = {}
    for entry in index.entries.values():
        props = specs[entry.function].properties if entry.function in specs else {}
        for param, value in entry.args.items():
            if param in props and _telling(value):
                for (producer, path), _ in found.get(value_key(value), Counter()).items():
                    if producer != entry.function:
                        seen.setdefault((entry.function, param, producer), Counter())[path] += 1
    out: dict[str, dict[str, dict[str, tuple[str, int]]]] = {}
    for (consumer, param, producer), paths in sorted(seen.items()):
        path, _ = max(paths.items(), key=lambda kv: (kv[1], -len(kv[0]), kv[0]))
        out.setdefault(consumer, {}).setdefault(param, {})[producer] = (path, sum(paths.values()))
    return out


def derive_from_cache(index: CacheIndex, specs: dict[str, ToolSpec], max_steps: int = 3,
                      max_templates: int = 100) -> list[Template]:
    """Templates for a cache without a runnable toolset (an imported one): chains over the functions with entries,
    fed as `response_feeds` reads the recorded requests and responses, chosen as `derive_templates` chooses."""
    return chain_templates(response_feeds(index, specs), sorted(set(index.functions()) & set(specs)), max_steps,
                           max_templates)


def derive_templates(toolset: Toolset, max_steps: int = 3, max_templates: int = 100,
                     probe_seeds: int = 3) -> list[Template]:
    """Chains of 2..max_steps functions where every step after the first takes at least one argument from the step
    before it; each argument the chain can feed is bound to the best-matching (then latest) feeding step, and no
    field feeds two arguments of one step. `max_templates` of them are chosen by coverage (`by_coverage`) and
    ordered round robin over their first function, so consecutive slots (slot i runs template i) start
    differently."""
    return chain_templates(feeds(toolset, probe_seeds), sorted(t.name for t in toolset.tools), max_steps,
                           max_templates)


def chain_templates(graph: dict[str, dict[str, dict[str, tuple[str, int]]]], names: list[str], max_steps: int,
                    max_templates: int) -> list[Template]:
    """The templates `derive_templates` makes from a feeding graph (consumer -> param -> producer -> (path,
    score)) over the functions `names`."""
    found: list[Template] = []
    frontier: list[list[Step]] = [[Step(function=n)] for n in names]
    for _ in range(max_steps - 1):
        grown: list[list[Step]] = []
        for chain in frontier:
            used = [s.function for s in chain]
            for name in names:
                if name in used:
                    continue
                picks = []
                for param, producers in sorted(graph.get(name, {}).items()):
                    options = [(producers[f][1], k, producers[f][0]) for k, f in enumerate(used) if f in producers]
                    if options:
                        picks.append((*max(options), param))
                bind: dict[str, Binding] = {}
                for score, k, path, param in sorted(picks, key=lambda p: (-p[0], p[3])):
                    if all((b.step, b.path) != (k, path) for b in bind.values()):  # one field feeds one argument
                        bind[param] = Binding(step=k, path=path)
                if any(b.step == len(chain) - 1 for b in bind.values()):
                    grown.append(chain + [Step(function=name, bind=dict(sorted(bind.items())))])
        found += [Template(name="->".join(s.function for s in c), steps=c) for c in grown]
        frontier = grown
    return round_robin(by_coverage(found, max_templates))


def coverage_units(template: Template) -> set[tuple[str, ...]]:
    """What a template exercises: each of its tools, and each feeding edge (producer tool, consumer tool)."""
    steps = template.steps
    return ({("tool", s.function) for s in steps}
            | {("edge", steps[b.step].function, s.function) for s in steps for b in s.bind.values()})


def by_coverage(templates: list[Template], limit: int) -> list[Template]:
    """At most `limit` templates chosen greedily: each pick covers the most tools and feeding edges not covered yet
    in this round (ties: the first function started fewest picks so far, then the given order); when no template
    adds anything the round ends and coverage starts again, so every tool and edge is covered before any repeats."""
    units = [coverage_units(t) for t in templates]
    left = list(range(len(templates)))
    picked: list[int] = []
    covered: set[tuple[str, ...]] = set()
    starts: Counter = Counter()
    while left and len(picked) < limit:
        best = max(left, key=lambda i: (len(units[i] - covered), -starts[templates[i].steps[0].function], -i))
        if not units[best] - covered and covered:
            covered = set()  # a new round
            continue
        picked.append(best)
        left.remove(best)
        covered |= units[best]
        starts[templates[best].steps[0].function] += 1
    return [templates[i] for i in picked]


def round_robin(templates: list[Template]) -> list[Template]:
    """`templates` interleaved by first function, in the order each first function appears, each group's own order
    kept."""
    groups: dict[str, list[Template]] = {}
    for template in templates:
        groups.setdefault(template.steps[0].function, []).append(template)
    return [t for row in itertools.zip_longest(*groups.values()) for t in row if t is not None]
