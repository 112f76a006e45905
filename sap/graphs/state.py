"""The synthesis graph's state: plain JSON so that checkpoints serialize and stay small."""
from __future__ import annotations

from typing import Any, TypedDict


class SynthState(TypedDict, total=False):
    """One trajectory's progress through the synthesis graph (last-value channels only)."""

    index: int  # slot index in the run
    kind: str  # input: base, miss_param or miss_func (the rewrite this slot should produce)
    variant: dict[str, Any] | None  # the kept rewrite variant (Trajectory dump)
    rewrite_rejection: str | None  # why the requested rewrite was not kept (the base is exported instead)
    seed: int  # trajectory seed, derived from (run seed, index); c0 is derived from it (plus c0_patch)
    fsm_hash: str
    tool_histogram: dict[str, int]  # input: tool calls in the run's accepted records so far (H)
    emphasis: list[str]  # the long-tail set E this trajectory must call one of
    path: list[int]  # FSM transition indices, one per planned turn
    actions: list[list[str]] | None  # under a toolset policy: each planned turn's tools (else its transition's)
    turns: list[dict[str, Any]]  # Turn dumps; the last one may be in progress
    turn_pos: int
    call_pos: int
    pending: dict[str, Any] | None  # the planned ToolCall awaiting execution
    pending_virtual: list[dict[str, Any]]  # virtual-history entries the pending call needs
    virtual_history: list[dict[str, Any]]  # committed P_u registrations: turn (anchor), param, value, used_at
    attempts: int  # attempts spent on the pending call
    planned_calls: list[str]  # the current turn's calls the planner has decided ahead (Planner.ahead): "turn:key"
    turn_answers: dict[str, dict[str, Any]]  # what it decided: per "turn:key" (plan_key), open arguments' values
    exec_error: str | None  # the executor's error on the previous attempt
    failed_args: list[dict[str, Any]]  # argument sets that failed for the pending call
    attempt_log: list[dict[str, Any]]  # every failed attempt: turn, call, tool, error
    blacklist: list[str]  # tools that failed at the attempt cap; re-planned paths avoid them
    c0_patch: list[dict[str, Any]]  # repairs of c0 (path, value, turn), applied wherever c0 is used
    repair_log: list[dict[str, Any]]  # every repair round: turn, call, tool, round, patch, outcome
    changed_calls: list[str]  # ids of the committed calls that changed the executor's state
    narrative: str | None  # the planner's background story (global rewrite mode only)
    message_rounds: int  # how many times write_messages has run (the first write, then rewrites)
    verdict: dict[str, Any] | None  # the judge's last Verdict
    status: str  # running / truncated / accepted / dropped
    drop_reason: str | None
    drop_kind: str | None  # the DropReason value beside drop_reason's details
    record: dict[str, Any] | None  # the exported record once accepted
    end_state_hash: str | None  # hash of the executor state after replaying the calls from c0 (the code check's)
