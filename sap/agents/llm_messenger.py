"""LLM messenger: user messages under each call's must-mention list, per turn (one fragment per call) or
for all turns at once from the narrative (global rewrite); verbatim values are checked and fed back. It also writes
the rewrite operators' texts: the assistant's question or refusal (`clarify`) and MissParam's withheld request and
follow-up (`withhold`)."""
from __future__ import annotations

import random
import re
from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel, Field

from sap.agents.llm_common import RESULT_CHARS, LLMRole, compact, fit
from sap.agents.judge import MAX_MESSAGE_CHARS, MIN_MESSAGE_CHARS, task_words
from sap.agents.messenger import ClarifyRequest, Mention, found_here, must_mention, output_choice, stated_phrase
from sap.agents.replies import short_task
from sap.agents.requests import found_reference
from sap.agents.withheld import WithheldRequest
from sap.llm.schema import closed, containing
from sap.model import ToolCall, ToolSpec, Turn
from sap.provenance.checks import mention_texts, mentions, states_selector
from sap.provenance.goals import requested
from sap.provenance.leaks import find_leaks, names_of
from sap.provenance.selectors import selector_words
from sap.provenance.withheld import announces
from sap.text import describe_value, field_words, names_tool, task_phrase

MessageMode = Literal["per_turn", "global"]


class TurnAnswer(BaseModel):
    """One turn: a fragment per call, keyed call_0, call_1, ... (joined into the user message), and the
    assistant's reply."""

    fragments: dict[str, str] = Field(min_length=1)
    assistant_message: str = Field(min_length=1)


class TurnMessages(BaseModel):
    """One turn's user message and assistant reply, in the global answer."""

    user_message: str = Field(min_length=1)
    assistant_message: str = Field(min_length=1)


class ClarifyAnswer(BaseModel):
    """The assistant's reply at a turn it cannot serve yet."""

    assistant_message: str = Field(min_length=1)


class WithheldAnswer(BaseModel):
    """MissParam's pair of user turns: the request without the withheld values, and the follow-up giving them."""

    user_message: str = Field(min_length=1)
    follow_up: str = Field(min_length=1)


class GlobalAnswer(BaseModel):
    """All turns' messages at once, keyed turn_0, turn_1, ... in the order the prompt lists them."""

    turns: dict[str, TurnMessages]


REPLY_CHARS = 600  # an assistant reply at most: a bound llama.cpp's grammar parser takes (at 1200 its server dies)
REPLY = {"type": "string", "minLength": 1, "maxLength": REPLY_CHARS}
CLARIFY_SCHEMA = closed({"assistant_message": REPLY})


def one_line(value: Any) -> str:
    """A value to state word for word, as the answer schema asks for it: on one line, whitespace collapsed (a
    multi-line text shown with its line breaks could not be copied into a one-line message as it stands)."""
    if isinstance(value, str):
        return describe_value(" ".join(value.split()))
    return re.sub(r"\s+", " ", describe_value(value)).strip()


def _mention_line(m: Mention, steps: dict[tuple[int, int], str]) -> str:
    """A must-mention entry as the prompt shows it: label, parameter in words, and the value or, for a history
    value, where it came from in plain words (the earlier step, by its task in `steps`), which one it is when it is
    one among several, and the value itself (to recognise, not to restate); never a tool name or call position."""
    if m.verbatim:
        return f"{m.label()} {field_words(m.param)}: {one_line(m.value)}"
    if m.marker == "FOUND_BY_ASSISTANT":  # its words from the user's side, the selector's too ("my latest ...")
        words = found_reference(field_words(m.param), m.selector, m.value, random.Random(0)) \
            if m.selector is not None else f"my {field_words(m.param)}"
        where = f"what it is to you, from your side (\"{words}\"): the assistant finds it itself " \
                "in this turn, you have not seen it"
    else:
        where = history_phrase(m, steps) if m.source else stated_phrase(replace(m, param=field_words(m.param)))
    line = f"{m.label()} {field_words(m.param)}: refer to it as {where}"
    if m.selector is not None:
        line += " (say which one in these words; it is one among several)"
    return line + f" | its value, not to be restated: {describe_value(m.value)}"


LOOKUPS = {"get", "find", "show", "list", "search", "view", "check", "read", "look", "retrieve", "display", "fetch"}


def history_phrase(m: Mention, steps: dict[tuple[int, int], str]) -> str:
    """Where a value from an earlier result came from, in the user's words: "the order ID of the order whose status
    is "delivered" from the details of a user you looked up", "the booking ID from when I asked you to book a room"."""
    choice = output_choice(m.selector, m.value) if m.selector is not None else ""
    latest = "most recent " if m.selector is not None and m.selector.latest else ""
    verb, _, rest = steps.get(m.source, "look it up").partition(" ")
    origin = f"the {latest}{rest.removeprefix('one of ').removeprefix('the ')} you looked up" if verb in LOOKUPS and rest else \
        f"{'the most recent time' if latest else 'when'} I asked you to {verb} {rest}".rstrip()
    return f"the {field_words(m.param)}" + (f" of {choice}" if choice else "") + f" from {origin}"


def leaks_in(texts: list[str], specs: dict[str, ToolSpec]) -> list[str]:
    """The internals (tool or raw parameter names, paths, tags, call positions) that written messages leak."""
    tools, params = names_of(specs)
    return [leak for text in texts for leak in find_leaks(text, tools, params)]


def unsaid_selectors(message: str, turn: Turn) -> list[str]:
    """The parameters of the turn whose reference is one among several and whose selector `message` leaves out."""
    return [field_words(m.param) for c in turn.calls for m in must_mention(c)
            if m.selector is not None and not states_selector(message, m.selector, m.value)]


def stated_ahead(turn: Turn, virtual: list[dict[str, Any]]) -> list[str]:
    """The virtual-history values this turn must state for later turns, as the prompt shows them."""
    return [f"{field_words(v['param'])}: {one_line(v['value'])}" for v in virtual if v["turn"] == turn.index]


def call_pieces(turn: Turn, specs: dict[str, ToolSpec], virtual: list[dict[str, Any]]) -> dict[int, list[str | list[str]]]:
    """Per call the user asks for (a goal turn's prerequisites get no fragment), what its fragment must hold in
    order: one word of the call's task (the judge's test that the message refers to it), then per must-mention
    entry its value word for word (new and config values) and its selector's words; the last fragment (the goal's)
    also holds what the prerequisites need the user to say and the values the turn states ahead for later turns."""
    found, asked = found_here(turn), requested(turn)
    pieces: dict[int, list[str | list[str]]] = {
        i: [task_words(specs[turn.calls[i].name]), *(p for m in must_mention(turn.calls[i], found)
                                                     for p in mention_pieces(m))] for i in asked}
    pieces[asked[-1]] += [p for i in turn.prerequisites for m in must_mention(turn.calls[i], found)
                          for p in mention_pieces(m)]
    pieces[asked[-1]] += [t for v in virtual if v["turn"] == turn.index for t in mention_texts(v["value"])]
    return pieces


def mention_pieces(m: Mention) -> list[str | list[str]]:
    """What a fragment must hold for one must-mention entry, in the order messages state them: its value word for
    word (new and config values), and which one is meant when it is one among several."""
    return [*(mention_texts(m.value) if m.verbatim else ()), *(selector_pieces(m) if m.selector is not None else ())]


def selector_pieces(m: Mention) -> list[str | list[str]]:
    """What a fragment must hold to say which of several values a reference means: one word of each of the
    selector's groups, or the value itself when the selector names it (what `states_selector` accepts)."""
    groups = selector_words(m.selector)
    if m.selector.named or not groups:
        return list(mention_texts(m.value))
    return [sorted(g) for g in groups]


def turn_schema(turn: Turn, specs: dict[str, ToolSpec], virtual: list[dict[str, Any]]) -> dict[str, Any]:
    """The exact answer schema of one turn: a fragment per call the user asks for, each naming its task and
    holding its values verbatim, each at most as long as the judge's message length leaves it beside the least the
    other fragments must hold (a goal's fragment also carries its prerequisites' values; the whole message's
    length is the judge's check), and a reply."""
    pieces = call_pieces(turn, specs, virtual)
    needed = {i: sum(len(q) if isinstance(q, str) else max(map(len, q), default=0) for q in p)
              for i, p in pieces.items()}
    least = {i: max(n, MIN_MESSAGE_CHARS) for i, n in needed.items()}
    fragments = {f"call_{i}": containing(p, MIN_MESSAGE_CHARS, max(
        MAX_MESSAGE_CHARS - len(pieces) - sum(least.values()) + least[i], MIN_MESSAGE_CHARS))
        for i, p in pieces.items()}
    return closed({"fragments": closed(fragments), "assistant_message": REPLY})


def withheld_schema(req: WithheldRequest) -> dict[str, Any]:
    """The exact answer schema of a MissParam pair: a request naming each call's task and holding the values it
    keeps (and states for later) verbatim, and a follow-up holding every withheld value verbatim."""
    k = req.turn.index
    kept = [p for i, c in enumerate(req.turn.calls)
            for p in [*([task_words(req.specs[c.name])] if i in requested(req.turn) else []),
                      *(x for m in must_mention(c) if m.param not in req.withheld.get((k, i), ())
                        for x in mention_pieces(m))]]
    kept += [t for v in req.virtual for t in mention_texts(v["value"])]
    given = [t for v in req.values for t in mention_texts(v.value)]
    return closed({"user_message": containing(kept, MIN_MESSAGE_CHARS, MAX_MESSAGE_CHARS),
                   "follow_up": containing(given, MIN_MESSAGE_CHARS, MAX_MESSAGE_CHARS)})


def global_schema(written: list[Turn], specs: dict[str, ToolSpec], virtual: list[dict[str, Any]]) -> dict[str, Any]:
    """The exact answer schema of a global rewrite: per listed turn a user message naming each call's task and
    holding its values verbatim, and a reply."""
    return closed({"turns": closed({
        f"turn_{k}": closed({"user_message": containing([p for call in call_pieces(turn, specs, virtual).values()
                                                         for p in call],
                                                        MIN_MESSAGE_CHARS, MAX_MESSAGE_CHARS),
                             "assistant_message": REPLY})
        for k, turn in enumerate(written)})})


class LLMMessenger:
    """Writes messages with the model; `mode` is per_turn (one call per turn) or global (one call in all)."""

    def __init__(self, llm: LLMRole, mode: MessageMode = "per_turn") -> None:
        self.llm, self.mode = llm, mode

    def write(self, turns: list[Turn], specs: dict[str, ToolSpec], rng: random.Random,
              virtual: list[dict[str, Any]] = (), narrative: str | None = None) -> list[Turn]:
        """The turns with messages; turns without calls keep the messages they have."""
        steps = {(t.index, i): short_task(task_phrase(specs[c.name])) for t in turns for i, c in enumerate(t.calls)}
        if self.mode == "global":
            return self._write_global(turns, specs, list(virtual), narrative or "", steps)
        out: list[Turn] = []
        for turn in turns:
            out.append(self._write_turn(turn, specs, list(virtual), out, steps) if turn.calls else turn)
        return out

    def _calls_text(self, turn: Turn, specs: dict[str, ToolSpec], steps: dict[tuple[int, int], str],
                    left_out: Mapping[tuple[int, int], Collection[str]] = {}) -> str:
        """The turn's calls as the prompt lists them: task and must-mention list of each, less the parameters
        `left_out` at (turn, call) (`steps`: each earlier call's task in words, which history references name as
        their origin)."""
        found = found_here(turn)

        def block(i: int, c: ToolCall) -> str:
            entries = [m for m in must_mention(c, found) if m.param not in left_out.get((turn.index, i), ())]
            if i in turn.prerequisites:  # only what the user must say for it: their facts, which one they mean
                lines = [_mention_line(m, steps) for m in entries if m.verbatim or m.selector is not None]
                return (f"step {i} (PREREQUISITE: the assistant works this out itself; never ask for it): task: "
                        f"{task_phrase(specs[c.name])}\n  the user only says, in the goal's fragment:\n    "
                        + ("\n    ".join(lines) or "(nothing)"))
            return f"call {i}: task: {task_phrase(specs[c.name])}\n  must mention:\n    " + \
                ("\n    ".join(_mention_line(m, steps) for m in entries) or "(nothing)")

        return "\n".join(block(i, c) for i, c in enumerate(turn.calls))

    def _write_turn(self, turn: Turn, specs: dict[str, ToolSpec], virtual: list[dict[str, Any]],
                     earlier: list[Turn], steps: dict[tuple[int, int], str]) -> Turn:
        def check(a: TurnAnswer) -> None:  # what the schema cannot say: the selector's words, no internals
            fragments = " ".join(a.fragments.values())
            if unsaid := unsaid_selectors(fragments, turn):
                raise ValueError(f"fragments: say which one is meant, in the given words, for: {', '.join(unsaid)}")
            if leaks := leaks_in([fragments, a.assistant_message], specs):
                raise ValueError(f"speak in plain words, the messages name internals: {'; '.join(leaks)}")

        answer = self.llm.ask(
            "messenger_turn", TurnAnswer, turn_schema(turn, specs, virtual), check=check,
            earlier="\n".join(f"turn {t.index}: {t.user_message}" for t in earlier if t.user_message) or "(none)",
            calls=self._calls_text(turn, specs, steps), ahead="; ".join(stated_ahead(turn, virtual)) or "(none)",
            results=fit([c.result for c in turn.calls], RESULT_CHARS * 2))
        fragments = [answer.fragments[f"call_{i}"].strip() for i in requested(turn)]
        return turn.model_copy(update={"user_message": " ".join(fragments),
                                       "assistant_message": answer.assistant_message})

    def _write_global(self, turns: list[Turn], specs: dict[str, ToolSpec], virtual: list[dict[str, Any]],
                      narrative: str, steps: dict[tuple[int, int], str]) -> list[Turn]:
        written = [t for t in turns if t.calls]

        def check(a: GlobalAnswer) -> None:  # what the schema cannot say: the selectors' words
            unsaid = [f"turn_{k}: {', '.join(u)}" for k, t in enumerate(written)
                      if (u := unsaid_selectors(a.turns[f"turn_{k}"].user_message, t))]
            if unsaid:
                raise ValueError("say which one is meant, in the given words, for: " + "; ".join(unsaid))
            texts = [m for t in a.turns.values() for m in (t.user_message, t.assistant_message)]
            if leaks := leaks_in(texts, specs):
                raise ValueError(f"speak in plain words, the messages name internals: {'; '.join(leaks)}")

        blocks = []
        for k, t in enumerate(written):
            ahead = stated_ahead(t, virtual)
            blocks.append(f"turn {k}:\n{self._calls_text(t, specs, steps)}"
                          + (f"\n  also state, for later: {'; '.join(ahead)}" if ahead else "")
                          + f"\n  results: {compact([c.result for c in t.calls], RESULT_CHARS)}")
        answer = self.llm.ask("messenger_global", GlobalAnswer, global_schema(written, specs, virtual), check=check,
                              narrative=narrative or "(none)", turns="\n".join(blocks))
        by_index = {t.index: answer.turns[f"turn_{k}"] for k, t in enumerate(written)}
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
        return self.llm.ask("messenger_clarify", ClarifyAnswer, CLARIFY_SCHEMA, check=check,
                            user_message=req.user_message, need=need).assistant_message

    def withhold(self, req: WithheldRequest) -> tuple[str, str]:
        """MissParam's withheld request and follow-up: the request leaves the withheld values out silently (no
        value, no announcement) and keeps the others; the follow-up gives every withheld value verbatim."""
        turn = req.turn

        def check(a: WithheldAnswer) -> None:  # what the schema cannot say: values absent, no announcement
            if stated := [describe_value(v.value) for v in req.values if mentions(a.user_message, v.value)]:
                raise ValueError(f"user_message states values it must leave out: {', '.join(stated)}")
            if announces(a.user_message):
                raise ValueError("user_message announces the missing values; leave them out without a word")
            if unsaid := unsaid_selectors(a.user_message, turn):
                raise ValueError(f"user_message: say which one is meant, in the given words, for: {', '.join(unsaid)}")

        steps = {(t.index, i): short_task(task_phrase(req.specs[c.name])) for t in req.earlier
                 for i, c in enumerate(t.calls)}
        answer = self.llm.ask(
            "messenger_withhold", WithheldAnswer, withheld_schema(req), check=check,
            earlier="\n".join(f"turn {t.index}: {t.user_message}" for t in req.earlier if t.user_message) or "(none)",
            calls=self._calls_text(turn, req.specs, steps, req.withheld),
            ahead="; ".join(stated_ahead(turn, req.virtual)) or "(none)",
            missing="\n".join(f"- {v.noun}: {one_line(v.value)}" for v in req.values))
        return answer.user_message.strip(), answer.follow_up.strip()
