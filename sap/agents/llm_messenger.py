"""LLM messenger: user messages under each call's must-mention list, per turn (one fragment per call) or
for all turns at once from the narrative (global rewrite); verbatim values are checked and fed back."""
from __future__ import annotations

import random
from typing import Any, Literal

from pydantic import BaseModel, Field

from sap.agents.llm_common import RESULT_CHARS, LLMRole, compact
from sap.agents.messenger import (ClarifyRequest, Mention, describe_value, humanize, must_mention, names_tool,
                                  task_phrase)
from sap.model import ToolSpec, Turn
from sap.provenance.checks import mentions

MessageMode = Literal["per_turn", "global"]


class TurnAnswer(BaseModel):
    """One turn: a fragment per call (joined into the user message) and the assistant's reply."""

    fragments: list[str] = Field(min_length=1)
    assistant_message: str = Field(min_length=1)


class TurnMessages(BaseModel):
    """One turn's user message and assistant reply, in the global answer."""

    user_message: str = Field(min_length=1)
    assistant_message: str = Field(min_length=1)


class ClarifyAnswer(BaseModel):
    """The assistant's reply at a turn it cannot serve yet."""

    assistant_message: str = Field(min_length=1)


class GlobalAnswer(BaseModel):
    """All turns' messages at once."""

    turns: list[TurnMessages]


def _mention_line(m: Mention) -> str:
    """A must-mention entry as the prompt shows it: label, parameter, and the value or its source."""
    if m.verbatim:
        return f"{m.label()} {humanize(m.param)}: {describe_value(m.value)}"
    where = f"the result of turn {m.source[0]} call {m.source[1]}" if m.source else "an earlier user message"
    return f"{m.label()} {humanize(m.param)}: refer to it as the one from {where}"


def stated_ahead(turn: Turn, virtual: list[dict[str, Any]]) -> list[str]:
    """The virtual-history values this turn must state for later turns, as the prompt shows them."""
    return [f"{humanize(v['param'])}: {describe_value(v['value'])}" for v in virtual if v["turn"] == turn.index]


def required_values(turn: Turn, virtual: list[dict[str, Any]]) -> list[Any]:
    """Values the turn's user message must contain word for word: new and config values, and those stated ahead."""
    values = [m.value for c in turn.calls for m in must_mention(c) if m.verbatim]
    return values + [v["value"] for v in virtual if v["turn"] == turn.index]


def missing_values(message: str, values: list[Any]) -> list[str]:
    """The required values `message` does not state verbatim, as shown to the model."""
    return [describe_value(v) for v in values if not mentions(message, v)]


class LLMMessenger:
    """Writes messages with the model; `mode` is per_turn (one call per turn) or global (one call in all)."""

    def __init__(self, llm: LLMRole, mode: MessageMode = "per_turn") -> None:
        self.llm, self.mode = llm, mode

    def write(self, turns: list[Turn], specs: dict[str, ToolSpec], rng: random.Random,
              virtual: list[dict[str, Any]] = (), narrative: str | None = None) -> list[Turn]:
        """The turns with messages; turns without calls keep the messages they have."""
        if self.mode == "global":
            return self._write_global(turns, specs, list(virtual), narrative or "")
        out: list[Turn] = []
        for turn in turns:
            out.append(self._write_turn(turn, specs, list(virtual), out) if turn.calls else turn)
        return out

    def _calls_text(self, turn: Turn, specs: dict[str, ToolSpec]) -> str:
        return "\n".join(f"call {i}: task: {task_phrase(specs[c.name])}\n  must mention:\n    "
                         + ("\n    ".join(_mention_line(m) for m in must_mention(c)) or "(nothing)")
                         for i, c in enumerate(turn.calls))

    def _write_turn(self, turn: Turn, specs: dict[str, ToolSpec], virtual: list[dict[str, Any]],
                    earlier: list[Turn]) -> Turn:
        values = required_values(turn, virtual)

        def check(a: TurnAnswer) -> None:
            if len(a.fragments) != len(turn.calls):
                raise ValueError(f"fragments: {len(a.fragments)} given, one per call needed ({len(turn.calls)})")
            if missing := missing_values(" ".join(a.fragments), values):
                raise ValueError(f"fragments: these values must appear word for word: {', '.join(missing)}")

        answer = self.llm.ask(
            "messenger_turn", TurnAnswer, check=check,
            earlier="\n".join(f"turn {t.index}: {t.user_message}" for t in earlier if t.user_message) or "(none)",
            calls=self._calls_text(turn, specs), ahead="; ".join(stated_ahead(turn, virtual)) or "(none)",
            results=compact([c.result for c in turn.calls], RESULT_CHARS * 2))
        return turn.model_copy(update={"user_message": " ".join(f.strip() for f in answer.fragments),
                                       "assistant_message": answer.assistant_message})

    def _write_global(self, turns: list[Turn], specs: dict[str, ToolSpec], virtual: list[dict[str, Any]],
                      narrative: str) -> list[Turn]:
        written = [t for t in turns if t.calls]

        def check(a: GlobalAnswer) -> None:
            if len(a.turns) != len(written):
                raise ValueError(f"turns: {len(a.turns)} given, {len(written)} needed")
            problems = [f"turns[{k}].user_message lacks {', '.join(miss)}" for k, (t, m) in enumerate(zip(written, a.turns))
                        if (miss := missing_values(m.user_message, required_values(t, virtual)))]
            if problems:
                raise ValueError("values must appear word for word: " + "; ".join(problems))

        blocks = []
        for k, t in enumerate(written):
            ahead = stated_ahead(t, virtual)
            blocks.append(f"turn {k}:\n{self._calls_text(t, specs)}"
                          + (f"\n  also state, for later: {'; '.join(ahead)}" if ahead else "")
                          + f"\n  results: {compact([c.result for c in t.calls], RESULT_CHARS)}")
        answer = self.llm.ask("messenger_global", GlobalAnswer, check=check, narrative=narrative or "(none)",
                              turns="\n".join(blocks))
        by_index = {t.index: m for t, m in zip(written, answer.turns)}
        return [t.model_copy(update={"user_message": by_index[t.index].user_message,
                                     "assistant_message": by_index[t.index].assistant_message})
                if t.index in by_index else t for t in turns]

    def clarify(self, req: ClarifyRequest) -> str:
        """The assistant's reply at a MissParam / MissFunc turn: it asks for the withheld values, or says the task
        cannot be done with the tools it has; it states no withheld value and names no tool."""

        def check(a: ClarifyAnswer) -> None:
            if leaked := [describe_value(v) for v in req.hidden if mentions(a.assistant_message, v)]:
                raise ValueError(f"assistant_message states values the user has not given: {', '.join(leaked)}")
            if names_tool(a.assistant_message, req.tools):
                raise ValueError("assistant_message names a tool; speak of the task in plain words")

        if req.kind == "miss_param":
            need = f"Ask the user for: {', '.join(req.missing)}. Do not guess or state any value."
        else:
            need = (f"You have no tool that can {req.task}." if req.task else "You have no tool for this request.") \
                + " Say so politely, without naming any tool, and do not pretend to have done it."
        return self.llm.ask("messenger_clarify", ClarifyAnswer, check=check, user_message=req.user_message,
                            need=need).assistant_message
