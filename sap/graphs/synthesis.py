"""The synthesis graph: load_fsm -> sample_path -> run_turn (plan_call <-> execute_call, once per turn; a call at
its attempt cap goes to repair_call for c0 repair rounds, then to replan: blacklist + re-plan, truncate or drop)
-> group_parallel (-> persist when the judge rejects the calls alone) -> write_messages -> code_check -> judge
(-> write_messages on a text rejection) -> rewrite (MissParam / MissFunc) -> persist.

The nodes are module-level functions; the run's fixed parts (toolset, roles, limits, caches, live executors) reach
them as LangGraph's runtime context (`runtime.context`, a `SynthesisContext`). Each graph is compiled once per
process (`synthesis_graph`) and invoked with `context=ctx`."""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import random
import time
import warnings
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command

from sap.agents.judge import CallsJudge, Judge, RuleJudge
from sap.agents.messenger import Messenger, RuleMessenger
from sap.agents.planner import (
    HistoryCall,
    NarrativeRequest,
    Planner,
    PlanRequest,
    RulePlanner,
    StatedValue,
    plan_key,
)
from sap.agents.repair import PatchOp, Repairer, RuleRepairer, apply_patch, repair_call
from sap.agents.replanner import Replanner, ReplanRequest, RuleReplanner, avoided
from sap.executors.base import ReplayMismatch, end_state_hash, replay
from sap.drops import DropReason
from sap.export.records import to_record, trajectory_id
from sap.fsm.build import FlatFSMBuilder, FSMBuilder, RuleFSMBuilder, named_read
from sap.fsm.walk import NoPathError, emphasis_set
from sap.fsm.walk import sample_path as walk
from sap.fsm.policy_walk import policy_actions
from sap.fsm.prerequisites import precondition_for
from sap.graphs.coherence import INCOHERENT, execute_coherently, noop_writes
from sap.graphs.confirm import confirm_writes
from sap.graphs.fsm_graph import verified_fsm
from sap.graphs.goal_turns import merge_goal_turns
from sap.graphs.routes import route_values, settled, worth_moving
from sap.graphs.rewrite import RewriteRejected, judged_rewrite
from sap.graphs.state import SynthState
from sap.model import (
    FSM,
    ArgProvenance,
    Executor,
    Scope,
    Tag,
    item_key,
    ToolCall,
    Toolset,
    ToolSpec,
    Trajectory,
    Transition,
    Turn,
)
from sap.provenance.generate import within_totals
from sap.provenance.goals import prerequisite_map
from sap.provenance.groups import group_calls
from sap.provenance.policy import Policy, policy_check, policy_of, unit_amounts
from sap.text import task_phrase

_FSM_CACHE: dict[str, tuple[FSM, dict[str, Any] | None]] = {}  # key -> the FSM and its fallback note
# run_turn passes durability to its checkpointer-less turn graph on purpose (see there)
warnings.filterwarnings("ignore", message="`durability` has no effect when no checkpointer is present")


def toolset_hash(toolset: Toolset) -> str:
    """A hash of the toolset's name and tool docs: the FSM cache key."""
    docs = json.dumps([toolset.name, [t.model_dump(mode="json") for t in toolset.tools]], sort_keys=True)
    return hashlib.sha256(docs.encode()).hexdigest()[:16]


class ExecutorPool:
    """The live executors of the slots in flight, one per slot index, each with the committed call ids and the c0
    object it stands after.

    They are not graph state: state holds plain JSON that checkpoints (c0's seed and patch plus the committed
    calls), and an executor is a live object (a Python domain, a worker process). A slot's executor is only a
    cache of what replaying its committed calls from c0 gives, so after a resume, in another process, or when it
    is out of step, `acquire` rebuilds it by replay."""

    def __init__(self, factory: Callable[[], Executor]) -> None:
        self._factory = factory
        self._live: dict[int, tuple[Executor, tuple[str, ...], dict[str, Any]]] = {}

    def acquire(self, index: int, c0: dict[str, Any], committed: list[ToolCall]) -> Executor:
        """The slot's executor in the state after `committed` on `c0`; rebuilt by replay when absent or out of step."""
        ids = tuple(c.call_id for c in committed)
        cached = self._live.get(index)
        if cached is not None and cached[1] == ids and cached[2] is c0:
            return cached[0]
        ex = cached[0] if cached is not None else self._factory()
        replay(ex, c0, committed)
        self._live[index] = (ex, ids, c0)
        return ex

    def keep(self, index: int, ex: Executor, committed_ids: tuple[str, ...], c0: dict[str, Any]) -> None:
        """Record `ex` as the slot's executor, standing after `committed_ids` on `c0` (closing one it replaces)."""
        cached = self._live.get(index)
        if cached is not None and cached[0] is not ex and hasattr(cached[0], "close"):
            cached[0].close()
        self._live[index] = (ex, committed_ids, c0)

    def release(self, index: int) -> None:
        """Forget the slot's executor and stop its worker."""
        cached = self._live.pop(index, None)
        if cached is not None and hasattr(cached[0], "close"):
            cached[0].close()

    def __len__(self) -> int:
        """How many slots hold a live executor."""
        return len(self._live)


@dataclass
class SynthesisContext:
    """The synthesis graph's runtime context: the toolset, the agents, limits, per-process caches and the live
    executors by slot (everything fixed for a run; what changes per trajectory is in `SynthState`)."""

    toolset: Toolset
    fsm_builder: FSMBuilder = field(default_factory=RuleFSMBuilder)
    planner: Planner = field(default_factory=RulePlanner)
    messenger: Messenger = field(default_factory=RuleMessenger)
    judge: Judge = field(default_factory=RuleJudge)
    repairer: Repairer = field(default_factory=RuleRepairer)
    replanner: Replanner = field(default_factory=RuleReplanner)
    max_rewrites: int = 2  # message rewrites after a reject_text verdict
    replay_check: bool = True  # code check replays every trajectory from c0 on a fresh executor
    use_tags: bool = True  # ablation switch: False makes the planner bind every argument without a declared source
    use_fsm: bool = True  # ablation switch: False plans turn by turn on FlatFSMBuilder's one phase (no FSM)
    min_turns: int = 3
    max_turns: int = 8
    max_attempts: int = 3
    max_replans: int = 2
    max_repairs: int = 3  # c0 repair rounds for a call at its attempt cap, before blacklist + replan; 0 turns it off
    emphasis_size: int = 3  # long-tail emphasis |E|; 0 turns it off
    min_keep_turns: int = 2
    run_seed: int = 0
    node_seconds: dict[str, float] | None = None  # when a dict, each node's cumulative wall time is added to it
    fsm_preset: FSM | None = None  # a verified FSM to use as is (a stored run's), instead of building one
    fsm_note: dict[str, Any] | None = None  # the preset FSM's fallback note (why the rule FSM stood in), if any
    configs: OrderedDict[int, dict[str, Any]] = field(default_factory=OrderedDict)  # c0 by seed (derived, not state)
    patched: OrderedDict[str, dict[str, Any]] = field(default_factory=OrderedDict)  # repaired c0 by seed and patch
    narrative: bool = False  # the planner writes a narrative before the first messages (global rewrite mode)
    user_style: str = "explicit"  # goal: lookup/auth turns merge into the turn they serve (runs default to it,
    # sap.runs.settings); explicit: one FSM step a turn, as a run stored before the setting existed has it
    agents_meta: dict[str, Any] = field(default_factory=dict)  # models and prompt hashes, copied into record meta
    executors: ExecutorPool = field(init=False, repr=False)  # live executors by slot (see ExecutorPool)
    specs: dict[str, ToolSpec] = field(init=False, repr=False)  # the toolset's tool specs by name
    _docs_hash: tuple[Toolset, str] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        """The executor pool and the spec table of the toolset."""
        self.executors = ExecutorPool(self.toolset.executor_factory)
        self.specs = {t.name: t for t in self.toolset.tools}

    @property
    def scope(self) -> Scope | None:
        """Where the toolset's names resolve (a file system's current folder), if it declares that."""
        return self.toolset.extra.get("scope")

    @property
    def policy(self) -> Policy | None:
        """The toolset's declared policy (resolved to its tool names), if any."""
        return policy_of(self.toolset)

    def requires(self) -> dict[str, list[str]]:
        """tool -> the tools that must run before it (`prerequisite_map` of the FSM and the policy)."""
        first = {tool: rule.first for rule in (self.policy.must_precede if self.policy else ()) for tool in rule.before}
        return prerequisite_map(self.fsm()[1], first)

    def fsm(self) -> tuple[str, FSM]:
        """The toolset's V_spec-verified FSM, built once per process, tool-doc hash, builder and path lengths."""
        builder = self.fsm_builder if self.use_fsm else FlatFSMBuilder()
        key = f"{self._toolset_hash()}:{builder.cache_key()}:{self.min_turns}-{self.max_turns}"
        if self.fsm_preset is not None:
            return key, self.fsm_preset
        if key not in _FSM_CACHE:
            _FSM_CACHE[key] = verified_fsm(builder, self.toolset, (self.min_turns, self.max_turns))
        return key, _FSM_CACHE[key][0]

    def _toolset_hash(self) -> str:
        """toolset_hash of the toolset, computed once per toolset object: nodes ask for the FSM ~20 times a slot."""
        if self._docs_hash is None or self._docs_hash[0] is not self.toolset:
            self._docs_hash = (self.toolset, toolset_hash(self.toolset))
        return self._docs_hash[1]

    def fsm_fallback(self) -> dict[str, Any] | None:
        """Why the rule FSM stands in for the configured builder's, or None; a preset FSM carries its own note."""
        key, _ = self.fsm()
        return self.fsm_note if self.fsm_preset is not None else _FSM_CACHE[key][1]

    def initial_config(self, seed: int) -> dict[str, Any]:
        """The trajectory's c0: `sample_config(seed)`, derived once per process and kept out of the checkpointed
        state (which is re-serialized at every step); a resumed thread derives the same c0 again."""
        return _recent(self.configs, seed, lambda: self.toolset.sample_config(seed))

    def config(self, seed: int, patch: list[PatchOp]) -> dict[str, Any]:
        """c0 with a repair patch applied, cached per process like `initial_config` (the same object each time,
        so field indexes built on it are reused)."""
        base = self.initial_config(seed)
        if not patch:
            return base
        key = f"{seed}:" + json.dumps([[op["path"], op["value"]] for op in patch], sort_keys=True)
        return _recent(self.patched, key, lambda: apply_patch(base, patch))

    def c0(self, state: SynthState) -> dict[str, Any]:
        """The trajectory's c0: derived from its seed, with the state's repair patch applied."""
        return self.config(state["seed"], state.get("c0_patch", []))


_CONFIGS_KEPT = 64  # per cache; more than the slots in flight, so theirs stay (and keep their field indexes)


def _recent(cache: OrderedDict[Any, dict[str, Any]], key: Any, make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """cache[key], made on a miss; the least recently used entry goes beyond _CONFIGS_KEPT. (Clearing the whole
    cache instead gave every slot in flight a new c0 object at concurrency 32: executors replayed, fields
    re-indexed.)"""
    value = cache.get(key)
    if value is not None:
        with contextlib.suppress(KeyError):  # another slot thread may have just dropped it
            cache.move_to_end(key)
        return value
    cache[key] = value = make()
    if len(cache) > _CONFIGS_KEPT:
        cache.popitem(last=False)
    return value


def stated_value(turn: int, name: str, value: Any, prov: ArgProvenance) -> StatedValue | None:
    """Where the user said `value` verbatim: this turn for new or config values, the anchor turn for restated ones."""
    tag = prov.effective_tag()
    if tag in (Tag.self_create, Tag.initial_state):
        return StatedValue(turn, name, value)
    if tag == Tag.prev_user_msg:
        return StatedValue(prov.turn, name, value)
    return None


def replay_problems(toolset: Toolset, traj: Trajectory, writes: Collection[str] = ()) -> tuple[list[str], str | None]:
    """Replay the committed calls from c0 on a fresh executor, once: a problem for any differing result or for a
    write (one of the FSM's action tools `writes`, or a named update) that changed nothing, else none and the hash
    of the end state reached (recorded in the record's meta, checked again by `sap validate`)."""
    ex = toolset.executor_factory()
    try:
        noops = noop_writes(ex, traj.c0, _committed(traj.turns), {t.name: t for t in toolset.tools}, writes)
        return noops, None if noops else end_state_hash(ex)
    except ReplayMismatch as exc:
        return [f"replay from c0: {exc}"], None
    finally:
        if hasattr(ex, "close"):
            ex.close()


def _turns(state: SynthState) -> list[Turn]:
    """The state's turns as models."""
    return [Turn.model_validate(t) for t in state.get("turns", [])]


def _committed(turns: list[Turn]) -> list[ToolCall]:
    """Every committed call in dialogue order."""
    return [c for t in turns for c in t.calls]


def trajectory_from_state(state: SynthState, ctx: SynthesisContext) -> Trajectory:
    """The trajectory the state describes; under a toolset policy, with its confirmation exchanges."""
    traj = Trajectory(id=trajectory_id(ctx.toolset.name, state["seed"], state["index"]), toolset=ctx.toolset.name,
                      seed=state["seed"],
                      c0={}, turns=_turns(state), virtual_history=state.get("virtual_history", []))
    if ctx.policy is not None:
        traj = confirm_writes(traj, ctx.policy, ctx.specs)
    traj.c0 = ctx.c0(state)  # the cached object itself (validation would copy it), so the field indexes
    return traj              # built on it are reused


def turn_actions(state: SynthState, ctx: SynthesisContext) -> list[list[str]]:
    """The tools of every planned turn: the policy's or prerequisites' actions when set, else the transitions'."""
    if state.get("actions") is not None:
        return state["actions"]
    _, fsm = ctx.fsm()
    return [fsm.transitions[e].action for e in state["path"]]


def turn_action(state: SynthState, ctx: SynthesisContext) -> list[str]:
    """The tools of the current turn: its FSM transition's action, or the policy's (and prerequisites') for it."""
    return turn_actions(state, ctx)[state["turn_pos"]]


def with_prerequisite(state: SynthState, ctx: SynthesisContext, fsm: FSM, call: ToolCall,
                      error: str | None) -> list[list[str]] | None:
    """The turns' actions with the learned prerequisite of the pending call that its state error `error` asks for
    inserted just before it (the same mechanism as a policy's required calls: the turn's actions); None when no
    learned prerequisite matches or it already stands before the call in this turn."""
    if not fsm.requires.get(call.name):  # nothing learned for this tool: the turns stay as planned
        return None
    actions = turn_actions(state, ctx)
    action, pos = actions[state["turn_pos"]], state["call_pos"]
    pre = precondition_for(fsm, call.name, error, done=settled(ctx.scope, action[:pos]))
    if pre is None:
        return None
    if ctx.scope is not None and ctx.scope.moves(pre.needs):  # a move of the current folder only where it can help
        done = [(t.index, c) for t in _turns(state) for c in t.calls if c.ok]
        before = [c for i, c in done if i < state["turn_pos"]]
        if not worth_moving(ctx.scope, ctx.c0(state), before, [c for i, c in done if i == state["turn_pos"]], error):
            return None
    return [*actions[:state["turn_pos"]], [*action[:pos], pre.needs, *action[pos:]], *actions[state["turn_pos"] + 1:]]


def prerequisite_values(fsm: FSM, tool: str, later: list[str], args_exec: dict[str, Any],
                        args_prov: dict[str, ArgProvenance]) -> None:
    """Set (in place) the arguments of `tool`, a learned prerequisite of a call later in its turn (`later`), to the
    values that made it work when learned (a door list, a full brake), stated in its turn (self_create) even where
    the planner's value was the same one restated."""
    for pre in fsm.preconditions:
        if pre.needs == tool and pre.tool in later:
            for name, value in pre.args.items():
                if name in args_exec:
                    args_exec[name] = value
                    args_prov[name] = ArgProvenance(tag=Tag.self_create)
            return


def _tags(fsm: FSM, transition: Transition, tool: str, seen: Collection[str] = ()) -> dict[str, Tag]:
    """The provenance tags of `tool`'s arguments: its transition's, or for a call a policy or a learned
    precondition inserted into the turn, those of the first transition calling it whose earlier-result arguments
    a tool already called (`seen`) can feed, else of the first transition calling it."""
    if tool in transition.action:
        return transition.provenance_tag.get(tool, {})
    options = [t.provenance_tag[tool] for t in fsm.transitions if tool in t.provenance_tag]

    def fed(tags: dict[str, Tag]) -> bool:
        return all(tag != Tag.prev_output or set(seen) & set(fsm.producers.get(tool, {}).get(arg, []))
                   for arg, tag in tags.items())
    return next((tags for tags in options if fed(tags)), options[0] if options else {})


def policy_path(ctx: SynthesisContext, seed: int, path: list[int]) -> dict[str, Any]:
    """The walked `path` as a state update; under a toolset policy, with each turn's actions (`policy_actions`)
    and the path cut to the turns they keep."""
    if ctx.policy is None:
        return {"path": path, "actions": None}
    _, fsm = ctx.fsm()
    turns = policy_actions(ctx.policy, [fsm.transitions[e].action for e in path], random.Random(f"{seed}:policy"),
                           ctx.min_turns)
    return {"path": [path[n] for n, _ in turns], "actions": [action for _, action in turns]}


def ruled_values(ctx: SynthesisContext, tool: str, history: list[HistoryCall], rng: random.Random,
                 args_exec: dict[str, Any], args_prov: dict[str, ArgProvenance]) -> None:
    """Set (in place) each argument a policy value rule governs to a value it allows, stated by the user, when the
    planner's value is not one."""
    for rule in ctx.policy.value_rules if ctx.policy else ():
        allowed = unit_amounts(rule, [h.call for h in history])
        if rule.tool == tool and rule.param in args_exec and allowed and args_exec[rule.param] not in allowed:
            args_exec[rule.param] = rng.choice(allowed)
            args_prov[rule.param] = ArgProvenance(tag=Tag.self_create)


def derived_values(ctx: SynthesisContext, tool: str, history: list[HistoryCall], args_exec: dict[str, Any],
                   args_prov: dict[str, ArgProvenance]) -> None:
    """Set (in place) each item field a toolset derives from the call's other values and the earlier results
    (`Toolset.extra["derived"]`: tool -> "param.field" -> function), stated by the user, when the array has one
    item (several would need a split the user chooses)."""
    for target, derive in ctx.toolset.extra.get("derived", {}).get(tool, {}).items():
        param, field_name = target.split(".", 1)
        items = args_exec.get(param)
        if not isinstance(items, list) or len(items) != 1 or not isinstance(items[0], dict):
            continue
        value = derive(args_exec, [h.call.result for h in history if h.call.ok])
        if value is not None:
            items[0][field_name] = value
            args_prov[item_key(param, 0, field_name)] = ArgProvenance(tag=Tag.self_create)


Ctx = Runtime[SynthesisContext]
Node = Callable[[SynthState, Ctx], Any]


def timed(name: str) -> Callable[[Node], Node]:
    """A node that adds its wall time to `context.node_seconds[name]` on every call when that is a dict."""
    def wrap(fn: Node) -> Node:
        @functools.wraps(fn)
        def run(state: SynthState, runtime: Ctx) -> Any:
            sink = runtime.context.node_seconds
            if sink is None:
                return fn(state, runtime)
            start = time.perf_counter()
            try:
                return fn(state, runtime)
            finally:
                sink[name] = sink.get(name, 0.0) + time.perf_counter() - start
        return run
    return wrap


@timed("load_fsm")
def load_fsm(state: SynthState, runtime: Ctx) -> dict[str, Any]:
    """Get the run's verified FSM (built once per process) and record its key."""
    key, _ = runtime.context.fsm()
    return {"fsm_hash": key, "status": "running"}


@timed("sample_path")
def sample_path(state: SynthState, runtime: Ctx) -> dict[str, Any]:
    """Draw the long-tail emphasis set and walk the FSM; reset the turn cursor."""
    ctx = runtime.context
    _, fsm = ctx.fsm()
    rng = random.Random(f"{state['seed']}:path")
    emphasis = emphasis_set(fsm, state.get("tool_histogram", {}), rng, ctx.emphasis_size)
    try:
        path = walk(fsm, rng, ctx.min_turns, ctx.max_turns, emphasis=emphasis)
    except NoPathError:  # the emphasis weights can trap every try away from a final state: walk plainly
        emphasis = set()
        path = walk(fsm, rng, ctx.min_turns, ctx.max_turns)
    return {"emphasis": sorted(emphasis), **policy_path(ctx, state["seed"], path),
            "turns": [], "turn_pos": 0, "call_pos": 0, "attempts": 0, "exec_error": None,
            "planned_calls": [], "turn_answers": {},
            "failed_args": [], "attempt_log": [], "blacklist": [], "pending": None, "pending_virtual": [],
            "virtual_history": [], "c0_patch": [], "repair_log": [], "changed_calls": []}


def upcoming_tools(state: SynthState, ctx: SynthesisContext, fsm: FSM, turn_pos: int, call_pos: int) -> list[str]:
    """The tools after call `call_pos` of turn `turn_pos` up to the turn's end, or past it up to the next write of
    the path (a lookup ahead of a confirmed exchange is about an order that can be exchanged, a delivered one)."""
    actions = turn_actions(state, ctx)
    later = [t for a in actions[turn_pos:] for t in a][call_pos + 1:]
    ahead = actions[turn_pos][call_pos + 1:]
    if any(t in fsm.writes for t in ahead):
        return ahead
    write = next((i for i, t in enumerate(later) if t in fsm.writes), None)
    return later[:write + 1] if write is not None else ahead


@timed("plan_call")
def plan_call(state: SynthState, runtime: Ctx) -> dict[str, Any]:
    """Bind the next call (or retry the pending one with the last error fed back) with the planner; at a turn's
    start the planner first decides what it can for all the turn's calls at once (Planner.ahead)."""
    ctx = runtime.context
    _, fsm = ctx.fsm()
    turn_pos, call_pos, attempts = state["turn_pos"], state["call_pos"], state["attempts"]
    action = turn_action(state, ctx)
    tool = action[call_pos]
    turns = _turns(state)
    history = [HistoryCall(t.index, i, c) for t in turns for i, c in enumerate(t.calls)]
    stated = [s for t in turns for c in t.calls for name, p in c.args_prov.items()
              if (s := stated_value(t.index, name, c.arg_value(name), p)) is not None]
    update: dict[str, Any] = {}
    answers, planned = state.get("turn_answers", {}), state.get("planned_calls", [])
    if attempts == 0 and plan_key(turn_pos, action, call_pos) not in planned:  # a turn's first planning, or a
        # call put in since (a prerequisite, a re-planned path): the calls not decided yet, as code binds them now
        answers, update = plan_ahead(state, ctx, fsm, history, stated, answers, planned)
    req = plan_request(state, ctx, fsm, history, stated, turn_pos, call_pos)
    if attempts == 0:
        req = replace(req, answers=answers.get(req.key, {}))
    binding = ctx.planner.bind(req)
    ruled_values(ctx, tool, history, req.rng, binding.args_exec, binding.args_prov)
    derived_values(ctx, tool, history, binding.args_exec, binding.args_prov)
    within_totals(binding.args_exec, [n for n, p in binding.args_prov.items() if p.tag == Tag.self_create], req.rng)
    prerequisite_values(fsm, tool, action[call_pos + 1:], binding.args_exec, binding.args_prov)
    route_values(req, binding.args_exec, binding.args_prov)
    place = len(turns[-1].calls) if turns and turns[-1].index == turn_pos else 0  # a skipped read leaves no gap
    call = ToolCall(call_id=f"call_{turn_pos}_{place}", name=tool, args_exec=binding.args_exec,
                    args_prov=binding.args_prov, attempts=attempts + 1)
    return {**update, "pending": call.model_dump(mode="json"),
            "pending_virtual": [{"turn": v.turn, "param": v.param, "value": v.value, "used_at": turn_pos}
                                for v in binding.virtual]}


def plan_ahead(state: SynthState, ctx: SynthesisContext, fsm: FSM, history: list[HistoryCall],
               stated: list[StatedValue], answers: dict[str, dict[str, Any]], planned: list[str]
               ) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """What the planner decides at once (Planner.ahead) for the current turn's calls not decided yet, given the
    answers it gave before; at the trajectory's first planning also the new values of every later turn's calls.
    Returns the answers from this turn on, and the state update that keeps them."""
    turn_pos, call_pos = state["turn_pos"], state["call_pos"]
    actions = turn_actions(state, ctx)
    todo = [i for i in range(call_pos, len(actions[turn_pos])) if plan_key(turn_pos, actions[turn_pos], i) not in planned]
    reqs = [plan_request(state, ctx, fsm, history, stated, turn_pos, i) for i in todo]
    later = [plan_request(state, ctx, fsm, history, stated, t, i) for t in range(turn_pos + 1, len(actions))
             for i in range(len(actions[t]))] if not planned and turn_pos == 0 else []
    story = NarrativeRequest(ctx.toolset.name, ctx.c0(state), [[task_phrase(ctx.specs[t]) for t in a] for a in actions]) \
        if ctx.narrative and state.get("narrative") is None else None
    ahead = ctx.planner.ahead([replace(r, answers=answers.get(r.key, {})) for r in reqs], story, later)
    current = [k for k in planned if int(k.split(":", 1)[0]) == turn_pos]
    kept = {k: v for k, v in answers.items() if int(k.split(":", 1)[0]) >= turn_pos}
    for key, values in ahead.values.items():
        kept[key] = {**kept.get(key, {}), **values}
    return kept, {"planned_calls": current + [r.key for r in reqs], "turn_answers": kept,
                  **({"narrative": ahead.narrative} if ahead.narrative else {})}


def plan_request(state: SynthState, ctx: SynthesisContext, fsm: FSM, history: list[HistoryCall],
                 stated: list[StatedValue], turn_pos: int, call_pos: int) -> PlanRequest:
    """The planner's request for call `call_pos` of turn `turn_pos`, given the calls made so far (`history`) and
    the values stated in them; the pending call's last error and failed arguments only for the pending call."""
    pending = (turn_pos, call_pos) == (state["turn_pos"], state["call_pos"])
    attempts = state["attempts"] if pending else 0
    action = turn_actions(state, ctx)[turn_pos]
    tool = action[call_pos]
    transition = fsm.transitions[state["path"][turn_pos]]
    tags = _tags(fsm, transition, tool, {h.call.name for h in history}) if ctx.use_tags else {}
    return PlanRequest(spec=ctx.specs[tool], tags=tags, free=not ctx.use_tags, turn=turn_pos,
                       index=call_pos, history=history, stated=stated, c0=ctx.c0(state),
                       rng=random.Random(f"{state['seed']}:plan:{turn_pos}:{call_pos}:{attempts}"),
                       last_error=state.get("exec_error") if pending else None,
                       failed_args=state.get("failed_args", []) if pending else [],
                       upcoming=[ctx.specs[t] for t in upcoming_tools(state, ctx, fsm, turn_pos, call_pos)],
                       virtual=[StatedValue(v["turn"], v["param"], v["value"])
                                for v in state.get("virtual_history", [])],
                       samplers=ctx.toolset.extra.get("samplers", {}),
                       combinations=ctx.toolset.extra.get("combinations", {}).get(tool, []), scope=ctx.scope,
                       key=plan_key(turn_pos, action, call_pos))


def commit(state: SynthState, ctx: SynthesisContext, call: ToolCall, value: Any, ex: Executor, c0: dict[str, Any],
           update: dict[str, Any], changed: bool) -> Command[Literal["plan_call", "__end__"]]:
    """Commit a successful call (with `update` merged in; `changed`: whether it changed the state), keep `ex` as
    the slot's executor, and go on to the turn's next call or end the turn."""
    _, fsm = ctx.fsm()
    turn_pos = state["turn_pos"]
    transition = fsm.transitions[state["path"][turn_pos]]
    done = call.model_copy(update={"result": value, "ok": True, "error": None}).model_dump(mode="json")
    # append without re-dumping earlier turns, so their result objects (and field indexes) are reused
    new_turns = list(state["turns"])
    if not new_turns or new_turns[-1]["index"] != turn_pos:  # the turn's first committed call opens it
        new_turns.append(Turn(index=turn_pos, state=transition.target,
                              transition=state["path"][turn_pos]).model_dump(mode="json"))
    new_turns[-1] = {**new_turns[-1], "calls": new_turns[-1]["calls"] + [done]}
    ctx.executors.keep(state["index"], ex, tuple(c.call_id for c in _committed(_turns(state))) + (call.call_id,), c0)
    return _next_call(state, turn_action(state, ctx), {
        **update, "turns": new_turns,
        "changed_calls": state.get("changed_calls", []) + ([call.call_id] if changed else []),
        "virtual_history": state.get("virtual_history", []) + state.get("pending_virtual", [])})


def _next_call(state: SynthState, action: list[str], update: dict[str, Any]) -> Command[Literal["plan_call", "__end__"]]:
    """On to the turn's next call, or end the turn, with `update` merged in and the pending call cleared."""
    turn_pos, call_pos = state["turn_pos"], state["call_pos"]
    next_call = call_pos + 1 < len(action)
    turn_pos, call_pos = (turn_pos, call_pos + 1) if next_call else (turn_pos + 1, 0)
    return Command(goto="plan_call" if next_call else END, update={
        **update, "turn_pos": turn_pos, "call_pos": call_pos,
        "attempts": 0, "exec_error": None, "failed_args": [], "pending": None, "pending_virtual": []})


def _skippable(state: SynthState, ctx: SynthesisContext, call: ToolCall, error: str | None) -> bool:
    """A read refused as a repeat with nothing changed since is left out of its turn (the earlier result still
    answers it), as long as the turn keeps a call: one committed already, or one still to come."""
    if not (error or "").startswith(INCOHERENT + "it repeats") or not named_read(ctx.specs[call.name]):
        return False
    action = turn_action(state, ctx)
    opened = bool(state["turns"]) and state["turns"][-1]["index"] == state["turn_pos"]
    return opened or state["call_pos"] + 1 < len(action)


@timed("execute_call")
def execute_call(state: SynthState, runtime: Ctx) -> Command[Literal["plan_call", "repair_call", "replan", "__end__"]]:
    """Run the pending call: commit it, retry it (back to plan_call with the error), or at the attempt cap hand it
    to repair_call (or straight to replan when repair is off)."""
    ctx = runtime.context
    call = ToolCall.model_validate(state["pending"])
    c0 = ctx.c0(state)
    committed = _committed(_turns(state))
    ex = ctx.executors.acquire(state["index"], c0, committed)
    _, fsm = ctx.fsm()
    res, changed = execute_coherently(ex, ctx.specs[call.name], call, committed, state.get("changed_calls", []),
                                      fsm.writes, relative=ctx.scope is not None and ctx.scope.moves(call.name))
    if res.ok:
        return commit(state, ctx, call, res.value, ex, c0, {}, changed)
    if _skippable(state, ctx, call, res.error):
        return _next_call(state, turn_action(state, ctx), {})
    attempts = state["attempts"] + 1
    log = state.get("attempt_log", []) + [{"turn": state["turn_pos"], "call": state["call_pos"], "tool": call.name,
                                           "attempt": attempts, "error": res.error}]
    actions = with_prerequisite(state, ctx, fsm, call, res.error)
    if actions is not None:  # the failed attempt changed nothing: plan the prerequisite, then the call afresh
        # the error stays (unless no error is fed back: no_retry): it says what the prerequisite is for (the file a
        # `cd` must lead to)
        kept = res.error if ctx.max_attempts > 1 else None
        return Command(goto="plan_call", update={"actions": actions, "attempt_log": log, "attempts": 0,
                                                 "exec_error": kept, "failed_args": [], "pending": None})
    update = {"attempts": attempts, "exec_error": res.error, "attempt_log": log}
    if attempts < ctx.max_attempts:
        return Command(goto="plan_call", update={
            **update, "pending": None, "failed_args": state.get("failed_args", []) + [call.args_exec]})
    repairable = ctx.max_repairs > 0 and not (res.error or "").startswith(INCOHERENT)  # a patched c0 cannot fix it
    return Command(goto="repair_call" if repairable else "replan", update=update)


@timed("repair_call")
def repair_call_node(state: SynthState, runtime: Ctx) -> Command[Literal["plan_call", "replan", "__end__"]]:
    """Up to max_repairs c0 repair rounds for the pending call at its attempt cap: commit it on the patched c0, or
    go on to replan."""
    ctx = runtime.context
    call = ToolCall.model_validate(state["pending"])
    patch = state.get("c0_patch", [])
    turn_pos, call_pos = state["turn_pos"], state["call_pos"]
    repaired, rounds = repair_call(ctx.repairer, ctx.toolset, lambda p: ctx.config(state["seed"], p), patch, call,
                                   state.get("exec_error") or "", _committed(_turns(state)), ctx.max_repairs)
    repair_log = state.get("repair_log", []) + [{"turn": turn_pos, "call": call_pos, "tool": call.name, **r}
                                                for r in rounds]
    if repaired is None:
        return Command(goto="replan", update={"repair_log": repair_log})
    added = [{**op, "turn": turn_pos} for op in repaired.patch[len(patch):]]
    # the repaired executor, on the patched c0, replaces the slot's
    return commit(state, ctx, call, repaired.result.value, repaired.executor, repaired.c0,
                  {"repair_log": repair_log, "c0_patch": patch + added}, not named_read(ctx.specs[call.name]))


@timed("replan")
def replan(state: SynthState, runtime: Ctx) -> Command[Literal["__end__"]]:
    """The pending call is lost: drop its turn, blacklist its tool and re-plan the rest of the path (at most
    max_replans times) around it and the tools needing the state its error refused (`avoided`); else truncate at
    the failing turn, or drop the slot if too few turns remain."""
    ctx = runtime.context
    _, fsm = ctx.fsm()
    call = ToolCall.model_validate(state["pending"])
    turn_pos = state["turn_pos"]
    kept = [t for t in _turns(state) if t.index < turn_pos]
    kept_ids = {c.call_id for c in _committed(kept)}
    update = {"turns": [t for t in state["turns"] if t["index"] < turn_pos], "pending_virtual": [],
              "changed_calls": [cid for cid in state.get("changed_calls", []) if cid in kept_ids],
              "virtual_history": [v for v in state.get("virtual_history", []) if v["used_at"] < turn_pos],
              "pending": None, "c0_patch": [op for op in state.get("c0_patch", []) if op["turn"] < turn_pos]}
    blacklist = state.get("blacklist", []) + [call.name]                     # patches made for dropped turns go
    if len(blacklist) <= ctx.max_replans:
        errors = {t: [a["error"] or "" for a in state.get("attempt_log", []) if a["tool"] == t] for t in blacklist}
        avoid = avoided(errors, ctx.specs)
        new_path = ctx.replanner.replan(ReplanRequest(
            fsm, state["path"], kept, avoid, ctx.min_turns, ctx.max_turns,
            random.Random(f"{state['seed']}:replan:{len(blacklist)}")))
        if new_path is not None:
            return Command(goto=END, update={
                **update, **policy_path(ctx, state["seed"], new_path), "blacklist": blacklist, "call_pos": 0, "attempts": 0,
                "exec_error": None, "failed_args": []})
    if len(kept) >= ctx.min_keep_turns:
        return Command(goto=END, update={**update, "status": "truncated"})
    reason = f"{call.name} failed {state['attempts']} times at turn {turn_pos}"
    return Command(goto=END, update={**update, "status": "dropped", "drop_reason": reason,
                                     "drop_kind": DropReason.TOOL_FAILED.value})


def after_turn(state: SynthState) -> Literal["run_turn", "group_parallel", "persist"]:
    """The next turn, the messages (path done or truncated), or persist (dropped)."""
    if state["status"] == "dropped":
        return "persist"
    if state["status"] == "truncated" or state["turn_pos"] >= len(state["path"]):
        return "group_parallel"
    return "run_turn"


@timed("group_parallel")
def group_parallel(state: SynthState, runtime: Ctx) -> Command[Literal["write_messages", "persist"]]:
    """In goal style, merge the turns that only serve the next into it (`merge_goal_turns`); then set each call's
    parallel group (each call its own under a one-at-a-time policy). A trajectory the judge rejects by its calls
    alone is dropped here, before any message is written for it."""
    ctx = runtime.context
    turns, update = _turns(state), {}
    if ctx.user_style == "goal":
        turns, update = goal_turns(state, ctx, turns)
    one = ctx.policy is not None and ctx.policy.one_at_a_time
    turns = [t.model_copy(update={"calls": [c.model_copy(update={"group": i}) for i, c in enumerate(t.calls)]})
             if one else group_calls(t) for t in turns]
    update = {**update, "turns": [t.model_dump(mode="json") for t in turns]}
    if not isinstance(ctx.judge, CallsJudge):
        return Command(goto="write_messages", update=update)
    verdict = ctx.judge.judge_calls(trajectory_from_state({**state, **update}, ctx), ctx.specs)
    if verdict.accepted:
        return Command(goto="write_messages", update=update)
    _, reason = verdict.next_step(0, 0)
    return Command(goto="persist", update={**update, "verdict": verdict.model_dump(mode="json"), "status": "dropped",
                                           "drop_reason": reason, "drop_kind": DropReason.of_judge(verdict.decision).value})


def goal_turns(state: SynthState, ctx: SynthesisContext, turns: list[Turn]) -> tuple[list[Turn], dict[str, Any]]:
    """The goal-level turns of the executed ones, and the state update that re-points the call ids, the virtual
    history and the turn numbers of the logs at them."""
    merged = merge_goal_turns(turns, state.get("virtual_history", []), ctx.requires(), ctx.fsm()[1].writes,
                              ctx.min_keep_turns, random.Random(f"{state['seed']}:pairs"))
    ids = {old.call_id: new.call_id for old, new in zip(_committed(turns), _committed(merged.turns))}
    logs = {key: [{**e, "turn": merged.turn_of.get(e["turn"], e["turn"])} for e in state.get(key, [])]
            for key in ("attempt_log", "repair_log", "c0_patch")}
    return merged.turns, {**logs, "virtual_history": merged.virtual,
                          "changed_calls": [ids.get(c, c) for c in state.get("changed_calls", [])]}


@timed("write_messages")
def write_messages(state: SynthState, runtime: Ctx) -> dict[str, Any]:
    """Write the user and assistant messages of every turn (a narrative first, in global mode)."""
    ctx = runtime.context
    rounds = state.get("message_rounds", 0)
    rng = random.Random(f"{state['seed']}:messages" + (f":{rounds}" if rounds else ""))
    turns = _turns(state)
    narrative = state.get("narrative")
    if ctx.narrative and narrative is None:
        narrative = ctx.planner.narrate(NarrativeRequest(
            ctx.toolset.name, ctx.c0(state),
            [[task_phrase(ctx.specs[c.name]) for c in t.calls] for t in turns]))
    turns = ctx.messenger.write(turns, ctx.specs, rng, state.get("virtual_history", []), narrative=narrative)
    return {"turns": [t.model_dump(mode="json") for t in turns], "message_rounds": rounds + 1,
            "narrative": narrative}


@timed("code_check")
def code_check_node(state: SynthState, runtime: Ctx) -> Command[Literal["judge", "persist"]]:
    """The code check, the minimum length and the replay from c0: on to the judge, or dropped."""
    ctx = runtime.context
    traj = trajectory_from_state(state, ctx)
    problems = policy_check(traj, ctx.policy, ctx.specs, leaks=False)  # leaks: the judge (rewritable)
    if len(traj.turns) < ctx.min_keep_turns:
        problems.append(f"only {len(traj.turns)} turns, fewer than {ctx.min_keep_turns}")
    end_hash = None
    if not problems and ctx.replay_check:
        problems, end_hash = replay_problems(ctx.toolset, traj, ctx.fsm()[1].writes)
    if problems:
        return Command(goto="persist", update={"status": "dropped", "drop_reason": f"code check: {problems[0]}",
                                               "drop_kind": DropReason.CODE_CHECK.value})
    return Command(goto="judge", update={"end_state_hash": end_hash})


@timed("judge")
def judge(state: SynthState, runtime: Ctx) -> Command[Literal["write_messages", "rewrite", "persist"]]:
    """Judge the trajectory: accept (on to rewrite), rewrite the messages, or drop."""
    ctx = runtime.context
    verdict = ctx.judge.judge(trajectory_from_state(state, ctx), ctx.specs)
    update: dict[str, Any] = {"verdict": verdict.model_dump(mode="json")}
    step, reason = verdict.next_step(state.get("message_rounds", 1), ctx.max_rewrites)
    if step == "accept":
        status = "truncated" if state["status"] == "truncated" else "accepted"
        return Command(goto="rewrite", update={**update, "status": status})
    if step == "rewrite":
        return Command(goto="write_messages", update=update)
    return Command(goto="persist", update={**update, "status": "dropped", "drop_reason": reason,
                                           "drop_kind": DropReason.of_judge(verdict.decision).value})


@timed("rewrite")
def rewrite_variant(state: SynthState, runtime: Ctx) -> dict[str, Any]:
    """For a miss_param / miss_func slot, the judged rewrite variant of the accepted base, or why there is none."""
    kind = state.get("kind", "base")
    if kind == "base":
        return {}
    ctx = runtime.context
    out = judged_rewrite(kind, trajectory_from_state(state, ctx), ctx.toolset, state["seed"], ctx.judge,
                         ctx.messenger)
    if isinstance(out, RewriteRejected):
        return {"rewrite_rejection": out.reason}
    return {"variant": out.model_dump(mode="json")}


@timed("persist")
def persist(state: SynthState, runtime: Ctx) -> dict[str, Any]:
    """Release the slot's executor and build the export record of an accepted (or truncated) trajectory."""
    ctx = runtime.context
    ctx.executors.release(state["index"])
    if state["status"] not in ("accepted", "truncated"):
        return {"record": None}
    traj = (Trajectory.model_validate(state["variant"]) if state.get("variant")
            else trajectory_from_state(state, ctx))
    traj.judge = state.get("verdict")
    meta = {"index": state["index"], "run_seed": ctx.run_seed, "fsm": state["fsm_hash"],
            "states": [t.state for t in traj.turns], "truncated": state["status"] == "truncated",
            "emphasis": state.get("emphasis", []), "requested_kind": state.get("kind", "base"),
            **({"rewrite_rejection": state["rewrite_rejection"]} if state.get("rewrite_rejection") else {}),
            "retries": len(state.get("attempt_log", [])),
            **({"user_style": "goal"} if ctx.user_style == "goal" else {}),
            **({"end_state_hash": state["end_state_hash"]} if state.get("end_state_hash") else {}),
            **({"c0_patch": [{"path": op["path"], "value": op["value"]} for op in state["c0_patch"]]}
               if state.get("c0_patch") else {}),
            **({"fsm_fallback": fallback} if (fallback := ctx.fsm_fallback()) else {}),
            **({"agents": ctx.agents_meta} if ctx.agents_meta else {})}
    return {"record": to_record(traj, ctx.toolset, meta)}


@functools.cache
def turn_graph() -> CompiledStateGraph:
    """One turn's calls with their retry, repair and replan edges, compiled once per process; never checkpointed
    inside (checkpointer=False), so the outer graph checkpoints once per turn and a crash mid-turn re-runs that
    turn from its start.

    START -> plan_call -> execute_call -+-> plan_call  (next call; a retry with the error fed back)
                                        +-> repair_call -+-> plan_call / END (repaired and committed)
                                        |                +-> replan
                                        +-> replan -> END (re-planned path, truncated or dropped)
                                        +-> END        (turn done)"""
    builder = StateGraph(SynthState, context_schema=SynthesisContext)
    builder.add_node("plan_call", plan_call)
    builder.add_node("execute_call", execute_call)
    builder.add_node("repair_call", repair_call_node)
    builder.add_node("replan", replan)
    builder.add_edge(START, "plan_call")
    builder.add_edge("plan_call", "execute_call")
    return builder.compile(checkpointer=False, name="run_turn")


def run_turn(state: SynthState, runtime: Ctx) -> dict[str, Any]:
    """Run the turn graph over the state, with the same context."""
    # durability given explicitly: inheriting the parent's "sync" makes LangGraph 1.2 wait on a checkpoint
    # that a checkpointer=False graph never writes (AttributeError _put_checkpoint_fut)
    return turn_graph().invoke(state, context=runtime.context, durability="exit")


@functools.cache
def compiled_synthesis_graph() -> CompiledStateGraph:
    """The outer synthesis graph, compiled once per process without a checkpointer. Its node names are what
    checkpoints name as a thread's next step: renaming one breaks resuming threads stored before."""
    turn_graph()  # compiled here, before slot threads could race to compile it
    builder = StateGraph(SynthState, context_schema=SynthesisContext)
    for name, fn in (("load_fsm", load_fsm), ("sample_path", sample_path), ("run_turn", run_turn),
                     ("group_parallel", group_parallel), ("write_messages", write_messages),
                     ("code_check", code_check_node), ("judge", judge), ("rewrite", rewrite_variant),
                     ("persist", persist)):
        builder.add_node(name, fn)
    builder.add_edge(START, "load_fsm")
    builder.add_edge("load_fsm", "sample_path")
    builder.add_edge("sample_path", "run_turn")
    builder.add_conditional_edges("run_turn", after_turn)
    builder.add_edge("write_messages", "code_check")
    builder.add_edge("rewrite", "persist")
    builder.add_edge("persist", END)
    return builder.compile(name="synthesis")


def synthesis_graph(checkpointer: Any = None) -> CompiledStateGraph:
    """The synthesis graph (compiled once per process), bound to `checkpointer` if one is given; invoke it with
    {"index": i, "seed": s} and `context=SynthesisContext(...)`, one thread per trajectory.

    A compiled graph holds its checkpointer, so a run's saver is attached to a copy of the compiled graph (the
    same nodes, channels and edges; no compilation) rather than compiling per saver or caching per saver."""
    graph = compiled_synthesis_graph()
    return graph if checkpointer is None else graph.copy({"checkpointer": checkpointer})
