"""Messenger role: writes user and assistant messages after the calls are fixed; rule version uses templates."""
from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from sap.agents.composer import compose_message
from sap.agents.requests import Wording, conveyed_arguments, join_words, request_phrase, said_value
from sap.agents.replies import assistant_reply
from sap.model import Selector, Tag, ToolCall, ToolSpec, Turn
from sap.provenance.phrasebook import phrase_book
from sap.provenance.selectors import ordinal
from sap.text import describe_value, humanize, result_noun, words_of

_REVEAL_ONE = ["Oh, it's {v}.", "Sorry - it's {v}.", "The {n} is {v}.", "Right, {v}.", "It's {v}.",
               "Sorry, I should have said: {v}.", "Use {v}.", "{v}, please.", "Good point - {v}.", "Ah, {v}.",
               "My bad, it's {v}.", "Go with {v}.", "The one I want is {v}.", "That'd be {v}.",
               "Oops, forgot that: {v}.", "Make it {v}.", "{v} is the one.", "Should be {v}.",
               "Let's go with {v} for the {n}.", "For the {n}, use {v}."]
_REVEAL_MANY = ["Sorry - {x}.", "Oh, right: {x}.", "Of course: {x}.", "Sure, {x}.", "Good catch - {x}.",
                "My mistake: {x}.", "Ah yes, {x}.", "Here you go: {x}.", "Right, so {x}."]


class Messenger(Protocol):
    """Writes each turn's user message and assistant reply (rule or LLM)."""

    def write(self, turns: list[Turn], specs: dict[str, ToolSpec], rng: random.Random,
              virtual: list[dict[str, Any]] = (), narrative: str | None = None) -> list[Turn]:
        """The turns with messages filled in; `virtual` lists values (turn, param, value) to state ahead of use;
        `narrative` is the planner's story for a global rewrite (None in per-turn mode)."""


@dataclass(frozen=True)
class ClarifyRequest:
    """What the assistant must say at the turn a rewrite operator made unservable: ask for withheld values
    (miss_param) or say the task cannot be done with the tools at hand (miss_func)."""

    kind: Literal["miss_param", "miss_func"]
    user_message: str  # the user's message at that turn, as the variant has it
    missing: list[str]  # miss_param: the withheld values' parameters, in plain words
    task: str  # miss_func: the unavailable task, in plain words ("" if unknown)
    hidden: list[Any]  # values the reply must not state (the user has not given them)
    tools: list[str]  # tool names the reply must not mention
    template: str  # the rule wording, which stands if no clarifier is configured


@dataclass(frozen=True)
class Mention:
    """One entry of a call's must-mention list: a value, how the user must convey it, and where it came from."""

    param: str
    value: Any
    marker: Literal["NEW", "FROM_HISTORY", "FROM_CONFIG", "FALLBACK"]
    verbatim: bool  # stated word for word (new, config) or only referred to (history)
    fallback_from: Tag | None = None
    source: tuple[int, int] | None = None  # (turn, call) of the producing result for history values
    selector: Selector | None = None  # how the reference singles out its value among several

    def label(self) -> str:
        """The marker as written in a must-mention list: [NEW], [FROM_HISTORY], [FROM_CONFIG], [FALLBACK from X]."""
        if self.marker == "FALLBACK":
            return f"[FALLBACK from {self.fallback_from.value if self.fallback_from else '?'}]"
        return f"[{self.marker}]"


def must_mention(call: ToolCall) -> list[Mention]:
    """The call's must-mention list, one entry per argument, in argument order."""
    out = []
    for name, value in call.args_exec.items():
        prov = call.args_prov[name]
        used = prov.effective_tag()
        verbatim = used in (Tag.self_create, Tag.initial_state)
        source = (prov.turn, prov.call) if used == Tag.prev_output else None
        if prov.tag == Tag.fallback:
            marker = "FALLBACK"
        else:
            marker = {Tag.self_create: "NEW", Tag.initial_state: "FROM_CONFIG"}.get(prov.tag, "FROM_HISTORY")
        out.append(Mention(name, value, marker, verbatim, prov.fallback_from, source,
                           None if verbatim else prov.selector))
    return out


def output_choice(sel: Selector, value: Any) -> str:
    """In words, which element of a listing a history reference means: "the order whose status is "delivered"",
    "the second file listed", "the file name "a.txt""; empty if the selector only says which result."""
    if sel.field is not None:
        return f"the {sel.noun} whose {humanize(sel.field)} is {describe_value(sel.value)}"
    if sel.named:
        return f"the {sel.noun} {describe_value(value)}"
    if sel.position is not None:
        return f"the {ordinal(sel.position)} {sel.noun} listed"
    return ""


def reference_phrase(m: Mention, tool: str) -> str:
    """How the user refers to a history value in words: its source result, and the selector when it is one among
    several ("the order id of the order whose status is "delivered" from the most recent user details")."""
    p, noun = humanize(m.param), result_noun(tool)
    if m.selector is None:
        return f"the {p} from the {noun}"
    choice = output_choice(m.selector, m.value)
    return f"the {p} of {choice} from the {'most recent ' if m.selector.latest else ''}{noun}" if choice else \
        f"the {p} from the {'most recent ' if m.selector.latest else ''}{noun}"


def stated_phrase(m: Mention) -> str:
    """How the user refers to a value they stated before, saying which when they stated several for it."""
    p = humanize(m.param)
    if m.selector is None:
        return f"the {p} I mentioned earlier"
    if m.selector.latest:
        return f"the {p} I mentioned most recently"
    return f"the {ordinal(m.selector.position or 1)} {p} I mentioned"




class RuleMessenger:
    """Rule-written user messages in the user's words: per call a phrase from the toolset's phrase book (or the
    tool's docstring as an imperative), composed into a turn with varied openers, lead-ins and closers; new and
    config values verbatim, history values by reference."""

    def write(self, turns: list[Turn], specs: dict[str, ToolSpec], rng: random.Random,
              virtual: list[dict[str, Any]] = (), narrative: str | None = None,
              withheld: Mapping[tuple[int, int], frozenset[str]] = {}) -> list[Turn]:
        """Fill every turn's messages in order, stating virtual-history values in their anchor turns (templates
        take no narrative); `withheld` maps (turn, call) to parameters whose values the user leaves out there."""
        wording = Wording(specs, phrase_book(specs))
        out: list[Turn] = []
        for turn in turns:
            if not turn.calls:  # a clarification or hand-off turn keeps the messages its writer gave it
                out.append(turn)
                continue
            requests = []
            for i, call in enumerate(turn.calls):
                args = conveyed_arguments(call, withheld.get((turn.index, i), frozenset()), wording,
                                          must_mention(call), turn.index, rng)
                requests.append(request_phrase(wording.phrases(call.name), specs[call.name], call, args, rng))
            ahead = [(wording_noun(wording, turn, v["param"]), said_value(v["value"]))
                     for v in virtual if v["turn"] == turn.index]
            first = not any(t.user_message for t in out)  # greetings and intros open the dialogue only
            message = compose_message(requests, ahead, first, wording.book.intros if wording.book else (), rng)
            reply = assistant_reply(turn.calls, specs, rng)
            out.append(turn.model_copy(update={"user_message": message, "assistant_message": reply}))
        return out


def wording_noun(wording: Wording, turn: Turn, param: str) -> str:
    """Plain words for a parameter stated ahead of use: from a tool of the turn that has it, else from any tool
    that has it, else its name in words."""
    tools = [c.name for c in turn.calls] + sorted(wording.specs)
    for tool in tools:
        if tool in wording.specs and param in wording.specs[tool].properties:
            return wording.noun(tool, param)
    return words_of(param)


def reveal_message(mentions: Sequence[Mention], rng: random.Random, nouns: Mapping[str, str] = {}) -> str:
    """The user's follow-up supplying values the assistant asked for, verbatim and in passing ("Oh, it's alice.",
    "Sorry - the file is notes.txt and the folder is archive."); `nouns` gives a parameter's plain words."""
    if len(mentions) == 1:
        value = said_value(mentions[0].value)
        noun = nouns.get(mentions[0].param) or words_of(mentions[0].param)
        return rng.choice(_REVEAL_ONE).format(v=value, n=noun)
    parts = [f"the {nouns.get(m.param) or words_of(m.param)} is {said_value(m.value)}" for m in mentions]
    return rng.choice(_REVEAL_MANY).format(x=join_words(parts))
