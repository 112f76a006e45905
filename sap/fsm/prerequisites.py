"""Preconditions learned by trying: a call that fails with a state error ("brake pedal must be pressed") and then
succeeds, on a fresh executor of the same c0, after another tool's call marks that call as its prerequisite.

For a tool that mostly failed in the probe, each sampled c0 gets a bounded search: bind the tool, run it; on an
error that names none of its own argument values (a state error, not a bad id), try candidate calls of other tools
(those whose name and description share the error's words first), each followed by the failing call again. A
candidate after which the call succeeds completes the chain; one after which it fails differently is a step of a
longer chain (lockDoors, then pressBrakePedal, then startEngine), and the search goes on from there. A candidate
that itself has learned prerequisites runs them first (setCruiseControl needs startEngine, which needs two more).
Seeded and bounded: `MAX_CHAIN` steps, `CANDIDATES` tools per step, `bindings` per tool, `BUDGET` executions per
toolset."""
from __future__ import annotations

import random
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sap.fsm.probe import LOGOUT_NAME, ProbeReport, _bind_for_probe
from sap.model import FSM, ArgProvenance, ExecResult, Executor, Precondition, Tag, ToolCall, Toolset, ToolSpec

MAX_CHAIN = 3  # prerequisite steps per failing call
CANDIDATES = 6  # tools tried per step, best word match first
BINDINGS = 3  # argument sets tried per candidate tool (bounds, enums and booleans first, then a probe binding)
BUDGET = 400  # tool-call sequences run per toolset
_STOP = {"the", "and", "for", "with", "must", "before", "when", "this", "that", "not", "are", "was", "has", "have",
         "needs", "need", "error", "cannot", "should", "been", "from", "your", "all", "here", "which"}


def words(text: str) -> set[str]:
    """Four-letter stems of the words of a name or message (camelCase and snake_case split), stop words left out:
    "lockDoors" and "doors must be locked" share {"lock", "door"}."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text or "").replace("_", " ").lower()
    return {w[:4] for w in re.findall(r"[a-z]{3,}", spaced) if w not in _STOP}


def _gist(error: str) -> set[str]:
    """The word stems of an error's first sentence (what follows, such as a list of the doors still unlocked,
    varies)."""
    return words(re.split(r"[.:!?](?:\s|$)", error.strip(), maxsplit=1)[0])


def error_matches(learned: str, error: str | None) -> bool:
    """Whether `error` is the learned state error again: their first sentences share most word stems."""
    a, b = _gist(learned), _gist(error or "")
    return bool(a and b) and len(a & b) / len(a | b) >= 0.6


def precondition_for(fsm: FSM, tool: str, error: str | None, done: Collection[str] = ()) -> Precondition | None:
    """The learned prerequisite of `tool` whose state error `error` is, leaving out tools in `done`; None if none."""
    return next((p for p in fsm.preconditions if p.tool == tool and p.needs not in done
                 and error_matches(p.error, error)), None)


def _extremes(schema: dict[str, Any]) -> list[Any]:
    """Values of a parameter that often satisfy a state check: both booleans (False first), each enum value, every
    enum value at once for an array of them, a number's maximum then minimum."""
    kind = schema.get("type")
    if kind == "boolean":
        return [False, True]
    if schema.get("enum"):
        return list(schema["enum"])
    if kind == "array" and schema.get("items", {}).get("enum"):
        return [list(schema["items"]["enum"])]
    if kind in ("number", "integer"):
        return [b for b in (schema.get("maximum"), schema.get("minimum")) if b is not None]
    return []


def bindings(spec: ToolSpec, c0: dict[str, Any], rng: random.Random) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Up to BINDINGS argument sets for `spec` on c0, each with the part drawn from `_extremes` (the values a
    learned prerequisite keeps): the k-th extreme of each parameter that has some, the rest bound as the probe
    binds; the last set is a plain probe binding."""
    extremes = {name: _extremes(spec.properties.get(name, {})) for name in spec.required}
    rounds = max((len(v) for v in extremes.values()), default=0)
    out = []
    for k in range(min(rounds, BINDINGS - 1)):
        args, _ = _bind_for_probe(spec, [c0], rng)
        fixed = {name: v[k % len(v)] for name, v in extremes.items() if v}
        out.append(({**args, **fixed}, fixed))
    out.append((_bind_for_probe(spec, [c0], rng)[0], {}))
    return out


@dataclass
class _Step:
    """One learned prerequisite call: the tool, its arguments, the part of them to keep, the error it cures."""

    tool: str
    args: dict[str, Any]
    fixed: dict[str, Any]
    error: str


class _Trial:
    """Runs call sequences on one executor reset to c0 each time, counting them against the budget."""

    def __init__(self, toolset: Toolset) -> None:
        self.ex: Executor = toolset.executor_factory()
        self.runs = 0

    def run(self, c0: dict[str, Any], calls: list[tuple[str, dict[str, Any]]]) -> list[ExecResult]:
        """Reset to c0 and run `calls` in order, stopping after the first failure; the results so far."""
        self.runs += 1
        self.ex.reset(c0)
        results = []
        for name, args in calls:
            res = self.ex.execute(ToolCall(call_id="learn", name=name, args_exec=args,
                                           args_prov={k: ArgProvenance(tag=Tag.self_create) for k in args}))
            results.append(res)
            if not res.ok:
                break
        return results

    def close(self) -> None:
        """Stop the executor's worker, if it has one."""
        if hasattr(self.ex, "close"):
            self.ex.close()


def _names_own_value(error: str, args: dict[str, Any]) -> bool:
    """Whether the error names one of the call's own string values ("Order #W12 not found"): a bad argument, not a
    state the other tools could change."""
    return any(isinstance(v, str) and len(v) >= 3 and v in error for v in args.values())


def _ranked(toolset: Toolset, report: ProbeReport, target: str, error: str) -> list[ToolSpec]:
    """The tools that could change the state `error` complains about: not `target`, not a logout, not a read that
    succeeded without ever changing anything; those sharing most word stems with the error first (name order on
    ties)."""
    want = words(error)
    pool = [t for t in toolset.tools if t.name != target and not LOGOUT_NAME.search(t.name) and t.read_only is not True
            and (report.profiles[t.name].changed_state or not report.profiles[t.name].successes)]
    return sorted(pool, key=lambda t: (-len(want & words(f"{t.name} {t.description.split('.')[0]}")), t.name))


def _expand(steps: list[_Step], learned: dict[str, list[_Step]]) -> list[tuple[str, dict[str, Any]]]:
    """The calls that run `steps`: each step's own learned prerequisites first."""
    out: list[tuple[str, dict[str, Any]]] = []
    for s in steps:
        out += _expand(learned.get(s.tool, []), learned) + [(s.tool, s.args)]
    return out


def _search(toolset: Toolset, report: ProbeReport, trial: _Trial, learned: dict[str, list[_Step]], spec: ToolSpec,
            c0: dict[str, Any], rng: random.Random) -> tuple[list[_Step], Any, bool] | None:
    """A chain of prerequisite calls after which `spec` succeeds on c0, its result and whether it changed the
    state; None if the call succeeds alone, fails for its own arguments, or no chain within the bounds helps."""
    for args, _ in bindings(spec, c0, rng)[:2]:
        prefix: list[_Step] = []
        while len(prefix) < MAX_CHAIN and trial.runs < BUDGET:
            res = trial.run(c0, _expand(prefix, learned) + [(spec.name, args)])[-1]
            if res.ok:  # it needs nothing here (a step adds to the chain only when the call still fails)
                return None
            error = res.error or ""
            if _names_own_value(error, args):
                break
            progress = None
            for cand in _ranked(toolset, report, spec.name, error)[:CANDIDATES]:
                for cand_args, fixed in bindings(cand, c0, rng):
                    if trial.runs >= BUDGET:
                        return None
                    base = _expand(prefix, learned)
                    before = trial.run(c0, base)
                    if not all(r.ok for r in before):
                        return None
                    state = trial.ex.state()
                    out = trial.run(c0, base + _expand(learned.get(cand.name, []), learned)
                                    + [(cand.name, cand_args), (spec.name, args)])
                    if len(out) < len(base) + 2 or not out[-2].ok:
                        continue  # the candidate failed
                    step = _Step(cand.name, cand_args, fixed, error)
                    if out[-1].ok:
                        after = trial.ex.state()
                        trial.run(c0, base + _expand(learned.get(cand.name, []), learned) + [(cand.name, cand_args)])
                        return prefix + [step], out[-1].value, trial.ex.state() != after
                    if progress is None and out[-1].error != error and trial.ex.state() != state:
                        progress = step
            if progress is None:
                break
            prefix.append(progress)
    return None


def learn_preconditions(toolset: Toolset, report: ProbeReport) -> list[Precondition]:
    """The prerequisites of the tools that failed at least as often as they succeeded in `report`'s probe, learned
    on its sampled c0s (two passes, so a chain through another learned tool is found); each tool's successes after
    its prerequisites are added to its profile (its results, its state change)."""
    specs = {t.name: t for t in toolset.tools}
    studied = [name for name, p in report.profiles.items() if p.failures and p.successes <= p.failures]
    learned: dict[str, list[_Step]] = {}
    trial = _Trial(toolset)
    try:
        for round_no in range(2):
            for name in studied:
                if name in learned:
                    continue
                for seed, c0 in enumerate(report.configs):
                    rng = random.Random(f"learn:{name}:{seed}:{round_no}")
                    found = _search(toolset, report, trial, learned, specs[name], c0, rng)
                    if found is None:
                        continue
                    steps, value, changed = found
                    kept = learned.setdefault(name, [])
                    kept += [s for s in steps if s.tool not in {k.tool for k in kept}]
                    prof = report.profiles[name]
                    prof.successes += 1
                    prof.outputs.append(value)
                    prof.changed_state = prof.changed_state or changed
    finally:
        trial.close()
    return [Precondition(tool=name, needs=s.tool, error=s.error, args=s.fixed)
            for name in studied if name in learned for s in learned[name]]
