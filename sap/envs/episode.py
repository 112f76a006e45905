"""One episode of a task as an RL environment: reset to the task's c0 on a fresh executor, the policy's tool calls run
on it, each later user turn fed when the policy ends its turn, and the episode scored at the end."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sap.eval.rollout import Rollout, TurnRollout, gold_turn_matches, run_tool_call
from sap.eval.score import RolloutScore, score_rollout
from sap.eval.tasks import EvalTask
from sap.model import Executor
from sap.rewards.calls import PredCall


def rewards_row(score: RolloutScore) -> dict[str, Any]:
    """The rewards of a scored episode as plain numbers: progress, the graduated reward and its two parts, and the
    turn and call counts (the one place that reads sap.rewards' result types)."""
    return {"task_id": score.task_id, "progress": score.progress, "graduated": score.reward.score,
            "r_atomic": score.reward.atomic.score, "r_orch": score.reward.orch.score, "turns": score.turns,
            "turns_correct": score.turns_correct, "gold_calls": score.gold_calls,
            "gold_calls_matched": score.gold_calls_matched}


def gold_message(task: EvalTask, turn: int) -> dict[str, Any]:
    """The assistant message making every ground-truth call of `turn` (the reference policy: with a text message
    after each turn it plays the task to reward 1.0)."""
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": f"gold_{turn}_{i}", "type": "function", "function": {"name": g.name, "arguments": json.dumps(g.args)}}
        for i, g in enumerate(task.turns[turn].gold)]}


@dataclass(frozen=True)
class Step:
    """What one step hands back: the new messages (tool results, then the next user message when a turn began),
    whether the episode is over, and its rewards once it is."""

    messages: list[dict[str, Any]]
    done: bool
    reward: dict[str, Any] | None = None


def _field(value: Any, kind: type, where: str) -> Any:
    if not isinstance(value, kind):
        raise ValueError(f"{where}: expected {kind.__name__}, got {type(value).__name__} {str(value)[:80]!r}")
    return value


class ToolEnv:
    """A task as an environment: `reset()`, then `step(assistant message)` (or `call` and `end_turn` one by one) until
    done; `reward` holds the episode's rewards_row when it is over.

    A turn ends when the policy answers without tool calls, or after `max_steps` assistant messages in it (the turn
    is cut, as in `sap eval`). Calls to a tool not offered at the turn, or with arguments that are not a JSON
    object, fail with an error message and are not run. Scoring is `sap eval`'s: each turn's state is compared with
    the ground truth's on a second executor, and `finish()` counts turns never reached as turns with no calls."""

    def __init__(self, task: EvalTask, max_steps: int = 8, w_atomic: float = 0.5, w_orch: float = 0.5) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        self.task, self.max_steps, self.weights = task, max_steps, (w_atomic, w_orch)
        self.executor: Executor | None = None
        self.gold_executor: Executor | None = None
        self.messages: list[dict[str, Any]] = []
        self.turns: list[TurnRollout] = []
        self.calls: list[PredCall] = []
        self.steps = 0
        self.score: RolloutScore | None = None

    @property
    def turn(self) -> int:
        """The index of the current user turn."""
        return len(self.turns)

    @property
    def done(self) -> bool:
        """Whether the episode is over (scored)."""
        return self.score is not None

    @property
    def reward(self) -> dict[str, Any] | None:
        """The episode's rewards_row once it is over, else None."""
        return rewards_row(self.score) if self.score else None

    def tools(self) -> list[dict[str, Any]]:
        """The OpenAI tools offered at the current turn (none once the episode is over)."""
        return [] if self.done else self.task.tools_at(self.turn)

    def reset(self) -> list[dict[str, Any]]:
        """Start the episode on fresh executors reset to the task's c0: the system message and the first user turn."""
        self.close()
        self.executor, self.gold_executor = self.task.executor_factory(), self.task.executor_factory()
        self.executor.reset(self.task.c0)
        self.gold_executor.reset(self.task.c0)
        self.turns, self.calls, self.steps, self.score = [], [], 0, None
        self.messages = [{"role": "system", "content": self.task.system}]
        if not self.task.turns:
            self._score()
            return list(self.messages)
        self.messages.append({"role": "user", "content": self.task.turns[0].user})
        return list(self.messages)

    def _live(self) -> Executor:
        if self.done:
            raise ValueError(f"task {self.task.id}: the episode is over; reset it to play again")
        if self.executor is None:
            raise ValueError(f"task {self.task.id}: reset the environment before stepping it")
        return self.executor

    def call(self, name: str, arguments: Any, call_id: str | None = None) -> dict[str, Any]:
        """Run one tool call of the policy in the current turn: its tool message (also added to `messages`)."""
        executor = self._live()
        call_id = call_id or f"call_{self.turn}_{len(self.calls)}"
        offered = frozenset(t["function"]["name"] for t in self.task.tools_at(self.turn))
        pred, message = run_tool_call(executor, offered, call_id, name, arguments)
        self.calls.append(pred)
        self.messages.append(message)
        return message

    def end_turn(self, answered: bool = True) -> dict[str, Any] | None:
        """End the current turn: score its state, then the next user message (also added to `messages`), or None
        when that was the last turn and the episode is now scored."""
        executor = self._live()
        assert self.gold_executor is not None
        turn = self.task.turns[self.turn]
        self.turns.append(TurnRollout(self.calls, gold_turn_matches(executor, self.gold_executor, turn), answered,
                                      self.steps))
        self.calls, self.steps = [], 0
        if self.turn == len(self.task.turns):
            self._score()
            return None
        message = {"role": "user", "content": self.task.turns[self.turn].user}
        self.messages.append(message)
        return message

    def step(self, message: dict[str, Any]) -> Step:
        """Take one assistant message (OpenAI format): run its tool calls, or end the turn when it has none."""
        self._live()
        _field(message, dict, "message")
        tool_calls = _field(message.get("tool_calls") or [], list, "message.tool_calls")
        parsed = []
        for i, tc in enumerate(tool_calls):
            where = f"message.tool_calls[{i}]"
            function = _field(_field(tc, dict, where).get("function"), dict, f"{where}.function")
            name = _field(function.get("name"), str, f"{where}.function.name")
            call_id = _field(tc.get("id") or f"call_{self.turn}_{len(self.calls) + i}", str, f"{where}.id")
            parsed.append((name, function.get("arguments"), call_id))
        self.messages.append({"role": "assistant", "content": message.get("content") or "",
                              **({"tool_calls": tool_calls} if tool_calls else {})})
        self.steps += 1
        out = [self.call(name, arguments, call_id) for name, arguments, call_id in parsed]
        if not parsed or self.steps >= self.max_steps:
            user = self.end_turn(answered=not parsed)
            out += [user] if user else []
        return Step(out, self.done, self.reward)

    def finish(self) -> dict[str, Any]:
        """End the episode where it stands (the current turn ends answered; turns not reached count as turns with no
        calls and a wrong state) and return its rewards_row."""
        if not self.done:
            self._live()
            self.end_turn(answered=True)
            if not self.done:
                self.messages.pop()  # the next user message was never seen by the policy
                self.turns += [TurnRollout([], False, False, 0) for _ in self.task.turns[self.turn:]]
                self._score()
        assert self.score is not None
        return rewards_row(self.score)

    def _score(self) -> None:
        rollout = Rollout(self.task.id, 0, turns=self.turns, messages=self.messages)
        self.score = score_rollout(self.task, rollout, *self.weights)
        self.close()

    def close(self) -> None:
        """Release the executors (the rewards stay readable)."""
        for executor in (self.executor, self.gold_executor):
            if executor is not None and hasattr(executor, "close"):
                executor.close()
        self.executor = self.gold_executor = None
