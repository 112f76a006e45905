"""Constraint-aware sampling of a template from the cache: independent steps draw a cached entry of their function,
dependent steps take the values their bindings select in the sampled upstream responses, look them up in the
reverse index and intersect; an empty intersection restarts the chain, and a template is abandoned after
`max_restarts` restarts."""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Any

from sap.cache.index import CacheIndex
from sap.cache.keys import value_key
from sap.cache.templates import Template, extract, path_tokens
from sap.errors import SapError


class TemplateAbandoned(SapError, RuntimeError):
    """No chain of cached entries meets the template's constraints within the allowed restarts."""


@dataclass
class SampledStep:
    """One chosen cache entry; `sources` says, per bound argument, which step and concrete path its value is at."""

    step: int
    function: str
    entry_id: int
    args: dict[str, Any]
    response: Any
    sources: dict[str, tuple[int, str]] = field(default_factory=dict)


@dataclass
class Sample:
    """A consistent chain for one template (skipped optional steps are absent), and how many restarts it took."""

    template: str
    steps: list[SampledStep]
    restarts: int

    def stated(self) -> list[dict[str, Any]]:
        """Per step, the arguments the user must state: those not taken from an earlier response."""
        return [{"function": s.function, "arguments": {p: v for p, v in s.args.items() if p not in s.sources}}
                for s in self.steps]


def _shared_items(a: str, b: str) -> int:
    """How many leading tokens two binding paths share (`$.hotels[*].id` and `$.hotels[*].rooms[*].room_id`: 2,
    the hotels list and its item)."""
    n = 0
    for x, y in zip(path_tokens(a), path_tokens(b)):
        if x != y:
            break
        n += 1
    return n


def one_item_paths(bind: dict[str, Any], found: dict[str, list[tuple[str, Any]]],
                   args: dict[str, Any]) -> dict[str, str] | None:
    """Concrete source paths of an entry's bound arguments such that arguments bound from one upstream step through
    a shared listing come from the same item of it (a hotel and one of that hotel's rooms); None if there are none."""
    options = [[p for p, v in found[param] if value_key(v) == value_key(args[param])] for param in bind]
    for combo in itertools.product(*options):
        paths = dict(zip(bind, combo))
        if all(path_tokens(paths[x])[:k] == path_tokens(paths[y])[:k]
               for x, y in itertools.combinations(bind, 2) if bind[x].step == bind[y].step
               for k in [_shared_items(bind[x].path, bind[y].path)]):
            return paths
    return None


class Sampler:
    """Samples templates from a CacheIndex; `skip_rate` is the chance of leaving out an optional step."""

    def __init__(self, index: CacheIndex, max_restarts: int = 20, skip_rate: float = 0.5) -> None:
        self.index, self.max_restarts, self.skip_rate = index, max_restarts, skip_rate

    def sample(self, template: Template, rng: random.Random) -> Sample:
        """A chain meeting every binding; TemplateAbandoned after `max_restarts` restarts."""
        why = "no attempt"
        for restart in range(self.max_restarts + 1):
            steps, why = self._attempt(template, rng)
            if steps is not None:
                return Sample(template.name, steps, restart)
        raise TemplateAbandoned(f"template {template.name}: abandoned after {self.max_restarts} restarts "
                                f"(last: {why})")

    def _attempt(self, template: Template, rng: random.Random) -> tuple[list[SampledStep] | None, str]:
        """One walk down the template: the chosen steps, or None with the reason the intersection came up empty."""
        chosen: dict[int, SampledStep] = {}
        for s, step in enumerate(template.steps):
            if step.optional and (any(b.step not in chosen for b in step.bind.values()) or rng.random() < self.skip_rate):
                continue
            if not step.bind:
                ids = self.index.by_function.get(step.function)
                if not ids:
                    return None, f"step {s}: no cached {step.function} entries"
                entry = self.index.entries[ids[rng.randrange(len(ids))]]
                chosen[s] = SampledStep(s, step.function, entry.id, entry.args, entry.response)
                continue
            pool: set[int] | None = None
            found: dict[str, list[tuple[str, Any]]] = {}
            for param, b in step.bind.items():
                found[param] = extract(chosen[b.step].response, b.path)
                ids: set[int] = set()
                for _, value in found[param]:
                    ids |= self.index.ids_with(step.function, param, value)
                pool = ids if pool is None else pool & ids
                if not pool:
                    return None, f"step {s} ({step.function}): no cached entry takes {param} from step {b.step}"
            placed = {i: one_item_paths(step.bind, found, self.index.entries[i].args) for i in sorted(pool)}
            pick = [i for i, paths in placed.items() if paths is not None]
            if not pick:
                return None, f"step {s} ({step.function}): no cached entry takes its bound values from one item"
            entry = self.index.entries[pick[rng.randrange(len(pick))]]
            paths = placed[entry.id]
            sources = {param: (b.step, paths[param]) for param, b in step.bind.items()}
            chosen[s] = SampledStep(s, step.function, entry.id, entry.args, entry.response, sources)
        return [chosen[s] for s in sorted(chosen)], ""
