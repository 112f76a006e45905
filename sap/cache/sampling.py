"""Constraint-aware sampling of a template from the cache: independent steps draw a cached entry of their function,
dependent steps take the values their bindings select in the sampled upstream responses, look them up in the
reverse index and intersect; an empty intersection restarts the chain, and a template is abandoned after
`max_restarts` restarts. On a stateful cache every step is drawn from the state the chain's previous call left, so a
chain is one the recording executor answered in that order from one initial state."""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Any

from sap.cache.index import STATE_KEY, CacheIndex
from sap.cache.keys import value_key
from sap.cache.templates import Template, extract, path_tokens
from sap.errors import SapError


class TemplateAbandoned(SapError, RuntimeError):
    """No chain of cached entries meets the template's constraints within the allowed restarts."""


@dataclass
class SampledStep:
    """One chosen cache entry; `sources` says, per bound argument, which step and concrete path its value is at;
    `state` is the id of the state the entry was recorded in (None if stateless)."""

    step: int
    function: str
    entry_id: int
    args: dict[str, Any]
    response: Any
    sources: dict[str, tuple[int, str]] = field(default_factory=dict)
    state: str | None = None


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

    def c0(self) -> dict[str, Any]:
        """The record's initial configuration: the state id its first stateful step was drawn in ({} if none), which
        the cache executor's reset takes to answer the chain's calls in that state."""
        first = next((s.state for s in self.steps if s.state is not None), None)
        return {STATE_KEY: first} if first is not None else {}


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

    def _in_state(self, ids: Any, state: str | None, then: str | None) -> list[int]:
        """The ids (in order; a set sorted) whose entries answer in `state`: recorded there, or stateless (all of
        them while `state` is None, before a chain's first stateful step). Of those, the ones that leave a state in
        which `then` (the next step's function) was recorded, if there are any (a one-step look-ahead, so a chain
        does not start in a state nothing continues from)."""
        entries = self.index.entries
        if state is not None:
            ids = sorted(i for i in ids if entries[i].state in (state, None))
        elif isinstance(ids, set):
            ids = sorted(ids)
        recorded = self.index.recorded
        if then is None or not recorded:  # the last step, or a stateless cache
            return ids
        ahead = [i for i in ids if entries[i].after is None or (entries[i].after, then) in recorded]
        return ahead or ids

    def _attempt(self, template: Template, rng: random.Random) -> tuple[list[SampledStep] | None, str]:
        """One walk down the template: the chosen steps, or None with the reason the intersection came up empty."""
        chosen: dict[int, SampledStep] = {}
        state: str | None = None  # the state the last chosen stateful entry left
        for s, step in enumerate(template.steps):
            then = template.steps[s + 1].function if s + 1 < len(template.steps) else None
            if step.optional and (any(b.step not in chosen for b in step.bind.values()) or rng.random() < self.skip_rate):
                continue
            if not step.bind:
                ids = self._in_state(self.index.by_function.get(step.function, ()), state, then)
                if not ids:
                    return None, f"step {s}: no cached {step.function} entries" + (f" in state {state}" if state else "")
                entry = self.index.entries[ids[rng.randrange(len(ids))]]
                chosen[s] = SampledStep(s, step.function, entry.id, entry.args, entry.response, state=entry.state)
                state = entry.after or state
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
            pool = self._in_state(pool, state, then)
            if not pool:
                return None, f"step {s} ({step.function}): no cached entry with these values in state {state}"
            placed = {i: one_item_paths(step.bind, found, self.index.entries[i].args) for i in pool}
            pick = [i for i, paths in placed.items() if paths is not None]
            if not pick:
                return None, f"step {s} ({step.function}): no cached entry takes its bound values from one item"
            entry = self.index.entries[pick[rng.randrange(len(pick))]]
            paths = placed[entry.id]
            sources = {param: (b.step, paths[param]) for param, b in step.bind.items()}
            chosen[s] = SampledStep(s, step.function, entry.id, entry.args, entry.response, sources, entry.state)
            state = entry.after or state
        return [chosen[s] for s in sorted(chosen)], ""
