"""Messenger role: writes user and assistant messages after the calls are fixed; rule version uses templates."""
from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from sap.model import Tag, ToolCall, ToolSpec, Turn

_OPENERS = ["Please {x}.", "Could you {x}?", "I'd like you to {x}.", "Can you {x}?", "Next, {x}."]
_JOINERS = [" Then, ", " After that, ", " Once that's done, "]
_REF_PHRASES = ["the {p} from the {t} you looked up", "that {p} you found in the {t}", "the {p} from the {t} earlier"]
_LEAD_VERBS = {"get", "list", "search", "find", "show", "view", "check", "lookup", "fetch", "read", "query", "describe"}
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


def loose_pattern(text: str) -> str:
    """A regex for `text` in which any run of whitespace matches any run of whitespace."""
    return r"\s+".join(re.escape(part) for part in text.split())


def names_tool(text: str, tools: list[str]) -> bool:
    """Whether `text` names any tool as a whole word (`cat`, `get_user_details`, `get user details`)."""
    for name in tools:
        for form in {name, humanize(name)}:
            if re.search(r"(?<![A-Za-z0-9_])" + loose_pattern(form) + r"(?![A-Za-z0-9_])", text, re.I):
                return True
    return False


def describe_value(value: Any) -> str:
    """A value as it must appear verbatim in text; an object as its fields in words (`first name "Noah", dob
    "1990-04-05"`), never raw JSON."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return ", ".join(describe_value(v) for v in value)
    if isinstance(value, dict) and value:  # `title "x", priority 3`: words, not raw JSON
        return ", ".join(f"{humanize(str(k))} {describe_value(v)}" for k, v in value.items())
    return json.dumps(value)


def humanize(param: str) -> str:
    """`check_in` -> `check in`."""
    return param.replace("_", " ")


def task_phrase(spec: ToolSpec) -> str:
    """The tool's first description sentence, as a lower-case imperative phrase."""
    text = (spec.description or spec.name.replace("_", " ")).strip().split("\n")[0]
    text = text.split(". ")[0].rstrip(".")
    return text[:1].lower() + text[1:]


def _result_noun(tool: str) -> str:
    """A plain-words name for a tool's result: get_user_details -> "user details", ls -> "ls output"."""
    words = tool.split("_")
    if len(words) > 1 and words[0] in _LEAD_VERBS:
        words = words[1:]
    return " ".join(words) if len(words) > 1 else f"{words[0]} output"


@dataclass(frozen=True)
class Mention:
    """One entry of a call's must-mention list: a value, how the user must convey it, and where it came from."""

    param: str
    value: Any
    marker: Literal["NEW", "FROM_HISTORY", "FROM_CONFIG", "FALLBACK"]
    verbatim: bool  # stated word for word (new, config) or only referred to (history)
    fallback_from: Tag | None = None
    source: tuple[int, int] | None = None  # (turn, call) of the producing result for history values

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
        out.append(Mention(name, value, marker, verbatim, prov.fallback_from, source))
    return out


def _fragment_detail(m: Mention, history_names: dict[tuple[int, int], str], rng: random.Random) -> str:
    """How the user conveys one must-mention entry: verbatim if new or from config, by reference otherwise."""
    if m.verbatim:
        return f"{humanize(m.param)} {describe_value(m.value)}"
    if m.source is not None:
        tool = history_names.get(m.source, "results")
        return f"{humanize(m.param)}: " + rng.choice(_REF_PHRASES).format(p=humanize(m.param), t=_result_noun(tool))
    return f"{humanize(m.param)}: " + rng.choice(_STATED_PHRASES).format(p=humanize(m.param))


def _summary(call: ToolCall) -> str:
    """A one-line account of a result for the assistant's reply."""
    if isinstance(call.result, dict):
        parts = []
        for k, v in list(call.result.items())[:3]:
            shown = v if isinstance(v, (str, int, float, bool)) else f"{len(v)} item(s)" if isinstance(v, (list, dict)) else v
            parts.append(f"{humanize(k)}: {shown}")
        body = "; ".join(parts) if parts else "no details"
    else:
        body = str(call.result)[:120]
    return f"{call.name} done ({body})."


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
            reply = " ".join(_summary(c) for c in turn.calls)
            out.append(turn.model_copy(update={"user_message": message, "assistant_message": reply}))
        return out
