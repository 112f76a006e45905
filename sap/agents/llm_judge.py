"""LLM judge: the code-checkable findings of the rule judge first (a rejection there costs no LLM call), then the
model's reading of the five criteria, each finding diagnosed as a text or a ground-truth problem."""
from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, Field

from sap.agents.judge import Criterion, Finding, RuleJudge, Verdict
from sap.agents.llm_common import MIN_FIT_CHARS, RESULT_CHARS, STATE_CHARS, Fit, LLMRole, call_line, fit
from sap.llm.schema import closed, nullable
from sap.model import ToolSpec, Trajectory


class JudgeFinding(BaseModel):
    """One problem the model reports."""

    criterion: Criterion
    turn: int | None = None
    detail: str = Field(min_length=1)
    kind: Literal["text", "truth"]


class JudgeAnswer(BaseModel):
    """The model's findings; none means accept."""

    findings: list[JudgeFinding] = Field(default_factory=list)


def conversation_text(traj: Trajectory, result_chars: int = RESULT_CHARS) -> str:
    """The dialogue as the judge reads it: per turn the user message, the calls with results summarised to
    `result_chars` (a goal turn's prerequisites marked), the reply."""
    lines = []
    for t in traj.turns:
        lines.append(f"turn {t.index} user: {t.user_message}")
        lines += [f"  {call_line(t.index, i, c, result_chars)}" + (" [prerequisite: the assistant's own step]"
                                                     if i in t.prerequisites else "") for i, c in enumerate(t.calls)]
        lines.append(f"turn {t.index} assistant: {t.assistant_message}")
    return "\n".join(lines)


def conversation_fit(traj: Trajectory) -> Fit:
    """The dialogue as a Fit: the messages whole, each call's result summarised to a share of the size asked."""
    calls = max(1, sum(len(t.calls) for t in traj.turns))
    return Fit(lambda n: conversation_text(traj, max(MIN_FIT_CHARS, n // calls)), RESULT_CHARS * calls)


def judge_schema(turns: int) -> dict[str, Any]:
    """The exact answer schema for judging a conversation of `turns` turns: findings naming a criterion, a turn
    of the conversation (or null), a detail and a kind."""
    return closed({"findings": {"type": "array", "items": closed({
        "criterion": {"enum": list(get_args(Criterion))},
        "turn": nullable({"type": "integer", "minimum": 0, "maximum": max(turns - 1, 0)}),
        "detail": {"type": "string", "minLength": 1},
        "kind": {"enum": ["text", "truth"]}})}})


class LLMJudge:
    """Rule findings, then the model's; the verdict follows Verdict.from_findings."""

    def __init__(self, llm: LLMRole, rule: RuleJudge | None = None) -> None:
        self.llm, self.rule = llm, rule or RuleJudge()

    def judge_calls(self, traj: Trajectory, specs: dict[str, ToolSpec]) -> Verdict:
        """The rule judge's findings on the calls alone (no model call: the model reads the messages too)."""
        return self.rule.judge_calls(traj, specs)

    def judge(self, traj: Trajectory, specs: dict[str, ToolSpec]) -> Verdict:
        """Reject on any rule finding; otherwise on the model's findings."""
        verdict = self.rule.judge(traj, specs)
        if not verdict.accepted:
            return verdict
        answer = self.llm.ask("judge", JudgeAnswer, judge_schema(len(traj.turns)),
                              state=fit(traj.c0, STATE_CHARS), conversation=conversation_fit(traj))
        return Verdict.from_findings([Finding(criterion=f.criterion, turn=f.turn, detail=f.detail, diagnosis=f.kind)
                                      for f in answer.findings])
