"""Messenger role: writes user and assistant messages after the calls are fixed; rule version uses templates."""
from __future__ import annotations

import random
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from sap.agents.composer import ahead_note, compose_message, is_statement
from sap.alternation import expand_all
from sap.agents.requests import (
    Wording,
    conveyed_arguments,
    found_reference,
    found_words,
    plan_phrase,
    history_reference,
    plural,
    request_phrase,
    said_value,
)
from sap.agents.replies import assistant_reply, names_person
from sap.model import Selector, Tag, ToolCall, ToolSpec, Turn, key_param
from sap.provenance.checks import mentions as mentions_value
from sap.provenance.phrasebook import PLACEHOLDER, phrase_book, placeholders
from sap.provenance.selectors import ordinal, place_name
from sap.text import describe_value, humanize, join_words, result_noun, words_of

_REVEAL_ONE = expand_all([
    "[Oh|Sorry|Ah|Oops|Right|Of course|My bad|Good point], [it's|that's|it should be|that'd be] {v}.", "The {n} is {v}.",
    "It's {v}[| by the way].", "Sorry, I should have said: {v}.", "[Use|Go with|Make it|Try] {v}[| please| for that].",
    "{v}, please.", "The one I [want|mean|have in mind] is {v}.", "[Oops|Whoops|Sorry], forgot [that|to say]: {v}.",
    "{v} is the one[| I meant| I want].", "Should be {v}.", "Let's go with {v} for the {n}.",
    "For the {n}, [use|take|go with] {v}.", "[I meant|I'm after|I want] {v}[| for the {n}]."])
_NAMED = ["I'm {v}", "I'm {v}", "my name is {v}", "this is {v}", "the name's {v}", "{v} here", "it's {v} speaking"]
_OWN = ["my {n} is {v}", "my {n} is {v}", "{v} is my {n}", "the {n} on my account is {v}", "my {n} should be {v}",
        "you'll find my {n} is {v}"]
_GIVEN = ["the {n} is {v}", "the {n} should be {v}", "the {n} to use is {v}", "take {v} as the {n}"]
_WHICH = expand_all([
    "[The one I mean|The one I'm after|The one I want|What I have in mind] is {r}.",
    "I'm [talking about|thinking of|referring to|after] {r}.", "It's {r}[| I mean].", "I mean {r}.",
    "[Specifically|To be specific|To be clear|Just to be clear], [I mean|it's|that's] {r}."])
_LATER = expand_all([
    "[Later on|Down the line|At some point|A bit later|Once we get there|After that][,|] I'll [also |]"
    "[want|need|ask] you to {p}.",
    "[Heads up|Just so you know|Fair warning|Also|By the way]: [later|at some point|after this] "
    "I'll [want|need] you to {p}.", "I'm [planning|going] to have you {p} [later|at some point|down the line|after this].",
    "[The|My] plan is for you to {p} [later|after that|at some point].",
    "[Still to come|Coming up later|Also on my list|Later today|Further down my list|Next on the agenda]: {p}.",
    "[Eventually|Before we're done|Before the end of this|Sooner or later], [we'll|you'll] [need|have] to {p}.",
    "There's [one more|another] [job|task|thing] [coming|after this|for later]: {p}.", "Remind me that we still "
    "[need|have] to {p}.", "[Once this is sorted|When this is out of the way|After all that], [the next job|the plan]"
    " is to {p}.", "[Down the line|Later], I'll [also |]want you to {p}.", "I'll [also |]want you to {p} [at some point|"
    "later on|after this]."])
_FIRST = expand_all([
    "You [may|might|will probably|will likely] [need|have] to {p} first.", "[Go ahead and|Feel free to|Remember to|Be sure to] "
    "{p} first.", "{P} first [if needed|if you have to|if that's required|if necessary]."])
_REVEAL_MANY = expand_all([
    "[Sorry|Good catch|My mistake|Whoops|Oh, right|Of course|Ah yes|Here you go|Right, so|Sure][ -|:|,] {x}.",
    "[I forgot to say|I should have mentioned|I left that out]: {x}."])


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
    marker: Literal["NEW", "FROM_HISTORY", "FROM_CONFIG", "FALLBACK", "FOUND_BY_ASSISTANT"]
    verbatim: bool  # stated word for word (new, config) or only referred to (history, found by the assistant)
    fallback_from: Tag | None = None
    source: tuple[int, int] | None = None  # (turn, call) of the producing result for history values
    selector: Selector | None = None  # how the reference singles out its value among several
    path: str | None = None  # where in the producing result a history value sits
    place: str | None = None  # the city a referred-to place id is the place of, said instead ("Berlin")

    def label(self) -> str:
        """The marker as written in a must-mention list: [NEW], [FROM_HISTORY], [FROM_CONFIG], [FALLBACK from X]."""
        if self.marker == "FALLBACK":
            return f"[FALLBACK from {self.fallback_from.value if self.fallback_from else '?'}]"
        return f"[{self.marker}]"


def must_mention(call: ToolCall, found: Collection[tuple[int, int]] = ()) -> list[Mention]:
    """The call's must-mention list, one entry per argument, in argument order; a value from the result of a call
    at a place in `found` (a prerequisite of the same goal turn) is FOUND_BY_ASSISTANT: the user never saw it, so
    they describe it from their side ("my pending order") unless its selector has them name it."""
    out = []
    for name in provenance_keys(call):
        prov, value = call.args_prov[name], call.arg_value(name)
        used = prov.effective_tag()
        verbatim = used in (Tag.self_create, Tag.initial_state)
        source = (prov.turn, prov.call) if used == Tag.prev_output else None
        if prov.tag == Tag.fallback:
            marker = "FALLBACK"
        elif source in found and not (prov.selector is not None and prov.selector.named):
            marker = "FOUND_BY_ASSISTANT"
        else:
            marker = {Tag.self_create: "NEW", Tag.initial_state: "FROM_CONFIG"}.get(prov.tag, "FROM_HISTORY")
        out.append(Mention(name, value, marker, verbatim, prov.fallback_from, source,
                           None if verbatim else prov.selector, prov.path if source is not None else None))
    return out


def provenance_keys(call: ToolCall) -> list[str]:
    """The call's provenance keys in argument order, an argument given field by field as its item keys."""
    return [k for name in call.args_exec for k in ([name] if name in call.args_prov else
                                                   [k for k in call.args_prov if key_param(k) == name])]


def output_choice(sel: Selector, value: Any) -> str:
    """In words, which element of a listing a history reference means: "the order whose status is "delivered"",
    "the second file listed", "the file name "a.txt""; empty if the selector only says which result."""
    if sel.field is not None and isinstance(sel.value, list):  # several elements: "the items whose name is ..."
        return f"the {plural(sel.noun)} whose {humanize(sel.field)} is {describe_value(sel.value)}"
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
        referred = referred_results(turns)
        referred_fields = referred_keys(turns)
        results = {(t.index, i): c.result for t in turns for i, c in enumerate(t.calls)}
        called = {c.name for t in turns for c in t.calls}  # an intro about a task opens only a dialogue doing it
        for turn in turns:
            if not turn.calls:  # a clarification or hand-off turn keeps the messages its writer gave it
                out.append(turn)
                continue
            requests, facts, which, preparations, found = [], [], [], [], found_here(turn)
            named = found_words(turn.calls, turn.prerequisites, turn.index, wording,
                                {i: withheld.get((turn.index, i), frozenset()) for i in turn.prerequisites})
            hidden = [c.args_exec.get(p) for i, c in enumerate(turn.calls)
                      for p in withheld.get((turn.index, i), ())]  # a place named by its city would say them
            for i, call in enumerate(turn.calls):
                left_out = withheld.get((turn.index, i), frozenset())
                mentions = [replace(m, place=place) if m.source is not None and (place := place_name(
                    results.get(m.source), m.path, m.selector)) and not any(mentions_value(place, v) for v in hidden)
                    else m for m in must_mention(call, found)]
                if i in turn.prerequisites:  # the assistant works it out: the user only says what it needs of them
                    said = set(placeholders(wording.phrases(call.name).found or "")) if (turn.index, i) in named \
                        else set()  # named with what it finds: "the zip code of Rivermist" says the city
                    words = user_facts(call, [m for m in mentions if m.param not in left_out | said], wording,
                                       turn.index, rng)
                    facts += words.facts
                    which += words.which
                    preparations += [words.preparation] if words.preparation else []
                    continue
                args = conveyed_arguments(call, left_out, wording, mentions, turn.index, rng, named)
                phrases = wording.phrases(call.name)
                names_find = any(m.source in named for m in mentions if m.marker == "FOUND_BY_ASSISTANT")
                if turn.prerequisites and i == len(turn.calls) - 1 and phrases.goals and not names_find and \
                        not phrases.matching(call.args_exec):  # a goal would lose what a conditional wording says
                    phrases = replace(phrases, requests=phrases.goals, when=())
                requests.append(request_phrase(phrases, specs[call.name], call, args, rng))
            after = [rng.choice(_WHICH).format(r=join_words(which))] if which else []
            if preparations:
                steps = join_words(preparations)
                after.append(rng.choice(_FIRST).format(p=steps, P=steps[:1].upper() + steps[1:]))
            ahead = [announcement(v, turns, wording, turn, rng) for v in virtual if v["turn"] == turn.index]
            first = not any(t.user_message for t in out)  # greetings and intros open the dialogue only
            intros, weights = wording.book.intros_for(called) if wording.book else ((), ())
            message = compose_message(requests, ahead, first, intros, rng, facts, after, weights)
            unseen = [i for i in turn.prerequisites if (turn.index, i) not in referred]  # told only if used later
            known = any(names_person(c) for t in out for c in t.calls if c.ok)  # an earlier turn found the account
            reply = assistant_reply(turn.calls, specs, rng, unseen, account_known=known,
                                    referred={i: keys for (t, i), keys in referred_fields.items() if t == turn.index},
                                    asked=message)
            out.append(turn.model_copy(update={"user_message": message, "assistant_message": reply}))
        return out


def referred_results(turns: list[Turn]) -> set[tuple[int, int]]:
    """The (turn, call) places whose results a later turn's arguments refer to (P_o): the user saw those."""
    return {(prov.turn, prov.call) for turn in turns for call in turn.calls for prov in call.args_prov.values()
            if prov.effective_tag() == Tag.prev_output and prov.turn is not None and prov.turn < turn.index}


def referred_keys(turns: list[Turn]) -> dict[tuple[int, int], set[str]]:
    """(turn, call) -> the top-level fields of its result that a later turn's arguments refer to ("flights" for
    `$.flights[1].flight_number`): what its reply must have shown."""
    out: dict[tuple[int, int], set[str]] = {}
    for turn in turns:
        for call in turn.calls:
            for prov in call.args_prov.values():
                if prov.effective_tag() == Tag.prev_output and prov.turn is not None and prov.turn < turn.index and \
                        (key := re.match(r"\$\.([A-Za-z_][\w-]*)", prov.path or "")):
                    out.setdefault((prov.turn, prov.call), set()).add(key.group(1))
    return out


def found_here(turn: Turn) -> frozenset[tuple[int, int]]:
    """The (turn, call) places of a goal turn's prerequisites: results the assistant finds itself in that turn."""
    return frozenset((turn.index, i) for i in turn.prerequisites)


@dataclass(frozen=True)
class PrerequisiteWords:
    """What the user says for one prerequisite: own facts and new values, which thing it is about (references),
    and new values a conditional wording conveys as a preparation ("lock all the doors")."""

    facts: list[str]
    which: list[str]
    preparation: str | None


def user_facts(call: ToolCall, mentions: Sequence[Mention], wording: Wording, turn: int,
               rng: random.Random) -> PrerequisiteWords:
    """What the user says for a prerequisite the assistant works out (never a request for it): their own facts
    and new values ("I'm Yusuf Rossi", "my zip code is 19122"), which one they mean where a reference is one
    among several or a thing from an earlier turn ("my order whose status is pending", "the file you listed
    before"), and a preparation; the message says the references and preparations after the request."""
    said = {m.param: m for m in mentions if m.verbatim or (m.selector is not None and m.selector.named)}
    out = []
    if {"first_name", "last_name"} <= said.keys():
        name = f"{said_value(said.pop('first_name').value)} {said_value(said.pop('last_name').value)}"
        out.append(rng.choice(_NAMED).format(v=name))
    prepared = preparation(call, said, wording, rng)
    if prepared:
        said = {k: m for k, m in said.items() if k not in prepared[1]}
    for m in said.values():
        own = m.marker == "FROM_CONFIG"  # the user's own facts: "my email address is ..."
        told = [t for t in wording.phrases(call.name).stated if placeholders(t) == [m.param]] if own else []
        if told:  # the tool's own way to say it ("the files are in my logs folder")
            out.append(rng.choice(told).replace("{" + m.param + "}", said_value(m.value)))
            continue
        pool = (_OWN if own else _GIVEN) if isinstance(m.value, str) else _OWN[:2] if own else _GIVEN[:2]
        out.append(rng.choice(pool).format(n=wording.noun(call.name, m.param), v=said_value(m.value)))
        # a number or flag leads no sentence ("0 is my tweet"): "my tweet is 0"
    which = []
    for m in mentions:  # which one they mean: one among several, or a thing from an earlier turn the step reads
        if m.param not in said and not m.verbatim and (m.selector is not None or m.marker == "FROM_HISTORY"):
            noun = wording.noun(call.name, m.param)
            if m.place is not None:  # a place said by its city: "the departure location is London"
                out.append(rng.choice(_GIVEN[:2]).format(n=noun, v=m.place))
                continue
            which.append(found_reference(noun, m.selector, m.value, rng) if m.marker == "FOUND_BY_ASSISTANT" else
                         history_reference(noun, m.selector, m.value, m.source, turn, rng))
    return PrerequisiteWords(out, which, prepared[0] if prepared else None)


def preparation(call: ToolCall, said: Mapping[str, Mention], wording: Wording,
                rng: random.Random) -> tuple[str, set[str]] | None:
    """A prerequisite's new values as the user conveys them in passing, by the most specific conditional wording
    of its tool that its arguments meet ("lock all the doors", "press the brake pedal all the way down"), with
    the parameters it covers; None when no such wording covers a new value. Only imperative wordings serve: the
    preparation is said as "go ahead and {p} first", where "I want the listing here" does not fit."""
    new = {k for k, m in said.items() if m.marker != "FROM_CONFIG"}
    entries = [c for c in wording.phrases(call.name).matching(call.args_exec) if set(c.cond) & new]
    top = max((len(c.cond) for c in entries), default=0)
    options = [(text, set(c.cond) | set(placeholders(text))) for c in entries if len(c.cond) == top
               for text in c.requests if set(placeholders(text)) <= said.keys() and not is_statement(text)]
    if not options:
        return None
    phrases = wording.phrases(call.name)
    text, covered = rng.choices(options, weights=[phrases.weight(t) for t, _ in options])[0]
    return PLACEHOLDER.sub(lambda m: said_value(call.args_exec[m.group(1)]), text), covered


def announcement(v: Mapping[str, Any], turns: Sequence[Turn], wording: Wording, turn: Turn,
                 rng: random.Random) -> str:
    """A value stated ahead of its use, as the plan it is part of ("Later on I'll also want you to move a file to
    schedule-q2.csv."), from the using call's own phrase; else as a note ("the destination will end up being
    schedule-q2.csv")."""
    used = next((t for t in turns if t.index == v.get("used_at")), None)
    call = next((c for c in used.calls if c.args_exec.get(v["param"]) == v["value"]), None) if used else None
    if call is not None:
        phrase = plan_phrase(wording.phrases(call.name), call, v["param"],
                             lambda p: wording.noun(call.name, p), rng)
        if phrase:
            return rng.choice(_LATER).format(p=phrase)
    return ahead_note(wording_noun(wording, turn, v["param"]), said_value(v["value"]), rng)


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
