"""The synthesis graph: load_fsm -> sample_path -> run_turn (plan_call <-> execute_call, once per turn; a call at
its attempt cap gets c0 repair rounds, then blacklist + re-plan) -> group_parallel -> write_messages -> code_check
-> judge (-> write_messages on a text rejection) -> rewrite (MissParam / MissFunc) -> persist."""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import random
import time
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from sap.agents.fsm_builder import FSMBuilder, RuleFSMBuilder
from sap.agents.judge import Judge, RuleJudge
from sap.agents.llm_fsm_builder import verified_fsm
from sap.agents.messenger import Messenger, RuleMessenger, task_phrase
from sap.agents.planner import HistoryCall, NarrativeRequest, PlanRequest, Planner, RulePlanner, StatedValue
from sap.agents.repair import PatchOp, Repairer, RuleRepairer, apply_patch, repair_call
from sap.agents.replanner import ReplanRequest, Replanner, RuleReplanner
from sap.executors.base import Executor, ReplayMismatch, end_state_hash, replay
from sap.export.records import to_record
from sap.fsm.walk import NoPathError, emphasis_set
from sap.fsm.walk import sample_path as walk
from sap.graphs.rewrite import RewriteRejected, miss_func_graph, miss_param_graph, rewrite
from sap.graphs.state import SynthState
from sap.model import FSM, ArgProvenance, Tag, ToolCall, Toolset, Trajectory, Turn
from sap.provenance.checks import code_check
from sap.provenance.groups import group_calls

_FSM_CACHE: dict[str, tuple[FSM, dict[str, Any] | None]] = {}  # key -> the FSM and its fallback note
# run_turn passes durability to its checkpointer-less turn graph on purpose (see there)
warnings.filterwarnings("ignore", message="`durability` has no effect when no checkpointer is present")


def toolset_hash(toolset: Toolset) -> str:
    """A hash of the toolset's name and tool docs: the FSM cache key."""
    docs = json.dumps([toolset.name, [t.model_dump(mode="json") for t in toolset.tools]], sort_keys=True)
    return hashlib.sha256(docs.encode()).hexdigest()[:16]


@dataclass
class SynthesisContext:
    """What the graph's nodes share: the toolset, the agents, limits, and live executors by slot."""

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
    min_turns: int = 3
    max_turns: int = 8
    max_attempts: int = 3
    max_replans: int = 2
    max_repairs: int = 3  # c0 repair rounds for a call at its attempt cap, before blacklist + replan; 0 turns it off
    emphasis_size: int = 3  # long-tail emphasis |E|; 0 turns it off
    min_keep_turns: int = 2
    run_seed: int = 0
    executors: dict[int, tuple[Executor, tuple[str, ...], dict[str, Any]]] = field(default_factory=dict)  # with its c0
    node_seconds: dict[str, float] | None = None  # when a dict, each node's cumulative wall time is added to it
    fsm_preset: FSM | None = None  # a verified FSM to use as is (a stored run's), instead of building one
    fsm_note: dict[str, Any] | None = None  # the preset FSM's fallback note (why the rule FSM stood in), if any
    configs: OrderedDict[int, dict[str, Any]] = field(default_factory=OrderedDict)  # c0 by seed (derived, not state)
    patched: OrderedDict[str, dict[str, Any]] = field(default_factory=OrderedDict)  # repaired c0 by seed and patch
    narrative: bool = False  # the planner writes a narrative before the first messages (global rewrite mode)
    agents_meta: dict[str, Any] = field(default_factory=dict)  # models and prompt hashes, copied into record meta
    _docs_hash: tuple[Toolset, str] | None = field(default=None, init=False, repr=False)

    def fsm(self) -> tuple[str, FSM]:
        """The toolset's V_spec-verified FSM, built once per process, tool-doc hash, builder and path lengths."""
        key = f"{self._toolset_hash()}:{self.fsm_builder.cache_key()}:{self.min_turns}-{self.max_turns}"
        if self.fsm_preset is not None:
            return key, self.fsm_preset
        if key not in _FSM_CACHE:
            _FSM_CACHE[key] = verified_fsm(self.fsm_builder, self.toolset, (self.min_turns, self.max_turns))
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

    def executor_for(self, index: int, c0: dict[str, Any], committed: list[ToolCall]) -> Executor:
        """The slot's executor in the state after `committed` on `c0`; rebuilt by replay when absent or out of step."""
        ids = tuple(c.call_id for c in committed)
        cached = self.executors.get(index)
        if cached is not None and cached[1] == ids and cached[2] is c0:
            return cached[0]
        ex = cached[0] if cached is not None else self.toolset.executor_factory()
        replay(ex, c0, committed)
        self.executors[index] = (ex, ids, c0)
        return ex

    def release(self, index: int) -> None:
        """Forget the slot's executor and stop its worker."""
        cached = self.executors.pop(index, None)
        if cached is not None and hasattr(cached[0], "close"):
            cached[0].close()


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


def replay_problems(toolset: Toolset, traj: Trajectory) -> tuple[list[str], str | None]:
    """Replay the committed calls from c0 on a fresh executor: a problem for any differing result, else none and
    the hash of the end state reached (recorded in the record's meta, checked again by `sap validate`)."""
    ex = toolset.executor_factory()
    try:
        replay(ex, traj.c0, _committed(traj.turns))
        return [], end_state_hash(ex)
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
    """The trajectory the state describes."""
    traj = Trajectory(id=f"{state['seed']:016x}-{state['index']}", toolset=ctx.toolset.name, seed=state["seed"],
                      c0={}, turns=_turns(state), virtual_history=state.get("virtual_history", []))
    traj.c0 = ctx.c0(state)  # the cached object itself (validation would copy it), so the field indexes
    return traj              # built on it are reused


def _timed(name: str, fn: Callable[[SynthState], Any], sink: dict[str, float]) -> Callable[[SynthState], Any]:
    """`fn` with its wall time added to sink[name] on every call."""
    @functools.wraps(fn)
    def run(state: SynthState) -> Any:
        start = time.perf_counter()
        try:
            return fn(state)
        finally:
            sink[name] = sink.get(name, 0.0) + time.perf_counter() - start
    return run


def synthesis_graph(ctx: SynthesisContext, checkpointer: Any = None):
    """Compile the synthesis graph over `ctx`; invoke it with {"index": i, "seed": s}, one thread per trajectory."""
    specs = {t.name: t for t in ctx.toolset.tools}
    clarifier = getattr(ctx.messenger, "clarify", None)  # the LLM messenger's; the rule wording otherwise
    rewriters = {"miss_param": miss_param_graph(ctx.toolset, clarifier),
                 "miss_func": miss_func_graph(ctx.toolset, clarifier)}

    def load_fsm(state: SynthState) -> dict[str, Any]:
        key, _ = ctx.fsm()
        return {"fsm_hash": key, "status": "running"}

    def sample_path(state: SynthState) -> dict[str, Any]:
        _, fsm = ctx.fsm()
        rng = random.Random(f"{state['seed']}:path")
        emphasis = emphasis_set(fsm, state.get("tool_histogram", {}), rng, ctx.emphasis_size)
        try:
            path = walk(fsm, rng, ctx.min_turns, ctx.max_turns, emphasis=emphasis)
        except NoPathError:  # the emphasis weights can trap every try away from a final state: walk plainly
            emphasis = set()
            path = walk(fsm, rng, ctx.min_turns, ctx.max_turns)
        return {"emphasis": sorted(emphasis), "path": path,
                "turns": [], "turn_pos": 0, "call_pos": 0, "attempts": 0, "exec_error": None,
                "failed_args": [], "attempt_log": [], "blacklist": [], "pending": None, "pending_virtual": [],
                "virtual_history": [], "c0_patch": [], "repair_log": []}

    def plan_call(state: SynthState) -> dict[str, Any]:
        _, fsm = ctx.fsm()
        turn_pos, call_pos, attempts = state["turn_pos"], state["call_pos"], state["attempts"]
        transition = fsm.transitions[state["path"][turn_pos]]
        tool = transition.action[call_pos]
        turns = _turns(state)
        history = [HistoryCall(t.index, i, c) for t in turns for i, c in enumerate(t.calls)]
        stated = [s for t in turns for c in t.calls for name, p in c.args_prov.items()
                  if (s := stated_value(t.index, name, c.args_exec[name], p)) is not None]
        tags = transition.provenance_tag.get(tool, {}) if ctx.use_tags else {}
        req = PlanRequest(spec=specs[tool], tags=tags, turn=turn_pos,
                          index=call_pos, history=history, stated=stated, c0=ctx.c0(state),
                          rng=random.Random(f"{state['seed']}:plan:{turn_pos}:{call_pos}:{attempts}"),
                          last_error=state.get("exec_error"), failed_args=state.get("failed_args", []),
                          upcoming=[specs[t] for t in transition.action[call_pos + 1:]],
                          virtual=[StatedValue(v["turn"], v["param"], v["value"]) for v in state.get("virtual_history", [])])
        binding = ctx.planner.bind(req)
        call = ToolCall(call_id=f"call_{turn_pos}_{call_pos}", name=tool, args_exec=binding.args_exec,
                        args_prov=binding.args_prov, attempts=attempts + 1)
        return {"pending": call.model_dump(mode="json"),
                "pending_virtual": [{"turn": v.turn, "param": v.param, "value": v.value, "used_at": turn_pos}
                                    for v in binding.virtual]}

    def commit(state: SynthState, turns: list[Turn], call: ToolCall, value: Any, ex: Executor,
               c0: dict[str, Any], update: dict[str, Any]) -> Command[Literal["plan_call", "__end__"]]:
        """Commit a successful call (with `update` merged in) and go on to the turn's next call or end the turn."""
        _, fsm = ctx.fsm()
        turn_pos, call_pos = state["turn_pos"], state["call_pos"]
        transition = fsm.transitions[state["path"][turn_pos]]
        done = call.model_copy(update={"result": value, "ok": True, "error": None}).model_dump(mode="json")
        # append without re-dumping earlier turns, so their result objects (and field indexes) are reused
        new_turns = list(state["turns"])
        if call_pos == 0:
            new_turns.append(Turn(index=turn_pos, state=transition.target,
                                  transition=state["path"][turn_pos]).model_dump(mode="json"))
        new_turns[-1] = {**new_turns[-1], "calls": new_turns[-1]["calls"] + [done]}
        ctx.executors[state["index"]] = (ex, tuple(c.call_id for c in _committed(turns)) + (call.call_id,), c0)
        next_call = call_pos + 1 < len(transition.action)
        turn_pos, call_pos = (turn_pos, call_pos + 1) if next_call else (turn_pos + 1, 0)
        return Command(goto="plan_call" if next_call else END, update={
            **update, "turns": new_turns, "turn_pos": turn_pos, "call_pos": call_pos,
            "attempts": 0, "exec_error": None, "failed_args": [], "pending": None, "pending_virtual": [],
            "virtual_history": state.get("virtual_history", []) + state.get("pending_virtual", [])})

    def execute_call(state: SynthState) -> Command[Literal["plan_call", "__end__"]]:
        _, fsm = ctx.fsm()
        turns = _turns(state)
        call = ToolCall.model_validate(state["pending"])
        c0 = ctx.c0(state)
        ex = ctx.executor_for(state["index"], c0, _committed(turns))
        res = ex.execute(call)
        turn_pos, call_pos = state["turn_pos"], state["call_pos"]
        if res.ok:
            return commit(state, turns, call, res.value, ex, c0, {})
        attempts = state["attempts"] + 1
        log = state.get("attempt_log", []) + [{"turn": turn_pos, "call": call_pos, "tool": call.name,
                                               "attempt": attempts, "error": res.error}]
        if attempts < ctx.max_attempts:
            return Command(goto="plan_call", update={
                "attempts": attempts, "exec_error": res.error, "attempt_log": log, "pending": None,
                "failed_args": state.get("failed_args", []) + [call.args_exec]})
        patch = state.get("c0_patch", [])
        repair_log = state.get("repair_log", [])
        if ctx.max_repairs > 0:
            repaired, rounds = repair_call(ctx.repairer, ctx.toolset, lambda p: ctx.config(state["seed"], p), patch,
                                           call, res.error or "", _committed(turns), ctx.max_repairs)
            repair_log = repair_log + [{"turn": turn_pos, "call": call_pos, "tool": call.name, **r} for r in rounds]
            if repaired is not None:
                if hasattr(ex, "close"):  # the repaired executor, on the patched c0, replaces the slot's
                    ex.close()
                added = [{**op, "turn": turn_pos} for op in repaired.patch[len(patch):]]
                return commit(state, turns, call, repaired.result.value, repaired.executor, repaired.c0,
                              {"attempt_log": log, "repair_log": repair_log, "c0_patch": patch + added})
        kept = [t for t in turns if t.index < turn_pos]
        update = {"turns": [t for t in state["turns"] if t["index"] < turn_pos], "pending_virtual": [],
                  "virtual_history": [v for v in state.get("virtual_history", []) if v["used_at"] < turn_pos],
                  "attempt_log": log, "pending": None, "exec_error": res.error, "repair_log": repair_log,
                  "c0_patch": [op for op in patch if op["turn"] < turn_pos]}  # patches made for dropped turns go
        blacklist = state.get("blacklist", []) + [call.name]
        if len(blacklist) <= ctx.max_replans:
            new_path = ctx.replanner.replan(ReplanRequest(
                fsm, state["path"], kept, frozenset(blacklist), ctx.min_turns, ctx.max_turns,
                random.Random(f"{state['seed']}:replan:{len(blacklist)}")))
            if new_path is not None:
                return Command(goto=END, update={
                    **update, "path": new_path, "blacklist": blacklist, "call_pos": 0, "attempts": 0,
                    "exec_error": None, "failed_args": []})
        if len(kept) >= ctx.min_keep_turns:
            return Command(goto=END, update={**update, "status": "truncated"})
        reason = f"{call.name} failed {attempts} times at turn {turn_pos}"
        return Command(goto=END, update={**update, "status": "dropped", "drop_reason": reason})

    def after_turn(state: SynthState) -> Literal["run_turn", "group_parallel", "persist"]:
        if state["status"] == "dropped":
            return "persist"
        if state["status"] == "truncated" or state["turn_pos"] >= len(state["path"]):
            return "group_parallel"
        return "run_turn"

    def group_parallel(state: SynthState) -> dict[str, Any]:
        return {"turns": [group_calls(t).model_dump(mode="json") for t in _turns(state)]}

    def write_messages(state: SynthState) -> dict[str, Any]:
        rounds = state.get("message_rounds", 0)
        rng = random.Random(f"{state['seed']}:messages" + (f":{rounds}" if rounds else ""))
        turns = _turns(state)
        narrative = state.get("narrative")
        if ctx.narrative and narrative is None:
            narrative = ctx.planner.narrate(NarrativeRequest(
                ctx.toolset.name, ctx.c0(state),
                [[task_phrase(specs[c.name]) for c in t.calls] for t in turns]))
        turns = ctx.messenger.write(turns, specs, rng, state.get("virtual_history", []), narrative=narrative)
        return {"turns": [t.model_dump(mode="json") for t in turns], "message_rounds": rounds + 1,
                "narrative": narrative}

    def check(state: SynthState) -> Command[Literal["judge", "persist"]]:
        traj = trajectory_from_state(state, ctx)
        problems = code_check(traj)
        if len(traj.turns) < ctx.min_keep_turns:
            problems.append(f"only {len(traj.turns)} turns, fewer than {ctx.min_keep_turns}")
        end_hash = None
        if not problems and ctx.replay_check:
            problems, end_hash = replay_problems(ctx.toolset, traj)
        if problems:
            return Command(goto="persist", update={"status": "dropped", "drop_reason": f"code check: {problems[0]}"})
        return Command(goto="judge", update={"end_state_hash": end_hash})

    def judge(state: SynthState) -> Command[Literal["write_messages", "rewrite", "persist"]]:
        verdict = ctx.judge.judge(trajectory_from_state(state, ctx), specs)
        update: dict[str, Any] = {"verdict": verdict.model_dump(mode="json")}
        step, reason = verdict.next_step(state.get("message_rounds", 1), ctx.max_rewrites)
        if step == "accept":
            status = "truncated" if state["status"] == "truncated" else "accepted"
            return Command(goto="rewrite", update={**update, "status": status})
        if step == "rewrite":
            return Command(goto="write_messages", update=update)
        return Command(goto="persist", update={**update, "status": "dropped", "drop_reason": reason})

    def rewrite_variant(state: SynthState) -> dict[str, Any]:
        kind = state.get("kind", "base")
        if kind == "base":
            return {}
        base = trajectory_from_state(state, ctx)
        out = rewrite(kind, base, ctx.toolset, state["seed"], graph=rewriters[kind])
        if isinstance(out, RewriteRejected):
            return {"rewrite_rejection": out.reason}
        verdict = ctx.judge.judge(out, specs)
        if not verdict.accepted:
            return {"rewrite_rejection": f"judge {verdict.decision}: {verdict.reasons[0].detail}"}
        return {"variant": out.model_dump(mode="json")}

    def persist(state: SynthState) -> dict[str, Any]:
        ctx.release(state["index"])
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
                **({"end_state_hash": state["end_state_hash"]} if state.get("end_state_hash") else {}),
                **({"c0_patch": [{"path": op["path"], "value": op["value"]} for op in state["c0_patch"]]}
                   if state.get("c0_patch") else {}),
                **({"fsm_fallback": fallback} if (fallback := ctx.fsm_fallback()) else {}),
                **({"agents": ctx.agents_meta} if ctx.agents_meta else {})}
        return {"record": to_record(traj, ctx.toolset, meta)}

    def timed(name: str, fn: Callable[[SynthState], Any]) -> Callable[[SynthState], Any]:
        return _timed(name, fn, ctx.node_seconds) if ctx.node_seconds is not None else fn

    # one turn's calls with their retry edges; never checkpointed inside (checkpointer=False), so the parent
    # graph checkpoints once per turn and a crash mid-turn re-runs that turn from its start
    turn_builder = StateGraph(SynthState)
    turn_builder.add_node("plan_call", timed("plan_call", plan_call))
    turn_builder.add_node("execute_call", timed("execute_call", execute_call))
    turn_builder.add_edge(START, "plan_call")
    turn_builder.add_edge("plan_call", "execute_call")
    turn_graph = turn_builder.compile(checkpointer=False)

    def run_turn(state: SynthState) -> dict[str, Any]:
        # durability given explicitly: inheriting the parent's "sync" makes LangGraph 1.2 wait on a checkpoint
        # that a checkpointer=False graph never writes (AttributeError _put_checkpoint_fut)
        return turn_graph.invoke(state, durability="exit")

    builder = StateGraph(SynthState)
    nodes = {"load_fsm": load_fsm, "sample_path": sample_path, "run_turn": run_turn,
             "group_parallel": group_parallel, "write_messages": write_messages, "code_check": check,
             "judge": judge, "rewrite": rewrite_variant, "persist": persist}
    for name, fn in nodes.items():
        builder.add_node(name, fn if name == "run_turn" else timed(name, fn))
    builder.add_edge(START, "load_fsm")
    builder.add_edge("load_fsm", "sample_path")
    builder.add_edge("sample_path", "run_turn")
    builder.add_conditional_edges("run_turn", after_turn)
    builder.add_edge("group_parallel", "write_messages")
    builder.add_edge("write_messages", "code_check")
    builder.add_edge("rewrite", "persist")
    builder.add_edge("persist", END)
    return builder.compile(checkpointer=checkpointer)
