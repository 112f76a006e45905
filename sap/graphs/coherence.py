"""Coherent calls: a write that changes nothing, or a call that repeats an earlier one with nothing changed
since (or a read that observes no change), is refused like a failed attempt, so the planner picks other values."""
from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sap.agents.planner import NO_OP
from sap.executors.base import check_replayed, end_state_hash
from sap.fsm.build import named_update
from sap.model import ExecResult, Executor, ToolCall, ToolSpec

INCOHERENT = "incoherent call: "  # the prefix of a refusal's error text (repair cannot fix it; re-plan instead)


def _identical(a: ToolCall, b: ToolCall) -> bool:
    """Same tool, same arguments."""
    return a.name == b.name and a.args_exec == b.args_exec


def is_write(spec: ToolSpec, writes: Collection[str] = ()) -> bool:
    """Whether a call of `spec` must change the state: one of the FSM's action tools (`writes`), or a declared or
    named update."""
    return spec.name in writes or named_update(spec)


def execute_coherently(ex: Executor, spec: ToolSpec, call: ToolCall, committed: Sequence[ToolCall],
                       changed: Collection[str], writes: Collection[str] = (),
                       relative: bool = False) -> tuple[ExecResult, bool]:
    """Run `call` on `ex` unless it is incoherent: (the result, or a refusal; whether the state changed).

    `committed` are the trajectory's calls so far, `changed` the ids of those that changed the state and `writes`
    the FSM's action tools. A call identical to an earlier one with no state change since is refused before it
    runs; a write (`is_write`) whose state hash is the same before and after is a no-op; a repeated call that
    changed nothing and returns the earlier result observes nothing new. A refused call left the state as it was
    (it changed nothing). A `relative` move (`cd ..`) is never a repeat: each one goes a folder further."""
    prior = None if relative else next((c for c in reversed(committed) if _identical(c, call)), None)
    if prior is not None:
        after = [c.call_id for c in committed[[c.call_id for c in committed].index(prior.call_id) + 1:]]
        if not any(cid in changed for cid in after):
            return ExecResult(False, error=f"{INCOHERENT}it repeats call {prior.call_id} ({call.name}) with the same "
                                           f"arguments and nothing changed since"), False
    hashed = spec.read_only is not True  # a declared read changes nothing: no hashing (tau2's hash costs ~50 ms)
    before = end_state_hash(ex) if hashed else None
    res = ex.execute(call)
    state_changed = hashed and res.ok and end_state_hash(ex) != before
    if res.ok and not state_changed and is_write(spec, writes):
        return ExecResult(False, error=f"{INCOHERENT}{call.name} {NO_OP}: its arguments equal the current state"), False
    if res.ok and prior is not None and not state_changed and res.value == prior.result:
        return ExecResult(False, error=f"{INCOHERENT}it repeats call {prior.call_id} ({call.name}) and observes no "
                                       f"change"), False
    return res, state_changed


def noop_writes(ex: Executor, c0: dict[str, Any], calls: Sequence[ToolCall], specs: Mapping[str, ToolSpec],
                writes: Collection[str], check: bool = True) -> list[str]:
    """Replay `calls` from c0 on `ex`, with `check` each result checked against the recorded one (ReplayMismatch):
    one problem per successful write (`is_write`) that left the state hash as it was (the code check's view of a
    no-op write)."""
    ex.reset(c0)
    problems = []
    for call in calls:
        write = call.name in specs and is_write(specs[call.name], writes)
        before = end_state_hash(ex) if write else None
        res = ex.execute(call)
        if check:
            check_replayed(call, res, ex)
        if write and res.ok and end_state_hash(ex) == before:
            problems.append(f"no-op write: call {call.call_id} ({call.name}) left the state as it was")
    return problems
