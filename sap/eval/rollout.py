"""One rollout: a model as the assistant of a task's dialogue, its tool calls run on the task's executor."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sap.eval.tasks import EvalTask, EvalTurn
from sap.llm import LLMClient, LLMRoleError, ModelConfig
from sap.model import ExecResult, Executor, ToolCall
from sap.rewards.calls import GoldCall, PredCall

ROLE = "assistant"  # the ledger's name for the evaluated model


@dataclass(frozen=True)
class TurnRollout:
    """What the model did in one turn, and whether the executor ended in the ground truth's state."""

    calls: list[PredCall]
    state_correct: bool
    answered: bool  # the model ended the turn with a text answer (False: step cap, or the model failed)
    steps: int  # model requests in the turn


@dataclass
class Rollout:
    """One sample of a task: per-turn outcomes, the full conversation, and the model failure that ended it."""

    task_id: str
    sample: int
    turns: list[TurnRollout] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


def parse_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """A tool call's arguments as a dict, or ({}, the problem)."""
    if isinstance(raw, dict):
        return raw, None
    try:
        args = json.loads(raw) if raw and str(raw).strip() else {}
    except (json.JSONDecodeError, TypeError):
        return {}, f"arguments are not valid JSON: {str(raw)[:200]}"
    return (args, None) if isinstance(args, dict) else ({}, "arguments are not a JSON object")


def run_gold(executor: Executor, gold: GoldCall) -> ExecResult:
    """Run one ground-truth call on `executor`."""
    return executor.execute(ToolCall(call_id="gold", name=gold.name, args_exec=dict(gold.args), args_prov={}))


def replay_gold(task: EvalTask) -> list[ExecResult]:
    """Every ground-truth call of `task`, turn by turn, run on one fresh executor reset to the task's c0."""
    executor = task.executor_factory()
    try:
        executor.reset(task.c0)
        return [run_gold(executor, g) for turn in task.turns for g in turn.gold]
    finally:
        if hasattr(executor, "close"):
            executor.close()


def tool_message(call_id: str, name: str, result: ExecResult) -> dict[str, Any]:
    """The OpenAI tool message answering call `call_id`: the result's value, or {"error": ...} when it has none."""
    body = result.value if result.ok or result.value is not None else {"error": result.error}
    return {"role": "tool", "tool_call_id": call_id, "name": name,
            "content": json.dumps(body, ensure_ascii=False, default=str)}


def run_tool_call(executor: Executor, offered: set[str] | frozenset[str], call_id: str, name: str,
                  raw_args: Any) -> tuple[PredCall, dict[str, Any]]:
    """Run one of the model's tool calls on `executor`, unless its tool is not in `offered` or its arguments are not
    a JSON object (then it fails with that problem, unrun): the call as the rewards read it, and its tool message."""
    args, problem = parse_arguments(raw_args)
    if problem is None and name not in offered:
        problem = f"unknown tool {name!r}"
    result = ExecResult(ok=False, error=problem) if problem else executor.execute(
        ToolCall(call_id=call_id, name=name, args_exec=args, args_prov={}))
    return PredCall(name, args, result.ok, result.error), tool_message(call_id, name, result)


def gold_turn_matches(executor: Executor, gold_executor: Executor, turn: EvalTurn) -> bool:
    """Run `turn`'s ground-truth calls on `gold_executor`; whether `executor` is now in the same state."""
    for g in turn.gold:
        run_gold(gold_executor, g)
    return compared(executor) == compared(gold_executor)


def compared(executor: Executor) -> dict[str, Any]:
    """The state a benchmark compares: BFCL's public attributes only (a model may end in another folder), else the
    executor's whole state."""
    own = getattr(executor, "compared_state", None)
    return own() if callable(own) else executor.state()


def _model_turn(task: EvalTask, t: int, executor: Executor, client: LLMClient, cfg: ModelConfig,
                messages: list[dict[str, Any]], calls: list[PredCall], max_steps: int) -> tuple[bool, int]:
    """Let the model work on turn t until it answers with text or hits the step cap: (answered, requests
    made). `messages` grows with the model's messages and the tool results, `calls` with its calls."""
    offered = task.tools_at(t)
    names = {tool["function"]["name"] for tool in offered}
    for step in range(1, max_steps + 1):
        reply = client.chat(ROLE, cfg, messages, offered)
        messages.append(reply)
        if not reply.get("tool_calls"):
            return True, step
        for tc in reply["tool_calls"]:
            call, message = run_tool_call(executor, names, tc["id"], tc["function"]["name"],
                                          tc["function"].get("arguments"))
            calls.append(call)
            messages.append(message)
    return False, max_steps


def run_rollout(task: EvalTask, client: LLMClient, cfg: ModelConfig, sample: int = 0,
                max_steps: int = 8) -> Rollout:
    """Run the model through every turn of `task`.

    Per turn: the user message is added and the turn's tools offered; each tool call the model makes is run
    on the executor (reset to the task's c0) and its result fed back, until the model answers with text or
    has made `max_steps` requests in the turn. A call to a tool not offered, or with arguments that are not a
    JSON object, is answered with an error and not run. After the turn, the ground truth's calls of the turn
    are run on a second executor, and the states are compared. A model failure (LLMRoleError other than a
    configuration error) ends the rollout: it is recorded in `error`; the calls of its turn are kept, and the
    turns not reached count as turns with no calls and a wrong state."""
    rollout = Rollout(task.id, sample, messages=[{"role": "system", "content": task.system}])
    executor, gold_executor = task.executor_factory(), task.executor_factory()
    try:
        executor.reset(task.c0)
        gold_executor.reset(task.c0)
        for t, turn in enumerate(task.turns):
            rollout.messages.append({"role": "user", "content": turn.user})
            before = len(rollout.messages)
            calls: list[PredCall] = []
            try:
                answered, steps = _model_turn(task, t, executor, client, cfg, rollout.messages, calls, max_steps)
            except LLMRoleError as exc:
                if exc.kind == "config":
                    raise
                rollout.error = str(exc)
                answered, steps = False, 1 + sum(m["role"] == "assistant" for m in rollout.messages[before:])
            rollout.turns.append(TurnRollout(calls, gold_turn_matches(executor, gold_executor, turn), answered, steps))
            if rollout.error:
                rollout.turns += [TurnRollout([], False, False, 0) for _ in task.turns[t + 1:]]
                break
    finally:
        for ex in (executor, gold_executor):
            if hasattr(ex, "close"):
                ex.close()
    return rollout
