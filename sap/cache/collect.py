"""Workflow-aware collection: run complete template chains on a live executor through the recorder, so that for
every cached response the calls that consume its values are cached too."""
from __future__ import annotations

import itertools
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sap.agents.planner import HistoryCall, PlanRequest, RulePlanner
from sap.cache.keys import value_key
from sap.cache.recorder import Recorder
from sap.cache.templates import Template, extract
from sap.model import ArgProvenance, Tag, ToolCall, Toolset


@dataclass
class CollectStats:
    """How a collection went: calls made, calls that succeeded, entries new to the cache, and complete chains per
    template (a template with none cannot be sampled from this cache)."""

    calls: int = 0
    ok: int = 0
    new: int = 0
    complete: Counter = field(default_factory=Counter)


class Collector:
    """Runs templates on `recorder` over sampled initial configurations of `toolset`.

    Step 0 is called `starts` times per configuration with arguments the rule planner binds (c0 values, else fresh
    ones); each later step is called once per combination of the values its bindings select in the upstream
    response (at most `fanout` combinations), its other arguments bound by the planner from the chain so far.
    A failing call is retried with the error fed back, `attempts` times in all. Every start and every combination
    begins from the state its upstream call left (the executor is restored), so sibling branches do not see each
    other's writes and each recorded chain is one a fresh executor would answer."""

    def __init__(self, toolset: Toolset, recorder: Recorder, starts: int = 3, fanout: int = 5,
                 attempts: int = 3) -> None:
        self.toolset, self.recorder = toolset, recorder
        self.specs = {t.name: t for t in toolset.tools}
        self.starts, self.fanout, self.attempts = starts, fanout, attempts
        self.planner = RulePlanner()
        self.stats = CollectStats()

    def collect(self, templates: list[Template], seeds: list[int]) -> CollectStats:
        """Run every template on every seed's c0; the recorder's index holds the results."""
        before = len(self.recorder.new)
        for seed in seeds:
            c0 = self.toolset.sample_config(seed)
            self.recorder.reset(c0)
            fresh = self.recorder.snapshot()
            for template in templates:
                rng = random.Random(f"collect:{seed}:{template.name}")
                for _ in range(self.starts):
                    self.recorder.restore(fresh)
                    self._step(template, 0, [], c0, rng)
        self.stats.new = len(self.recorder.new) - before
        return self.stats

    def _combos(self, template: Template, s: int, results: list[Any], rng: random.Random) -> list[dict[str, Any]]:
        """The argument values step `s` takes from upstream responses: at most `fanout` combinations."""
        step = template.steps[s]
        options = []
        for param, b in step.bind.items():
            values = {value_key(v): v for _, v in extract(results[b.step], b.path)}
            if not values:
                return []
            options.append([(param, v) for v in values.values()])
        combos = [dict(c) for c in itertools.islice(itertools.product(*options), 10 * self.fanout)]
        rng.shuffle(combos)
        return combos[:self.fanout]

    def _step(self, template: Template, s: int, history: list[HistoryCall], c0: dict[str, Any],
              rng: random.Random) -> None:
        """Call step `s` (for each upstream combination) and recurse into the next step on success."""
        if s == len(template.steps):
            self.stats.complete[template.name] += 1
            return
        step = template.steps[s]
        results = [h.call.result for h in history]
        if any(b.step >= len(results) for b in step.bind.values()):
            return
        here = self.recorder.snapshot()
        for fixed in self._combos(template, s, results, rng) if step.bind else [{}]:
            self.recorder.restore(here)
            call = self._call(step.function, fixed, history, c0, rng)
            if call is not None:
                self._step(template, s + 1, history + [HistoryCall(s, 0, call)], c0, rng)

    def _call(self, function: str, fixed: dict[str, Any], history: list[HistoryCall], c0: dict[str, Any],
              rng: random.Random) -> ToolCall | None:
        """One call with `fixed` arguments and the rest bound by the planner; the successful call or None."""
        spec = self.specs[function]
        tags = {p: Tag.prev_output for p in spec.required if p not in fixed}
        failed: list[dict[str, Any]] = []
        error = None
        for _ in range(self.attempts):
            binding = self.planner.bind(PlanRequest(spec=spec, tags=tags, turn=len(history), index=0, history=history,
                                                    stated=[], c0=c0, rng=rng, last_error=error, failed_args=failed))
            args = {**binding.args_exec, **fixed}
            call = ToolCall(call_id="collect", name=function, args_exec=args,
                            args_prov={p: ArgProvenance(tag=Tag.self_create) for p in args})
            res = self.recorder.execute(call)
            self.stats.calls += 1
            if res.ok:
                self.stats.ok += 1
                return call.model_copy(update={"result": res.value})
            failed.append(args)
            error = res.error
        return None
