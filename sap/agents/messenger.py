"""Messenger role: writes user and assistant messages after the calls are fixed; rule version uses templates."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from sap.agents.replies import assistant_reply
from sap.model import Selector, Tag, ToolCall, ToolSpec, Turn
from sap.provenance.selectors import ordinal
from sap.text import describe_value, humanize, result_noun, task_phrase

_OPENERS = ["Please {x}.", "Could you {x}?", "I'd like you to {x}.", "Can you {x}?", "Next, {x}."]
_JOINERS = [" Then, ", " After that, ", " Once that's done, "]
_REF_PHRASES = ["the {p} from the {t} you looked up", "that {p} you found in the {t}", "the {p} from the {t} earlier"]
_STATED_PHRASES = ["the same {p} I mentioned earlier", "the {p} I gave you before"]
_AHEAD_PHRASES = ["By the way, for later: the {p} is {v}.", "Keep in mind for later that the {p} will be {v}.",
                  "Also, note the {p} {v}; I'll need it further on."]


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


def _fragment_detail(m: Mention, history_names: dict[tuple[int, int], str], rng: random.Random) -> str:
    """How the user conveys one must-mention entry: verbatim if new or from config, by reference otherwise."""
    if m.verbatim:
        return f"{humanize(m.param)} {describe_value(m.value)}"
    if m.source is not None:
        tool = history_names.get(m.source, "results")
        if m.selector is not None:
            return f"{humanize(m.param)}: {reference_phrase(m, tool)}"
        return f"{humanize(m.param)}: " + rng.choice(_REF_PHRASES).format(p=humanize(m.param), t=result_noun(tool))
    if m.selector is not None:
        return f"{humanize(m.param)}: {stated_phrase(m)}"
    return f"{humanize(m.param)}: " + rng.choice(_STATED_PHRASES).format(p=humanize(m.param))


class RuleMessenger:
    """Template messages from each call's must-mention list: one fragment per call, composed into the turn's
    user message; new and config values verbatim, history values by reference."""

    def write(self, turns: list[Turn], specs: dict[str, ToolSpec], rng: random.Random,
              virtual: list[dict[str, Any]] = (), narrative: str | None = None) -> list[Turn]:
        """Fill every turn's messages in order, stating virtual-history values in their anchor turns (templates
        take no narrative)."""
        names = {(t.index, i): c.name for t in turns for i, c in enumerate(t.calls)}
        out = []
        for turn in turns:
            if not turn.calls:  # a clarification or hand-off turn keeps the messages its writer gave it
                out.append(turn)
                continue
            fragments = []
            for call in turn.calls:
                task = task_phrase(specs[call.name])
                details = [_fragment_detail(m, names, rng) for m in must_mention(call)]
                fragments.append(task + (f" ({'; '.join(details)})" if details else ""))
            message = rng.choice(_OPENERS).format(x=fragments[0])
            for frag in fragments[1:]:
                message += rng.choice(_JOINERS) + frag + "."
            for v in (v for v in virtual if v["turn"] == turn.index):
                message += " " + rng.choice(_AHEAD_PHRASES).format(p=humanize(v["param"]), v=describe_value(v["value"]))
            reply = assistant_reply(turn.calls, specs, rng)
            out.append(turn.model_copy(update={"user_message": message, "assistant_message": reply}))
        return out
