"""Preconditions learned by trying: a call that fails with a state error ("brake pedal must be pressed") and then
succeeds, on a fresh executor of the same c0, after another tool's call marks that call as its prerequisite.

For a tool that mostly failed in the probe, each sampled c0 gets a bounded search: bind the tool, run it; on an
error that names none of its own argument values (a state error, not a bad id), try candidate calls of other tools
(those whose name and description share the error's words first), each followed by the failing call again. A
candidate after which the call succeeds completes the chain; one after which it fails differently is a step of a
longer chain (lockDoors, then pressBrakePedal, then startEngine), and the search goes on from there. A candidate
that itself has learned prerequisites runs them first (setCruiseControl needs startEngine, which needs two more).
Seeded and bounded: `MAX_CHAIN` steps, `CANDIDATES` tools per step, `BINDINGS` per tool, `BUDGET` executions per
studied tool, c0 and pass."""
from __future__ import annotations

import random
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sap.fsm.probe import LOGOUT_NAME, ProbeReport
from sap.jsonutil import holds_key
from sap.model import FSM, ArgProvenance, ExecResult, Executor, Precondition, Tag, ToolCall, Toolset, ToolSpec
from sap.provenance.fields import candidates
from sap.provenance.generate import generate
from sap.provenance.jsonpath import holds_below
from sap.text import FILE_LIKE, QUOTED_SPAN, error_names

MAX_CHAIN = 3  # prerequisite steps per failing call
CANDIDATES = 6  # tools tried per step, best word match first
BINDINGS = 3  # argument sets tried per candidate tool (bounds, enums and booleans first, then a probe binding)
BUDGET = 60  # tool-call sequences run per studied tool, c0 and pass
UNDOING = re.compile(r"(cancel|delete|remove|rm|rmdir|withdraw|close|clear|drop|unregister|revoke)(?![a-z])")
_STOP = {"the", "and", "for", "with", "must", "before", "when", "this", "that", "not", "are", "was", "has", "have",
         "needs", "need", "error", "cannot", "should", "been", "from", "your", "all", "here", "which"}


def words(text: str) -> set[str]:
    """Four-letter stems of the words of a name or message (camelCase and snake_case split), stop words left out:
    "lockDoors" and "doors must be locked" share {"lock", "door"}."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text or "").replace("_", " ").lower()
    return {w[:4] for w in re.findall(r"[a-z]{3,}", spaced) if w not in _STOP}


_NAMES = re.compile(f"{QUOTED_SPAN.pattern}|{FILE_LIKE}")  # quoted values and file names


def _gist(error: str) -> set[str]:
    """The word stems of an error's first sentence (what follows, such as a list of the doors still unlocked,
    varies), without a leading command name ("wc: ...") and the names it quotes: "wc: a.csv: No such file or
    directory" and "cat: 'b.md': No such file or directory" say the same thing."""
    text = _NAMES.sub("", re.sub(r"^(?!error:)\w+:\s+", "", error.strip(), flags=re.I)).lstrip(" :;,-")
    return words(re.split(r"[.:!?](?:\s|$)", text, maxsplit=1)[0])


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


def fixed_values(spec: ToolSpec) -> list[dict[str, Any]]:
    """Up to BINDINGS sets of fixed argument values to try `spec` with (the part a learned prerequisite keeps): the
    k-th extreme of each parameter that has some, and last none (every argument bound as `bound` binds it)."""
    extremes = {name: _extremes(spec.properties.get(name, {})) for name in spec.required}
    rounds = max((len(v) for v in extremes.values()), default=0)
    return [{name: v[k % len(v)] for name, v in extremes.items() if v} for k in range(min(rounds, BINDINGS - 1))] + [{}]


def _newest(name: str, spec: ToolSpec, docs: list[Any]) -> list[Any]:
    """The values fitting parameter `name` in the newest of `docs` that holds any (c0 is docs[0])."""
    schema = spec.properties.get(name, {})
    found = next((c for doc in reversed(docs) for c in [candidates(name, schema, doc, spec.aliases(name))] if c), [])
    return [c.value for c in found]


def bound(spec: ToolSpec, docs: list[Any], fixed: dict[str, Any], seed: str, error: str = "",
          fresh: bool = False) -> dict[str, Any]:
    """A call's arguments against c0 and the results so far (`docs`): the `fixed` values; each other required
    parameter from the newest document holding a fitting value (unless `fresh`), else a fresh one (seeded by
    `seed`); and an optional id whose thing `error` names ("Booking not found": `booking_id`) from the newest
    result holding one."""
    rng = random.Random(seed)
    args: dict[str, Any] = {}
    for name in spec.required:
        values = [] if fresh else _newest(name, spec, docs)
        args[name] = fixed[name] if name in fixed else rng.choice(values) if values else generate(
            name, spec.properties.get(name, {}), rng, docs[0], reuse_existing=False)
    for name in spec.properties:
        head = name[:-3].replace("_", " ") if name.endswith("_id") and name not in args else ""
        if head and re.search(rf"\b{re.escape(head)}\b", error.lower()) and (values := _newest(name, spec, docs)):
            args[name] = values[0]
    return args


@dataclass
class _Call:
    """One call of a tried sequence: its tool, the values fixed for it, the seed of the rest of its binding, the
    error whose named ids it binds too and whether the rest is fresh."""

    spec: ToolSpec
    fixed: dict[str, Any]
    seed: str
    error: str = ""
    fresh: bool = False  # fresh values for the parameters not fixed, rather than values c0 or results hold
    guided: bool = False  # `fixed` leads to what an error named in this c0 (a folder): not a value to keep


@dataclass
class _Step:
    """One learned prerequisite call, and the error of the call it cured."""

    call: _Call
    cures: str


class _Trial:
    """Runs call sequences on one executor reset to c0 each time, counting them against the budget."""

    def __init__(self, toolset: Toolset) -> None:
        self.ex: Executor = toolset.executor_factory()
        self.runs = 0
        self.before_last: dict[str, Any] = {}  # the state before the last call of the latest run

    def run(self, c0: dict[str, Any], calls: list[_Call]) -> list[tuple[dict[str, Any], ExecResult]]:
        """Reset to c0 and run `calls` in order, each bound against the results before it, stopping after the first
        failure; the arguments and results so far."""
        self.runs += 1
        self.ex.reset(c0)
        docs: list[Any] = [c0]
        out = []
        for i, call in enumerate(calls):
            if i == len(calls) - 1:
                self.before_last = self.ex.state()
            args = bound(call.spec, docs, call.fixed, call.seed, call.error, call.fresh)
            res = self.ex.execute(ToolCall(call_id="learn", name=call.spec.name, args_exec=args,
                                           args_prov={k: ArgProvenance(tag=Tag.self_create) for k in args}))
            out.append((args, res))
            if not res.ok:
                break
            docs.append(res.value)
        return out

    def close(self) -> None:
        """Stop the executor's worker, if it has one."""
        if hasattr(self.ex, "close"):
            self.ex.close()


_ABSENT = re.compile(r"no such|not found|does not exist|doesn't exist|cannot find|can't find", re.I)


def _named(error: str, args: dict[str, Any]) -> set[str]:
    """The call's own string values the error names."""
    return {v for v in args.values() if isinstance(v, str) and len(v) >= 3 and v in error}


def _names_own_value(error: str, args: dict[str, Any], scoped: dict[str, Any] | None) -> bool:
    """Whether the error names one of the call's own string values ("Order #W12 not found"): a bad argument, not a
    state the other tools could change; unless, in a toolset with a scope, it says that value is absent while the
    c0 tree `scoped` holds it as a key (a file not in the current folder is in another one: where the call runs
    is the state)."""
    named = _named(error, args)
    return bool(named) and not (scoped is not None and _ABSENT.search(error) and holds_key(scoped, named))


def _guided(spec: ToolSpec, error: str, args: dict[str, Any], c0: dict[str, Any]) -> list[dict[str, Any]]:
    """Bindings of `spec` that lead to what `error` names (a value it quotes, or one of the failed call's `args`):
    a parameter set to a key of c0 whose subtree holds such a name (the folder a file that was not found is in),
    up to BINDINGS."""
    quoted = error_names(error) | _named(error, args)
    return [{name: c.value} for name in spec.required
            for c in candidates(name, spec.properties.get(name, {}), c0, spec.aliases(name))
            if holds_below(c0, c.path, quoted)][:BINDINGS]


def _ranked(toolset: Toolset, report: ProbeReport, target: str, error: str) -> list[ToolSpec]:
    """The tools that could change the state `error` complains about: not `target`, not a logout, not one that
    undoes what the user has (cancelling a booking frees the money for another, but no user asked for that), not
    a read that succeeded without ever changing anything; those sharing most word stems with the error first
    (name order on ties)."""
    want = words(error)
    pool = [t for t in toolset.tools if t.name != target and not LOGOUT_NAME.search(t.name)
            and not UNDOING.match(t.name) and t.read_only is not True
            and (report.profiles[t.name].changed_state or not report.profiles[t.name].successes)]
    return sorted(pool, key=lambda t: (-len(want & words(f"{t.name} {t.description.split('.')[0]}")), t.name))


def _expand(steps: list[_Step], learned: dict[str, list[_Step]], stack: frozenset[str] = frozenset()) -> list[_Call]:
    """The calls that run `steps`: each step's own learned prerequisites first (a tool already being expanded is
    not expanded again, so a cycle cannot recurse)."""
    out: list[_Call] = []
    for s in steps:
        name = s.call.spec.name
        if name not in stack:
            out += _expand(learned.get(name, []), learned, stack | {name}) + [s.call]
    return out


def _reaches(tool: str, target: str, learned: dict[str, list[_Step]], seen: frozenset[str] = frozenset()) -> bool:
    """Whether `tool` is `target` or needs it first, through the prerequisites learned so far."""
    return tool == target or any(_reaches(s.call.spec.name, target, learned, seen | {tool})
                                 for s in learned.get(tool, []) if s.call.spec.name not in seen | {tool})


def _split(trial: _Trial, c0: dict[str, Any], base: list[_Call], step: _Step, retry: _Call,
           learned: dict[str, list[_Step]]) -> list[_Step]:
    """The steps a successful candidate stands for: itself, or when its own prerequisites already change the call's
    error (TravelAPI's login cures "Invalid access token", then `book_flight` cures "Booking not found"), those
    prerequisites for the first error and the candidate for the error left after them."""
    own = learned.get(step.call.spec.name, [])
    if not own:
        return [step]
    _, res = trial.run(c0, base + _expand(own, learned) + [retry])[-1]
    if res.ok:  # its prerequisites were all the call needed
        return [_Step(s.call, step.cures) for s in own]
    if res.error == step.cures:
        return [step]
    return [_Step(s.call, step.cures) for s in own] + [_Step(step.call, res.error or "")]


def _search(toolset: Toolset, report: ProbeReport, trial: _Trial, learned: dict[str, list[_Step]], spec: ToolSpec,
            c0: dict[str, Any], seed: str) -> tuple[list[_Step], Any, bool] | None:
    """A chain of prerequisite calls after which `spec` succeeds on c0, its result and whether it changed the
    state; None if the call succeeds alone, fails for its own arguments, or no chain within the bounds helps."""
    scope = toolset.extra.get("scope")  # a tool that moves where names resolve is led toward the named thing
    scoped = c0 if scope is not None else None
    fixed = fixed_values(spec)[:2]
    fixed += [{}] * (BINDINGS - 1) if scoped is not None and fixed == [{}] else []  # names in other folders too
    goals = [_Call(spec, f, f"{seed}:goal:{k}") for k, f in enumerate(fixed)]
    for goal in goals + [_Call(spec, {}, f"{seed}:goal:fresh", fresh=True)]:  # c0's own value may be the wrong one
        prefix: list[_Step] = []
        while len(prefix) < MAX_CHAIN and trial.runs < BUDGET:
            args, res = trial.run(c0, _expand(prefix, learned) + [goal])[-1]
            if res.ok:  # it needs nothing here (a step adds to the chain only when the call still fails)
                break
            error = res.error or ""
            if _names_own_value(error, args, scoped) or not _gist(error):  # a bad argument, or nothing to know it by
                break
            retry = _Call(spec, goal.fixed, goal.seed, error, goal.fresh)  # again, binding the ids its error names
            progress = None
            elsewhere = scope is not None and bool(_named(error, args))  # absent here, in c0's tree (else: broke)
            ranked = [(cand, _guided(cand, error, args, c0) if scope is not None and scope.moves(cand.name) else [])
                      for cand in _ranked(toolset, report, spec.name, error)
                      if not elsewhere or scope.moves(cand.name)]  # go where it is, not bring it here
            ranked.sort(key=lambda cg: not cg[1])  # a tool that can lead to what the error names first
            for cand, guided in ranked[:CANDIDATES]:
                for j, cand_fixed in enumerate(guided + fixed_values(cand)):
                    if trial.runs >= BUDGET:
                        return None
                    base = _expand(prefix, learned)
                    if not all(r.ok for _, r in trial.run(c0, base)):
                        return None
                    state = trial.ex.state()
                    step = _Step(_Call(cand, cand_fixed, f"{seed}:{cand.name}:{j}", guided=j < len(guided)), error)
                    tried = base + _expand([step], learned)
                    out = trial.run(c0, tried + [retry])
                    if len(out) < len(tried) + 1 or not out[len(tried) - 1][1].ok:
                        continue  # the candidate (or a prerequisite of its own) failed
                    if out[-1][1].ok:
                        changed = trial.ex.state() != trial.before_last
                        return prefix + _split(trial, c0, base, step, retry, learned), out[-1][1].value, changed
                    if progress is None and out[-1][1].error != error and trial.ex.state() != state:
                        progress = step
            if progress is None:
                break
            prefix.append(progress)
            goal = retry
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
                    trial.runs = 0
                    found = _search(toolset, report, trial, learned, specs[name], c0, f"learn:{name}:{seed}:{round_no}")
                    if found is None:
                        continue
                    steps, value, changed = found
                    kept = learned.setdefault(name, [])
                    kept += [s for s in steps if s.call.spec.name not in {k.call.spec.name for k in kept}
                             and not _reaches(s.call.spec.name, name, learned)]  # no cycle: A before B before A
                    prof = report.profiles[name]
                    prof.successes += 1
                    prof.outputs.append(value)
                    prof.changed_state = prof.changed_state or changed
    finally:
        trial.close()
    return [Precondition(tool=name, needs=s.call.spec.name, error=s.cures, args={} if s.call.guided else s.call.fixed)
            for name in studied if name in learned for s in learned[name]]
