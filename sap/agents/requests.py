"""One call's request in the user's words: a phrase from the toolset's phrase book (or the tool's docstring as an
imperative), new and config values woven in verbatim, history values referred to in plain words (with the selector
when one among several), withheld values left out as a natural underspecified request."""
from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sap.agents.judge import content_words, stem
from sap.alternation import expand_all
from sap.provenance.paraphrase import vary
from sap.model import Selector, Tag, ToolCall, ToolSpec, item_key, key_field, split_item_key
from sap.provenance.phrasebook import DETERMINER, PLACEHOLDER, PhraseBook, ToolPhrases, placeholders
from sap.provenance.places import address_part
from sap.provenance.fields import singular
from sap.provenance.selectors import ordinal
from sap.provenance.generic_phrases import generic_phrases, parameter_noun
from sap.text import article, describe_value, join_words, plural, words_of

_STATUS = r"(?:pending|delivered|processed|cancelled|current|existing|active|upcoming)"  # a state word before a noun
_PREPOSITION = r"(?:on|at|for|to|into|in|from|by|with|until|under|onto|as|of|about|called|named)"
# Reference pools are written with [a|b] alternations (sap/alternation.py), read in all their expansions. Only
# the pools for a latest selector hold recency words ("latest", "most recent", "last"): a reader and `sap audit`
# take those as which one is meant.
_SAME_TURN = expand_all([
    "that {n}", "the {n} that [turns|comes|shows] up", "the {n} you get [from that|out of that|back]", "the resulting {n}",
    "whatever {n} [comes back|you get|it gives you|turns up]", "the {n} it [shows|gives you|returns|reports]",
    "the {n} that comes out of it", "the {n} you end up with", "the {n} from that step", "whichever {n} it gives you",
    "the {n} [you find|you see|that appears] there"])
_LAST_TURN = expand_all([
    "the {n} you [just |][found|showed me|gave me|mentioned|pulled up|listed|reported|came back with|turned up|dug up]",
    "that [same |]{n}", "this {n}", "the {n} [in|from] your [reply|answer|message][| just now| a moment ago]",
    "the {n} we [just |][looked at|got|saw|found]", "the {n} from a [moment|minute|second] ago",
    "the {n} you [mentioned|showed|named] [just now|a moment ago|right there|above]"])
_EARLIER = expand_all([
    "the {n} you [found|gave me|showed me|looked up|dug up|pointed out|came up with] [earlier|before|a while ago|earlier on]",
    "the {n} from [before|earlier|earlier on|a while back|further up]", "that {n} from [earlier|before|a bit ago]",
    "the {n} we [saw|found|looked at|came across] [before|earlier|a bit ago]", "the earlier {n}",
    "the {n} that came up [earlier|before|earlier on]", "the {n} from one of your earlier [answers|replies]"])
_STATED = expand_all([
    "the {n} I [mentioned|gave you|told you|said|shared|noted|flagged|passed you|brought up] [earlier|before|a bit ago]",
    "the same {n} as before", "that {n} I told you about", "my {n} from [before|earlier]",
    "the {n} from my earlier message", "the {n} I [already |]gave you", "the {n} I brought up"])
_STATED_LATEST = expand_all([
    "the {n} I [mentioned|gave you|told you|said] last", "the [most recent|latest] {n} I [gave you|mentioned|told you]",
    "the {n} I gave you most recently", "the last {n} I [told you|gave you|mentioned]"])
_STATED_NTH = expand_all(["the {o} {n} I [mentioned|gave you|told you about|listed|named]"])
_EXTRA_LEADS = [", with {x}", ", using {x}", "; use {x}", " - {x}", ", and go with {x}", "; I want {x}",
                ", taking {x}", ", going with {x}"]


_SENTENCE = re.compile(r"[A-Z][\w']*(?: \S+)* [a-z][\w']*(?: \S+)*")  # "Meeting notes are attached", not "New York"


def said_value(value: Any) -> str:
    """A value as the user writes it, verbatim for the code check: short strings bare, longer text and a short
    sentence ("Meeting notes are attached": post it, not 'post Meeting notes are attached as a tweet') quoted (on
    one line: a user does not paste line breaks into a request), lists as "a, b and c", numbers and booleans as JSON
    writes them, objects as their fields in words."""
    if isinstance(value, str):  # several lines on one line: the check compares text whitespace-insensitively
        words = value.split()
        quoted = len(words) >= 5 or "\n" in value or not value.strip() or \
            (len(words) >= 3 and _SENTENCE.fullmatch(" ".join(words)) is not None)
        return f'"{" ".join(words)}"' if quoted else value
    if isinstance(value, list):
        return join_words([said_value(v) for v in value]) if value else "none"
    if isinstance(value, dict):
        return describe_value(value)
    return json.dumps(value)


@dataclass(frozen=True)
class Wording:
    """A toolset's wording: its phrase book (None: the generic wording from docstrings) and its tool specs."""

    specs: Mapping[str, ToolSpec]
    book: PhraseBook | None

    def phrases(self, tool: str) -> ToolPhrases:
        """The phrase-book entry of a tool, or its generic phrases."""
        if self.book is not None and tool in self.book.tools:
            return self.book.tools[tool]
        return generic_phrases(self.specs[tool], self.specs)

    def noun(self, tool: str, param: str) -> str:
        """Plain words for a parameter of a tool (for one field of an array argument's items, the field's words)."""
        if split_item_key(param):
            field_name = key_field(param)
            return (self.phrases(tool).nouns.get(field_name) if tool in self.specs else None) or words_of(field_name)
        if tool not in self.specs:
            return words_of(param)
        return self.phrases(tool).nouns.get(param) or parameter_noun(self.specs[tool], param)


_WHERE = expand_all([
    "[in|on] [that|the|your] list", "in [the|those|your] results", "from [that|the|your] listing", "shown there",
    "you listed", "that came up", "[in|from] what you [found|pulled up|showed me]", "among [those|the] results",
    "in the rundown you gave", "you [turned up|came up with|dug up]", "[on|in] the list you [showed|gave] me", "there"])
_WHERE_LATEST = expand_all([
    "in the [latest|most recent|last] [list|results|listing|rundown]", "from the [latest|most recent|last] "
    "[lookup|listing|search]", "in your [latest|most recent|last] [results|list|answer]"])
_WITH = ["whose {f} is {v}", "with {f} {v}", "that has {f} {v}", "where the {f} is {v}", "with the {f} {v}",
         "showing {f} {v}", "listed with {f} {v}", "that shows {v} as its {f}", "marked {f} {v}", "with {v} as the {f}"]
_CALLED = ["called {v}", "named {v}", "called {v}"]  # a name field: "the item called Coffee Maker"
_NAME_FIELDS = {"name", "title", "product name", "item name", "full name"}


_PRICED = ["priced at {v}", "that costs {v}", "at {v}", "for {v}", "whose price is {v}", "going for {v}"]
_AMOUNT = ["with a {f} of {v}", "whose {f} is {v}", "with {v} as its {f}", "showing a {f} of {v}"]
_OPTION = ["in {v}", "in {v}", "that comes in {v}", "whose {f} is {v}", "with the {v} {f}"]
_MONEY_FIELD = re.compile(r"price|cost|total|amount|balance|fare|fee", re.I)


def criterion(sel: Selector, rng: random.Random) -> str:
    """A field selector in words: "whose status is pending", "called Coffee Maker" (never "marked name ..."), an
    amount as money ("priced at $72.66", "with a balance of $254.00")."""
    field = words_of(sel.field)
    if isinstance(sel.value, (int, float)) and not isinstance(sel.value, bool) and _MONEY_FIELD.search(sel.field) \
            and round(sel.value, 2) == sel.value:
        money = f"${sel.value:.2f}"  # no thousands separator: the code check finds the value's own digits in it
        return rng.choice(_PRICED if field.lower() == "price" else _AMOUNT).format(f=field, v=money)
    value = join_words([str(v) for v in sel.value]) if isinstance(sel.value, list) else sel.value
    if field.lower() in ("color", "colour", "size", "material", "style") and isinstance(sel.value, str):
        return rng.choice(_OPTION).format(f=field, v=value)  # "the variant in white"
    return rng.choice(_CALLED if field.lower() in _NAME_FIELDS else _WITH).format(f=field, v=value)


_LATEST = expand_all([
    "[from|in] the [most recent|latest] results", "from the [most recent|latest|last] [lookup|search]",
    "you [found|looked up|pulled up] last",
    "that came up last", "from your [latest|most recent|last] [answer|reply]"])


_VAGUE_HEADS = {"id", "number", "name", "value", "type", "level", "mode", "setting", "option", "amount", "list", "text"}


def short_noun(noun: str, heads: list[str], rng: random.Random) -> str:
    """Now and then a two-word noun by its head alone, as people shorten it ("the access token" -> "the token"),
    when no other argument of the call has that head and the head says what the thing is."""
    words = noun.split()
    if len(words) == 2 and heads.count(words[-1]) == 1 and words[-1].lower() not in _VAGUE_HEADS and rng.random() < 0.4:
        return words[-1]
    return noun


_ENDS = (frozenset({"origin", "departure", "source", "sender", "start"}),
         frozenset({"destination", "arrival", "target", "recipient", "receiver"}))  # the two ends of a trip or transfer


def _end_of(words: list[str]) -> int | None:
    """Which end of a trip or transfer some words name (0: where it starts, 1: where it goes), if exactly one."""
    ends = {i for i, end in enumerate(_ENDS) if end & set(words)}
    return ends.pop() if len(ends) == 1 else None


def source_noun(noun: str, path: str | None) -> str:
    """The noun a reference to a value uses: the parameter's, unless the field the value comes from is the other
    end of a trip or transfer: a flight's destination taken as a search's origin is "my destination" (from
    `$.destination.location_id`; "destination location" from `$.destination_location_id`), not "my departure
    location", which a reader finds at the flight's origin."""
    keys = re.findall(r"[A-Za-z_]\w*", path or "")
    if not keys:
        return noun
    last = words_of(keys[-1]).lower().split()
    parent = words_of(keys[-2]).lower().split() if len(keys) > 1 else []
    field = parent if _end_of(parent) is not None and _end_of(last) is None else last  # `destination.location_id`
    at, wanted = _end_of(field), _end_of(noun.lower().split())
    if at is None or wanted is None or at == wanted:
        return noun
    return " ".join(w for w in field if w != "id")


def reference_noun(noun: str) -> str:
    """A parameter's noun as a reference uses it: without an ordinal or contrast word that tells parameters apart
    ("first file" -> "file"), which would read as a position in the result."""
    return re.sub(r"^(?:first|second|third|other)\s+", "", noun)


def output_reference(noun: str, sel: Selector, value: Any, rng: random.Random) -> str:
    """A reference to one value among several of an earlier result, stating the selector: "the order whose status
    is pending", "the second file in that list", "the booking ID from the latest results"."""
    generic = sel.noun in ("entry", "result", "match", "item")
    same = generic or sel.noun in noun or noun in sel.noun
    if generic and isinstance(value, list) and len(value) == 1:  # one listed entry as an array's only item
        noun = singular(noun)
    thing = plural(sel.noun) if isinstance(sel.value, list) else noun if generic else sel.noun
    head = rng.choice(["the {t}"] if same and isinstance(sel.value, list) else
                      ["the {t}", "the {t}", "that {t}", "whichever {t}"] if same else
                      ["the {n} of the {t}", "the {n} from the {t}", "the {n} for the {t}"])
    head = head.format(n=noun, t="{t}")
    if sel.field is not None:
        core = head.format(t=thing) + " " + criterion(sel, rng)
        return core + (" " + rng.choice(_WHERE_LATEST) if sel.latest else "")
    if sel.position is not None:
        nth = ordinal(sel.position)
        where = rng.choice(_WHERE_LATEST if sel.latest else _WHERE)
        return head.replace("{t}", f"{nth} {thing}").replace("whichever ", "the ") + " " + where
    return f"the {noun} " + rng.choice(_LATEST)


_FOUND = expand_all([
    "you [found|showed me|pulled up|got|turned up|mentioned|gave me|looked up|came back with|listed|dug up|reported|"
    "came across|brought up]", "that came up", "we [saw|got back|found]",
    "from [your answer|the results|that lookup|your reply|that search]", "in your [reply|answer]"])
_WHEN = {"same": ["", " there", " in that step", " from that"],
         "just": ["", " just now", " a moment ago", " right there", " above"],
         "earlier": [" earlier", " before", " a while ago", " earlier on", " the first time"]}


def history_reference(noun: str, sel: Selector | None, value: Any, source: tuple[int, int] | None, turn: int,
                      rng: random.Random) -> str:
    """How the user refers to a value from an earlier result (`source`) or one they stated before (no source)."""
    if source is not None:
        if sel is not None:
            return output_reference(noun, sel, value, rng)
        when = "same" if source[0] == turn else "just" if source[0] == turn - 1 else "earlier"
        if when == "same":
            return rng.choice(_SAME_TURN).format(n=noun)
        if rng.random() < 0.3:
            return rng.choice(_LAST_TURN if when == "just" else _EARLIER).format(n=noun)
        that = "those" if isinstance(value, list) and len(value) > 1 else "that"
        return f"{rng.choice(['the', 'the', that])} {noun} {rng.choice(_FOUND)}{rng.choice(_WHEN[when])}"
    if sel is None:
        return rng.choice(_STATED).format(n=noun)
    if sel.latest:
        return rng.choice(_STATED_LATEST).format(n=noun)
    return rng.choice(_STATED_NTH).format(n=noun, o=ordinal(sel.position or 1))


_MINE = ["my {n}", "my {n}", "my {n}", "the {n} on file"]
_MINE_HERE = ["my {n}", "the {n} in here", "the {n} here"]  # for files and folders
_SOMEWHERE = ["{b}", "{b}", "{b}, wherever it is", "{b} (it's somewhere in here)"]  # a found path's name
# a latest selector from the user's side, each with a recency word a reader takes as "which one"
_MINE_NOW = ["my latest {n}", "the latest {n} on file", "my {n} as the most recent lookup shows it"]


def found_reference(noun: str, sel: Selector | None, value: Any, rng: random.Random) -> str:
    """How the user refers to a value the assistant finds itself in the same turn, from the user's side ("my
    order", "my order whose status is pending"): never as something the assistant already showed them."""
    if sel is not None and sel.latest and sel.field is None:  # earlier lookups showed another value: as it is now
        return rng.choice(_MINE_NOW).format(n=noun)
    if sel is None or sel.field is None:
        here = re.search(r"\b(?:file|folder|directory|document)$", noun)
        if here and sel is None and isinstance(value, str) and "/" in value.strip("/"):  # "delete README.md": the
            return rng.choice(_SOMEWHERE).format(n=noun, b=value.rstrip("/").rsplit("/", 1)[1])  # user knows the
        return rng.choice(_MINE_HERE if here else _MINE).format(n=noun)  # name, the assistant finds where it is
    thing = noun if sel.noun in ("entry", "result") else plural(sel.noun) if isinstance(sel.value, list) else sel.noun
    now = "latest " if sel.latest else ""
    whose = "" if thing in noun or noun in thing else f"the {noun} of "  # "the origin airport of my flight ..."
    return f"{whose}my {now}{thing} " + criterion(sel, rng)


_UNIT = re.compile(r"\s*(?:%|\s(?:degrees(?:\s+(?:Fahrenheit|Celsius))?|Fahrenheit|Celsius|miles|mph|gallons|liters|"
                   r"percent|dollars|USD|shares|meters|digits)\b)")
_WITH_UNIT = rf"(?:{_UNIT.pattern}(?:\s+of\s+[a-z]+)?)?"  # a dropped slot's unit ("gallons of fuel") goes too


_TRAILING = r"(?:\s*[,;]\s*[^,;:]*)?:\s*{}\s*$"  # "..., here's the issue in brief: {summary}" at a phrase's end


def _droppable(text: str, param: str) -> bool:
    """Whether a withheld slot sits after a preposition (dropped with it), right after the opening verb, or last after
    a colon."""
    slot = re.escape("{" + param + "}")
    return bool(re.search(rf"\b{_PREPOSITION}\s+(?:{DETERMINER}\s+)?{slot}", text)
                or re.match(rf"^\S+(?:\s+(?:me|up|out))?\s+{slot}", text) or re.search(_TRAILING.format(slot), text))


def _leave_out(text: str, param: str, noun: str, rng: random.Random) -> str:
    """The phrase with a withheld slot left out: "book a flight on {date}" -> "book a flight", "fill the tank with
    {amount} gallons of fuel" -> "fill the tank" (its unit goes with it), "move {file} to x" -> "move a file to x"."""
    slot = re.escape("{" + param + "}")
    last = noun.split()[-1] if noun.split() else ""
    counted = rf"(?:\s+(?:{re.escape(last)}|{re.escape(plural(last))})\b)?" if last else ""  # "for {n} guests"
    dropped = re.sub(rf"\s*,?\s*\b{_PREPOSITION}\s+(?:{DETERMINER}\s+)?{slot}{_WITH_UNIT}{counted}", "", text,
                     count=1)
    if dropped == text:  # a value said last after a colon, with the clause that leads to it: "get me a human agent"
        dropped = re.sub(_TRAILING.format(slot), "", text, count=1)
    if dropped == text:  # one part of a run of values ("{city}, {state} {zip}", ", zip {zip}"): left out with its comma
        dropped = re.sub(rf",\s*(?:[A-Za-z]+\s+){{0,2}}{slot}(?=\s*(?:,|\{{|$))|{slot}\s*,?\s*(?=\{{)|(?<=\}})\s+{slot}",
                         "", text, count=1)
    if dropped != text:
        return dropped
    plural_noun = re.search(r"[^s]s$", noun.split()[-1]) is not None if noun.split() else False  # "users"
    vague = f"some {noun}" if plural_noun else rng.choice([article(noun), f"one of the {plural(noun)}"])
    return re.sub(rf"(?:\b{DETERMINER}\s+)?{slot}", vague, text, count=1)


def plan_phrase(entry: ToolPhrases, call: ToolCall, param: str, wording_noun: Callable[[str], str],
                rng: random.Random) -> str | None:
    """A later call as the user announces it ahead with one value ("move a file to schedule-q2.csv"): a plain
    request of its tool with `param`'s slot said verbatim and each other slot dropped with its preposition or
    said as "a file"; None if no request has that slot, or another slot names no thing ("the password is one of
    the passwords" is no plan anyone states)."""
    pool = [r for r in entry.requests if "{" + param + "}" in r and re.match(r"[a-z]", r)
            and not re.match(r"(?:please|i|let|can|could)\b", r)]
    if not pool or param not in call.args_exec:
        return None
    text = rng.choices(pool, weights=[entry.weight(r) for r in pool])[0]
    for other in placeholders(text):
        if other == param:
            continue
        slot = re.escape("{" + other + "}")
        dropped = re.sub(rf"\s*,?\s*\b{_PREPOSITION}\s+(?:{DETERMINER}\s+)?{slot}{_WITH_UNIT}", "", text, count=1)
        if dropped != text:
            text = dropped
            continue
        noun = wording_noun(other)
        head = noun.split()[-1]
        if head not in _THINGS:
            return None
        text = re.sub(rf"(?:\b{DETERMINER}\s+(?:[a-z-]+\s+)?)?{slot}", article(noun), text, count=1)
    return text.replace("{" + param + "}", said_value(call.args_exec[param]))


_THINGS = {"file", "folder", "directory", "document", "item", "product", "order", "message", "ticket", "booking",
           "reservation", "flight", "hotel", "stock", "tweet", "post", "contact", "card"}  # a slot said as "a file"


@dataclass(frozen=True)
class Argument:
    """One argument as the user conveys it: its words (a verbatim value or a reference), or withheld."""

    param: str
    noun: str
    words: str
    verbatim: bool
    withheld: bool
    value: Any
    found: bool = False  # a value the assistant finds itself in this turn: the phrase's own noun names it
    joined: bool = False  # an address part whose words are the address reference of an earlier part
    named: bool = False  # a found value named by what found it ("the nearest tire shop"): its words stay


_SAME_THING = {"folder": ("directory",), "directory": ("folder",), "file": ("document",),
               "item": ("variant",)}  # a phrase's word for a
# noun that a reference to it replaces ("make a directory {dir_name}" -> "make the folder I mentioned")

def _between(first: str, second: str, args: Mapping[str, Argument]) -> str:
    """What joins two side-by-side slots: a space, a comma beside a reference, "of" from a stated number to the
    reference that is its unit."""
    if not any(n in args and not args[n].verbatim for n in (first, second)):
        return " "
    number = first in args and args[first].verbatim and isinstance(args[first].value, (int, float)) \
        and not isinstance(args[first].value, bool)
    return " of " if number and second in args and not args[second].verbatim else ", "


def _fill(text: str, args: Mapping[str, Argument], rng: random.Random) -> str:
    """A phrase with its slots filled (withheld ones, and any the call does not have, left out); side-by-side
    slots of which one is a reference get a comma between them, or "of" after a number whose unit the reference
    is ("convert 5.5 of the source currency I gave you", was "5.5, the source currency"); a unit after a slot
    filled by a reference goes ("drive {distance} miles" -> "drive the distance you found")."""
    for name, a in args.items():
        if not a.verbatim:
            text = re.sub(re.escape("{" + name + "}") + _UNIT.pattern, "{" + name + "}", text)
    text = re.sub(r"\{(\w+)\}\s+(?=\{(\w+)\})", lambda m: m.group(0).rstrip() + _between(*m.groups(), args), text)
    for name in placeholders(text):
        if name in args and args[name].joined:  # said by the address reference before it
            text = re.sub(rf"(?:\s*,\s*|\s+in\s+|\s+)?\{{{name}\}}", "", text, count=1)
            continue
        if name not in args or args[name].withheld:
            text = _leave_out(text, name, args[name].noun if name in args else words_of(name), rng)
        elif not args[name].verbatim:  # "the pending order {x}" with a reference: "the order you just found"
            slot = re.escape("{" + name + "}")
            text = re.sub(rf"\bone of\s+(?={slot})", "", text, count=1)  # "add one of {x}": not "one of the item"
            text = re.sub(rf"\b(?:called|named|titled|entitled|saying)\s+{slot}", "with {" + name + "}", text, count=1)
            # "a ticket titled {x}" with a reference: "a ticket with that title", not "titled that title"
            head = args[name].noun.split()[-1]
            noun = "(?:" + "|".join(re.escape(n) for n in sorted({args[name].noun, head, *_SAME_THING.get(head, ())})) + ")"
            own = "|".join(re.escape(w) for w in args[name].noun.split() if len(w) >= 3)
            if own:  # a word of the noun after the slot ("{travel_class} class"): the reference says it
                text = re.sub(rf"({slot})\s+(?:{own})\b", r"\1", text, count=1)
            named = (rf"\b(?:the|a|an|my)\s+(?:[a-z-]+\s+)?{noun}\s+{slot}",
                     rf"\b(?:the|a|an|my)\s+{slot}\s+(?:folder|directory|file|{noun})\b", rf"\b{noun}\s+{slot}")
            described = not args[name].named and re.match(r"(?:my|the|that)\b", args[name].words)  # not a name
            if args[name].found and described and any(re.search(m, text) for m in named[:2]):  # "cancel my
                # pending order {x}": "cancel my pending order"
                text = re.sub(rf"\s*{slot}", "", text, count=1)  # the phrase's noun says it from the user's side
                continue
            if args[name].found and described and re.search(named[2], text):  # "need booking {x}": "need my booking";
                # "on pending order {x}": "on my pending order"
                text = re.sub(rf"\b((?:{_STATUS}\s+)?{noun})\s+{slot}", r"my \1", text, count=1)
                continue
            for merged in (*named, rf"\b(?:the|my)\s+[a-z-]+\s+{slot}", rf"\b(?:the|a|an|my)\s+{slot}"):
                text, done = re.subn(merged, lambda _, keep="{" + name + "}": keep, text, count=1)
                if done:
                    break
            else:  # a word that starts the noun ("user {username}"): the reference says it
                compact = args[name].noun.replace(" ", "")
                text = re.sub(rf"(?:\b(?:the|a|an|my)\s+(?:[a-z-]+\s+)?)?\b([a-z]{{3,}})\s+{slot}",
                              lambda m, keep="{" + name + "}": keep if compact.startswith(m.group(1)) else m.group(0),
                              text, count=1)
    return _singular_after_one(PLACEHOLDER.sub(lambda m: args[m.group(1)].words, text))


_ONE_PLURAL = re.compile(r"(?<![\d.,$])\b1 ([a-z]{2,}[a-rt-z]s)\b(?!['-])")
_NOT_PLURAL = frozenset({"series", "species", "news", "lens", "canvas"})  # what the pattern takes for plurals


def _singular_after_one(text: str) -> str:
    """A filled phrase with a count of one said with its noun in the singular ("pick up 1 share", not "1 shares")."""
    return _ONE_PLURAL.sub(lambda m: m.group(0) if m.group(1) in _NOT_PLURAL else f"1 {singular(m.group(1))}", text)


def _extra(a: Argument, rng: random.Random) -> str:
    """An argument the chosen phrase does not cover, in words."""
    if not a.verbatim:
        return a.words
    if isinstance(a.value, (bool, int, float)):
        return rng.choice([f"{a.noun} set to {a.words}", f"the {a.noun} at {a.words}"])
    return rng.choice([f"the {a.noun} {a.words}", f"{a.words} as the {a.noun}"])


def refers_to_task(text: str, spec: ToolSpec) -> bool:
    """Whether a phrase holds a content word of the tool's description (what the rule judge looks for)."""
    return bool(content_words(spec) & {stem(w) for w in re.findall(r"[a-z]+", text.lower())})


def request_phrase(entry: ToolPhrases, spec: ToolSpec, call: ToolCall, args: Mapping[str, Argument],
                   rng: random.Random) -> str:
    """The call's request: a phrase conveying its arguments (a conditional one when the arguments meet its
    condition), with the arguments it does not cover added in words (not those the assistant finds itself in a
    goal turn); withheld values never appear."""
    withheld = [a.param for a in args.values() if a.withheld]  # a wording that conveys a withheld value is out
    pool = [(r, c.cond) for c in entry.matching(call.args_exec) if not set(c.cond) & set(withheld)
            for r in c.requests] or [(r, {}) for r in entry.requests]
    pool = [p for p in pool if set(placeholders(p[0])) <= set(args)] or \
        [p for p in pool if not placeholders(p[0])] or pool
    pool = [p for p in pool if all(_droppable(p[0], w) or "{" + w + "}" not in p[0] for w in withheld)] or pool
    stated = {a.param for a in args.values() if not a.withheld}
    most = max(len(set(placeholders(p[0])) & stated) for p in pool)  # the phrases that weave in the most values
    pool = [p for p in pool if len(set(placeholders(p[0])) & stated) == most]
    text, cond = rng.choices(pool, weights=[entry.weight(p[0]) for p in pool])[0]  # an entry, then its reading
    if entry.written:  # a docstring's words are not varied (the code check recognises a varied conditional phrase)
        varied = vary(text, rng)
        text = varied if refers_to_task(varied, spec) else text
    covered = set(placeholders(text)) | set(cond)
    extras = [_extra(a, rng) for a in args.values()
              if a.param not in covered and not a.withheld and (a.named or not a.found) and not a.joined]
    if extras:
        text += rng.choice(_EXTRA_LEADS).format(x=join_words(extras))
    return _fill(text, args, rng)


def _whole_addresses(mention_list: list[Any]) -> dict[str, str]:
    """Address parts referred to, not stated, that all come from one earlier result with one selector (two or more
    parts, none withheld-able on its own): part -> the first such part, whose words name the whole address."""
    groups: dict[str, list[Any]] = {}
    for m in mention_list:
        if address_part(m.param) and not m.verbatim and m.source is not None and not (m.selector and m.selector.named):
            groups.setdefault(json.dumps([m.source, m.marker, m.selector and m.selector.model_dump()]), []).append(m)
    return {m.param: group[0].param for group in groups.values() if len(group) >= 2 for m in group}


def found_words(turn_calls: Sequence[ToolCall], prerequisites: Collection[int], turn: int,
                wording: Wording, withheld: Mapping[int, Collection[str]] = {}) -> dict[tuple[int, int], str]:
    """(turn, call) -> how the user names what a prerequisite finds, from its tool's `found` phrase with its own
    arguments said ("the nearest tire shop", "the zip code of Rivermist"); prerequisites without one, or whose
    phrase would say a value `withheld` (call index -> parameters) leaves out, are absent."""
    out = {}
    for i in prerequisites:
        call = turn_calls[i]
        phrase = wording.phrases(call.name).found
        stated = {n for n, p in call.args_prov.items() if p.effective_tag() in (Tag.self_create, Tag.initial_state)}
        sayable = (stated & call.args_exec.keys()) - set(withheld.get(i, ()))  # said verbatim, never restated
        if phrase and set(placeholders(phrase)) <= sayable:
            out[(turn, i)] = PLACEHOLDER.sub(lambda m: said_value(call.args_exec[m.group(1)]), phrase)
    return out


def conveyed_arguments(call: ToolCall, withheld: Collection[str], wording: Wording,
                       mention_list: list[Any], turn: int, rng: random.Random,
                       named_finds: Mapping[tuple[int, int], str] = {}) -> dict[str, Argument]:
    """Each must-mention entry of a call as the user conveys it; after the first reference to a source, further
    plain references to the same source are just "the city" ("the street address you found earlier, the city");
    a value a prerequisite finds is named by what it finds where its tool says (`named_finds`, see found_words)."""
    out = {}
    sources: set[tuple[int, int] | None] = set()
    heads = [wording.noun(call.name, m.param).split()[-1] for m in mention_list]
    whole = _whole_addresses(mention_list)
    for m in mention_list:
        noun = source_noun(wording.noun(call.name, m.param), m.path)
        if m.param in whole:  # "the street address, the city, the state..." of one found address: "that address"
            first = whole[m.param] == m.param
            words = "" if not first else found_reference("address", m.selector, m.value, rng) \
                if m.marker == "FOUND_BY_ASSISTANT" else history_reference("address", m.selector, m.value, m.source,
                                                                           turn, rng)
            out[m.param] = Argument(m.param, noun, words, False, m.param in withheld, m.value,
                                    m.marker == "FOUND_BY_ASSISTANT" and m.selector is None, joined=not first)
            continue
        named = m.selector is not None and m.selector.named  # the user names it: a listing not seen yet
        if m.verbatim or named:
            words = said_value(m.value)
        elif m.marker == "FOUND_BY_ASSISTANT" and m.selector is None and m.source in named_finds:
            out[m.param] = Argument(m.param, noun, named_finds[m.source], False, m.param in withheld, m.value,
                                    found=True, named=True)  # "take me to the nearest tire shop"
            continue
        elif m.place is not None:  # a place by its city, as people name it: "flights to Berlin"
            words = m.place
        elif m.marker == "FOUND_BY_ASSISTANT":  # after "my street address", the same record's "the city"
            words = f"the {noun}" if m.selector is None and m.source in sources else \
                found_reference(noun, m.selector, m.value, rng)
            if m.selector is None:
                sources.add(m.source)
        elif m.selector is None and m.source is not None and m.source in sources:
            words = f"the {reference_noun(noun)}"
        else:  # an ordinal noun stays only where nothing else tells two values the user stated apart
            said = reference_noun(noun) if m.selector is not None or m.source is not None else noun
            said = short_noun(said, heads, rng)
            words = history_reference(said, m.selector, m.value, m.source, turn, rng)
            if m.selector is None:
                sources.add(m.source)
        out[m.param] = Argument(m.param, noun, words, m.verbatim or named, m.param in withheld, m.value,
                                m.marker == "FOUND_BY_ASSISTANT" and m.selector is None)
    return whole_items(call, out, wording)


def whole_items(call: ToolCall, args: dict[str, Argument], wording: Wording) -> dict[str, Argument]:
    """`args` with the fields of each array argument given item by item put together as that argument: each item
    named by its values in words ("flight number HAT035, date 2024-05-27 and ..."), the user's own choice of
    which objects (a flight of the results, a passenger of the profile)."""
    out: dict[str, Argument] = {}
    for key, arg in args.items():
        parts = split_item_key(key)
        if parts is None:
            out[key] = arg
            continue
        param = parts[0]
        if param in out:
            continue
        items = call.args_exec.get(param) or []
        phrase = wording.phrases(call.name).items.get(param, "") if call.name in wording.specs else ""
        words = join_words([item_words(phrase, item, lambda f, i=i: wording.noun(call.name, item_key(param, i, f)))
                            for i, item in enumerate(items)])
        out[param] = Argument(param, wording.noun(call.name, param), words, True, False, items)
    return out


def item_words(phrase: str, item: dict[str, Any], noun: Any) -> str:
    """One item in words: the phrase book's item phrase filled with its values ("flight HAT035 on 2024-05-27"), the
    fields it leaves out added by `noun` ("..., amount 120"); without a phrase each field by its noun."""
    said = {f: said_value(v) for f, v in item.items()}
    text = phrase.format_map(said) if phrase else ""
    rest = [f"{noun(f)} {said[f]}" for f in item if "{" + f + "}" not in phrase]
    return ", ".join([t for t in [text] if t] + rest)
