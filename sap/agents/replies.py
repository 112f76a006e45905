"""The assistant's answer after a turn's tool calls, in words, per result shape: the facts the user asked for,
errors as errors with what can be done next, writes acknowledged with their key values; never a tool name, a raw
structure or a raw field name, and no text cut mid-word."""
from __future__ import annotations

import json
import random
import re
from collections.abc import Collection, Mapping
from typing import Any

from sap.executors.bfcl import BFCL_FAILURE_SHAPES
from sap.executors.failures import MESSAGE_FIELDS, error_text
from sap.jsonutil import leaves
from sap.model import ToolCall, ToolSpec
from sap.provenance.fields import singular
from sap.provenance.generate import is_secret_param
from sap.provenance.places import ADDRESS_FIELDS, address_line
from sap.text import article, field_words, plural, task_phrase

SHOWN = 3  # elements a reply names from a listing ("a.txt, b.txt, c.md and twelve more")

NUMBER_WORDS = ["no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
MONEY = re.compile(r"price|amount|(?:^|_)total$|balance|cost|fare|refund|paid|fee|charge|budget|spent", re.I)
NAME_KEYS = ("name", "title", "hotel_name", "full_name", "city")  # what names an object (in this order)
AUTHOR_KEYS = ("username", "user_name", "author", "sender")  # who wrote a post or message
LEAD_VERBS = {"get", "gets", "list", "lists", "search", "searches", "find", "finds", "show", "shows", "view", "check",
              "checks", "lookup", "fetch", "read", "query", "describe", "retrieve", "retrieves", "display", "displays",
              "estimate", "estimates", "compute", "calculate", "return", "returns", "count"}
CUT_WORDS = {"by", "based", "from", "for", "with", "given", "in", "on", "of"}
WRITE_VERBS = {"set", "update", "modify", "add", "remove", "delete", "create", "cancel", "book", "register", "send",
               "post", "exchange", "transfer", "place", "fund", "withdraw", "move", "copy", "rename", "write", "lock",
               "unlock", "start", "fill", "press", "release", "activate", "adjust", "follow", "unfollow", "comment",
               "retweet", "mention", "close", "resolve", "edit", "purchase", "pay", "change", "upload", "log",
               "authenticate", "swap", "request", "navigate", "change", "replace", "append", "mark", "assign", "apply",
               "reset", "enable", "disable", "turn", "open", "submit", "approve", "reject", "schedule", "notify",
               "handle", "contact", "verify"}
IRREGULAR = {"send": "sent", "set": "set", "make": "made", "get": "got", "find": "found", "write": "wrote",
             "buy": "bought", "pay": "paid", "read": "read", "run": "ran", "take": "took", "give": "gave", "put": "put",
             "cut": "cut", "shut": "shut", "begin": "began", "go": "went", "do": "did", "turn": "turned"}
PAIR_STATES = {"identical", "equal", "same", "different"}  # said of two things: "they are identical"
STATE_WORDS = PAIR_STATES | {"available", "open", "active", "empty", "valid", "online", "running", "visible", "public",
                             "private", "complete", "ready", "due"}  # a yes/no field said as a state
SHARE_KEYS = {"amount", "quantity"}  # a count of shares where the object is a stock order (it names a symbol)
SHORT_STRING = 160  # longest string value quoted whole; longer ones end at a word boundary with "…"
MOST_FACTS = 4  # fields of one object stated at most
NARROWED_FIELDS = 6  # a read result with more fields than this says only the ones the user asked about, if any;
# a smaller one says them first ("at today's rate" asks for the rate beside the converted amount, not instead)
FACTS_AFTER_WRITE = 2  # fields stated of a write's result when none holds what it set
_SUBJECT_ONLY = "that's "  # how `_object_sentence` says an object whose result names it and nothing else
WRITE_LEADS = ["Done. ", "All set. ", "Okay, that's done. ", "That's taken care of. ", "Finished. ", ""]
READ_LEADS = ["", "", "Here's what I found: ", "I checked: "]  # how a read's reply may open
_OUTCOME = re.compile(r"\b(?:success\w*|fail\w*|error|complete[ds]?|done)\b", re.I)  # words of a result message
_ID_NAME = re.compile(r"(?:_|\b)ids?$|Ids?$")  # a field or parameter naming ids
COMMON_OPENERS = {"The", "There", "For", "Here's", "That's", "That", "It", "Done:", "All", "Order", "Booking",
                  "Reservation", "Flight", "You", "Your"}


def assistant_reply(calls: list[ToolCall], specs: dict[str, ToolSpec], rng: random.Random,
                    prerequisites: Collection[int] = (), account_known: bool = False,
                    referred: Mapping[int, Collection[str]] = {}, asked: str = "") -> str:
    """The assistant's answer to the user after `calls`: one or two sentences per call the user asked for, joined,
    with one lead for the whole reply. The prerequisites the assistant worked out itself (indexes into `calls`) are
    not reported one by one: a found account is acknowledged (unless `account_known`: an earlier turn found it),
    preparing writes said in a clause, lookups not at all (the user asked for the goal, not for the profile read
    on the way); a failed one is reported as any failure. `referred` maps a call's index to the fields of its
    result a later turn refers to: the reply states those, so the user has seen what they later point at. `asked`
    is the user's message: a read's fields it names ("the payment methods I've saved") are what its reply says."""
    shown = [i for i, c in enumerate(calls) if i not in prerequisites or _failed(c)]
    if not shown:  # nothing but prerequisites: every call is reported
        shown, prerequisites = list(range(len(calls))), ()
    prepared = _prepared([calls[i] for i in sorted(prerequisites) if i < shown[0]], specs, rng, account_known)
    parts = [call_reply(calls[i], specs.get(calls[i].name), rng, specs, lead=k == 0 and not prepared,
                        keep=referred.get(i, ()), asked=asked)
             for k, i in enumerate(shown)]
    said = [next((p.removeprefix(o) for o in READ_LEADS if o and p.startswith(o)), p).lower() for p in parts]
    parts = [p for k, p in enumerate(parts) if said[k] not in said[:k]]  # two empty filters: told once
    if len(parts) > 1:
        parts = [parts[0]] + [_joined(p, rng) for p in parts[1:]]
    return " ".join(prepared + parts)


def _failed(call: ToolCall) -> bool:
    """Whether a call failed (an error, or a result that is a known soft failure)."""
    return not call.ok or failure_reason(call.name, call.result) is not None


def _prepared(calls: list[ToolCall], specs: dict[str, ToolSpec], rng: random.Random,
              account_known: bool = False) -> list[str]:
    """What the reply says of the prerequisites done before the first reported call: the account found (by the
    person a result names; not again once `account_known`) and the preparing writes, in one sentence each; lookups
    say nothing."""
    out = []
    person = next((p for c in calls if (p := names_person(c))), None)
    if person and not account_known:
        first = person.split()[0]
        out.append(rng.choice([f"Thanks, {first}, I've found your account.", f"I've pulled up your account, {first}.",
                               f"Thanks, {first} - your account is up."]))
    writes = [past_tense(short_task(task_phrase(specs[c.name]))) for c in calls
              if c.name in specs and is_write(task_phrase(specs[c.name]), specs[c.name])
              and not names_person(c)]
    if writes:
        steps = _join(list(dict.fromkeys(writes)))
        out.append(rng.choice([f"First I {steps}.", f"I {steps} first.", f"To get there I {steps}."]))
    return out


def names_person(call: ToolCall) -> str | None:
    """The person a call's result names (a login or profile: "Omar Khan"), else None."""
    return _person(call.result) if isinstance(call.result, dict) else None


def call_reply(call: ToolCall, spec: ToolSpec | None, rng: random.Random,
               specs: dict[str, ToolSpec] | None = None, lead: bool = True, keep: Collection[str] = (),
               asked: str = "") -> str:
    """One call's part of the reply: a failure and what can be done next, a write acknowledged with its key values,
    or the facts a read found; `specs` (the toolset) names what an error text must not show; `lead` opens it with
    a word of its own ("Done.", "Here's what I found:"), for the first part of a reply; `keep` are result fields
    stated whatever else is salient; a read's fields the user's message `asked` names come first, and are the only
    ones a record of more than NARROWED_FIELDS fields states (a profile asked for its payment methods)."""
    task = task_phrase(spec) if spec is not None else field_words(call.name)
    problem = failure_reason(call.name, call.result) or (call.error if not call.ok else None)
    if problem is not None:
        return failure_reply(task, problem, specs or ({spec.name: spec} if spec else {}), rng)
    write = is_write(task, spec)
    echoed = set() if write else _echoed(call.result, call.args_exec)
    named = set() if write else asked_fields(call.result, asked) - echoed  # "the weather on that date": the date
    # the user gave is no answer, so a forecast is not narrowed down to it (it said nothing but "that's Chicago")
    narrow = len(call.result) > NARROWED_FIELDS if isinstance(call.result, dict) else False  # a record of many
    facts = describe_result(call.result, call.name, call.args_exec if write else {},  # fields: only what was asked
                            echoed=echoed,
                            about="" if write else _asked_about(call.args_exec),
                            keep=set(keep) | (set() if narrow else named), only=named if narrow else ())
    if write and (moved := _relocation(call.result, task)):
        return (rng.choice(WRITE_LEADS) if lead else "") + moved
    if write and _lower_first(facts).startswith(_SUBJECT_ONLY):  # the result only says who or what: the task
        done = re.sub(r"\bthe (?:customer|user)\b", "you", f"I {past_tense(short_task(task))}")  # done, then that
        return f"{done}: {_lower_first(facts).removeprefix(_SUBJECT_ONLY)}"  # ("I authenticated you: Ethan Patel ...")
    if write:
        if facts:  # the result says what changed: the docstring's wording of the task adds nothing
            return (rng.choice(WRITE_LEADS) if lead else "") + facts
        done = f"I {past_tense(short_task(task))}"
        values = _arg_facts(call.args_exec, spec)
        return rng.choice(["Done: {d}{v}.", "All set: {d}{v}.", "{D}{v}."] if lead else ["{D}{v}."]).format(
            d=done, D=done, v=f" ({values})" if values else "")
    if not facts:
        return _nothing(call.result, rng)
    opener = rng.choice(READ_LEADS) if lead and "\n" not in facts else ""
    return opener + (_lower_first(facts) if opener else facts)


def _nothing(result: Any, rng: random.Random) -> str:
    """A read that found nothing, said as what is empty ("The booking history is empty.", "There are no files.")
    where the result names it by its one field, else plainly."""
    if isinstance(result, dict) and len(result) == 1 and not _ID_NAME.search(key := next(iter(result))):
        thing, value = field_words(key), result[key]
        if isinstance(value, list):  # {"files": []}: "There are no files."
            return f"There {'are' if _is_plural(thing) else 'is'} no {thing}."
        return f"The {thing} {'are' if _is_plural(thing) else 'is'} empty."
    return rng.choice(["There was nothing to report there.", "That came back empty."])


def failure_reason(tool: str, result: Any) -> str | None:
    """Why a returned result is a failure, in words (an error text, or a known soft failure), else None."""
    text = error_text(result)
    if text is not None:
        return text
    for shape in BFCL_FAILURE_SHAPES:
        if shape.matches(tool, result):
            said = next((str(result[k]) for k in MESSAGE_FIELDS if isinstance(result, dict) and result.get(k)), "")
            return said or f"the {field_words(shape.field).removesuffix(' status')} was refused"
    return None


def failure_reply(task: str, problem: str, specs: dict[str, ToolSpec], rng: random.Random) -> str:
    """A failure said as one: what could not be done, why, and what the user can do next."""
    reason = clean_error(problem, specs)
    lead = rng.choice(["I couldn't {t}", "I wasn't able to {t}", "Sorry, I couldn't {t}", "That didn't work: I couldn't {t}"])
    return f"{lead.format(t=_definite(short_task(task)))}: {reason}. {next_step(reason, rng)}"


def clean_error(problem: str, specs: dict[str, ToolSpec]) -> str:
    """An error text fit for the user: no "Error:" or tool-name prefix, no "with <tool>" advice, identifiers in
    words, quoted names in typographic quotes, no Python literals."""
    text = re.sub(r"^\s*(?:error\s*:\s*)+", "", str(problem), flags=re.I).strip()
    tools = sorted(specs, key=len, reverse=True)
    if tools:
        text = re.sub(rf"^(?:{'|'.join(re.escape(t) for t in tools)})\s*:\s*", "", text)
    raw = [t for t in tools if re.search(r"_|[a-z][A-Z]|\d", t)]  # identifier-like names (English words stay)
    if raw:
        names = "|".join(re.escape(t) for t in raw)
        text = re.sub(rf"\s*(?:with|using|via|by calling|use)\s+(?:{names})(?:\s+or\s+(?:{names}))*", "", text)
        text = re.sub(rf"(?<![\w.])(?:{names})(?!\w)", "the right step", text)
    params = {p for s in specs.values() for p in s.properties}
    for name in sorted(params, key=len, reverse=True):
        if re.search(r"_|[a-z][A-Z]|\d", name):
            text = re.sub(rf"(?<![\w.]){re.escape(name)}(?![\w])", field_words(name), text)
    text = re.sub(r"\b(\w+(?:_\w+)+) is (True|False)\b", lambda m: f"{field_words(m.group(1))} is "
                  f"{'yes' if m.group(2) == 'True' else 'no'}", text)
    text = _cut(_message(text).rstrip(". "), SHORT_STRING)
    if not text:
        return "something went wrong"
    return text if text[1:2].isupper() else text[:1].lower() + text[1:]


def next_step(reason: str, rng: random.Random) -> str:
    """What the user can do after a failure with this reason."""
    low = reason.lower()
    if re.search(r"insufficient|not enough|balance|funds|exceed", low):
        return rng.choice(["Would you like to use another payment method?", "Would you like to try a smaller amount "
                                                                            "or another payment method?"])
    if re.search(r"not found|no such|does not exist|doesn't exist|invalid|unknown|not a valid|no .* with", low):
        return rng.choice(["Could you double-check the details and tell me which one you meant?",
                           "Could you check it and give me the right one?"])
    if re.search(r"not logged|permission|unauthori|must (?:be )?log|log ?in required|sign in|authenticate .* first", low):
        return rng.choice(["Would you like to sign in first?", "Could you sign in and try again?"])
    if re.search(r"authenticat|credential|password|log ?in", low):
        return rng.choice(["Could you double-check your credentials?", "Could you check the username and password?"])
    if re.search(r"already", low):
        return rng.choice(["So nothing needed changing. Is there anything else?", "Nothing changed, then; anything else?"])
    return rng.choice(["Would you like me to try something else?", "How would you like to proceed?",
                       "Let me know if you'd like to try with different details."])


def is_write(task: str, spec: ToolSpec | None) -> bool:
    """Declared not read-only, else a task that opens with a changing verb ("cancel", "activates")."""
    if spec is not None and spec.read_only is not None:
        return not spec.read_only
    return _base_verb(task.split()[0].lower() if task.split() else "") in WRITE_VERBS


def short_task(task: str) -> str:
    """The task's action up to its first clause break ("book one seat on a flight, paying ..." -> "book one seat on
    a flight"), verbs in base form."""
    parts = re.split(r"([,;:(]| - | — | unless | if | so that | by (?!line)| based on | given | with | for the "
                     r"| of any | in the current )", task)
    head = parts[0].strip()
    if re.search(r"\b(?:a|an|the|new)$", head) and len(parts) > 2:  # "create a new, empty folder"
        head = (parts[0] + parts[1] + parts[2]).strip()
    head = re.sub(r"^(\w+) or \w+ ", r"\1 ", head)  # "move or rename a file" -> "move a file"
    head = re.split(r" or | from one | to another\b", head)[0].strip()  # one alternative, no "from one ... to another"
    words = head.split()
    if words:
        words[0] = _base_verb(words[0])
    return " ".join(words)


def past_tense(task: str) -> str:
    """The task in the past tense: its first verb, and one joined by "and", conjugated; an article after the verb
    made definite ("cancel a pending order and refund it" -> "cancelled the pending order and refunded it")."""
    words = _definite(task).split()
    if not words:
        return "did that"
    words[0] = _past(words[0])
    for i in range(1, len(words) - 1):
        if words[i] in ("and", "or") and _base_verb(words[i + 1]) in WRITE_VERBS | LEAD_VERBS:
            words[i + 1] = _past(_base_verb(words[i + 1]))
    return " ".join(words)


def _definite(task: str) -> str:
    """The article right after the first verb made definite, unless it introduces something new."""
    return re.sub(r"^(\S+) an? (?!new\b|empty\b)", r"\1 the ", task)


def _base_verb(word: str) -> str:
    """A verb in its base form: "activates" -> "activate", "presses" -> "press", "modifies" -> "modify"."""
    w = word.lower()
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if re.search(r"(ss|sh|ch|x|z)es$", w):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss") and w[:-1] not in {"thi", "ha"}:
        return w[:-1]
    return w


def _past(verb: str) -> str:
    """The simple past of a base-form verb."""
    v = verb.lower()
    if v in IRREGULAR:
        return IRREGULAR[v]
    if v.endswith("e"):
        return v + "d"
    if re.search(r"[^aeiou]y$", v):
        return v[:-1] + "ied"
    if v.endswith("el"):
        return v + "led"
    if len(re.findall(r"[aeiou]+", v)) == 1 and re.search(r"[^aeiou][aeiou][^aeiouwxy]$", v):
        return v + v[-1] + "ed"
    return v + "ed"


def _relocation(result: Any, task: str) -> str:
    """A move or copy said as what went where ("I moved preferences.cfg to /frossi/changelog.txt."), from a result
    naming its `source` and new `path` and the task's verb; "" for any other result."""
    if not (isinstance(result, dict) and isinstance(result.get("source"), str) and isinstance(result.get("path"), str)):
        return ""
    verb = past_tense(short_task(task)).split()[0]
    return f"I {verb} {result['source']} to {result['path']}."


def describe_result(result: Any, tool: str, changed: Mapping[str, Any] = {}, echoed: set[str] = frozenset(),
                    about: str = "", keep: Collection[str] = (), only: Collection[str] = ()) -> str:
    """The facts of a result as sentences ("" for an empty one); `changed` is a write's arguments, whose fields
    are the ones to state; `echoed` a read's fields that only repeat what was asked, said only if nothing else is;
    `about` what a read was asked for ("for Amazon": "the symbol for Amazon is AMZN", "For TSLA, the price is");
    `only`, the fields the user asked about: an object's other fields go unsaid (but `keep`)."""
    if result is None or result == "" or result == {}:
        return ""
    if isinstance(result, dict) and len(result) == 1 and (media := _media(next(iter(result.values())))):
        return media
    if isinstance(result, dict) and len(result) == 1 and _TEXT_KEY.fullmatch(next(iter(result))) and \
            isinstance(text := next(iter(result.values())), str) and text not in changed.values():
        result = text  # {"content": "..."}: the text is the result (MCP structured content), unless a write's own
    if isinstance(result, str) and (parsed := _json_text(result)) is not None:  # JSON sent as text
        typed = _typed(parsed)
        return typed if typed is not None else describe_result(parsed, tool, changed, echoed, about, keep, only)
    if isinstance(result, str) and len(lines := [ln.rstrip() for ln in result.strip("\n").splitlines()]) >= 2:
        return _tagged_listing(lines) or text_block(lines, about)
    noun = _tool_noun(tool)
    if isinstance(result, list):
        return _sentence(_list_phrase(result, noun))
    if isinstance(result, dict):
        if _is_collection(result):
            return _sentence(_list_phrase(_collection_items(result), noun))
        flags = [k for k, v in result.items() if isinstance(v, bool)]
        if not changed and len(result) == 1 and flags and field_words(flags[0]).split()[-1] == "status":
            return _sentence(f"the {noun} is {'active' if result[flags[0]] else 'inactive'}")  # a read's one state
        if only:
            echoed = echoed | (set(result) - set(only) - set(keep))
        return _object_sentence(result, noun, changed, echoed - set(keep), about, keep, tool, bool(only))
    if isinstance(result, str) and len(result.split()) > 1:  # a message of its own ("Certificate ... added")
        return _sentence(_message(result))
    return _sentence(f"the {noun}{' ' + about if about else ''} is {_say(result, noun)}")


_TEXT_KEY = re.compile(r"content|text|output|stdout|result|message|file_content")
BLOCK_LINES = 12  # lines of a text result shown as they are; more are counted


def _media(blocks: Any) -> str:
    """MCP content blocks that are not text (an image, audio, an embedded file) in words: what each is, its type
    and size ("I read /w/a.png: an image/png image of 2.1 KB."); "" for anything else."""
    if not (isinstance(blocks, list) and blocks and all(isinstance(b, dict) and b.get("type") in
                                                         ("image", "audio", "resource") for b in blocks)):
        return ""
    said = []
    for block in blocks:
        inner = block.get("resource") if block["type"] == "resource" and isinstance(block.get("resource"), dict) \
            else block
        data = str(inner.get("blob") or inner.get("data") or inner.get("text") or "")
        size = len(data) * 3 // 4 if inner.get("blob") or inner.get("data") else len(data.encode())
        where = str(inner.get("uri", "")).removeprefix("file://")
        kind = str(inner.get("mimeType") or block["type"])
        noun = block["type"] if block["type"] in ("image", "audio") else "file"
        said.append(f"{where + ': ' if where else ''}{article(kind)} {noun} of {_bytes(size)}")
    return _sentence("I read " + _join(said))


def _bytes(size: int) -> str:
    """A size in bytes as people say it: "62 bytes", "2.1 KB", "3.4 MB"."""
    if size < 1024:
        return f"{size} byte{'' if size == 1 else 's'}"
    return f"{size / 1024:.1f} KB" if size < 1024 * 1024 else f"{size / 1024 / 1024:.1f} MB"


def _json_text(text: str) -> Any:
    """A text that is a JSON object or array, parsed; else None."""
    if not text.strip()[:1] in ("{", "["):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, (dict, list)) else None


_TAGGED = re.compile(r"\[([A-Z][A-Z ]{0,15})\]\s+(\S.*?)\s*$")  # "[FILE] notes.txt", "[DIR] archive"


def _tagged_listing(lines: list[str]) -> str:
    """A listing whose lines are tagged by kind ("[FILE] a.txt", "[DIR] old") in words, grouped by the kind
    ("there are two files: a.txt and b.txt, and one directory: old"), the tags' own words as nouns; "" when a line
    is not of that form (a trailing summary line, "Total: 2 files", is left out)."""
    body = [ln for ln in lines if ln.strip() and not re.match(r"(?:Total|Combined)\b", ln.strip())]
    found = [_TAGGED.match(ln.strip()) for ln in body]
    if not body or not all(found):
        return ""
    return _kinds([(m.group(1), re.split(r"\s{2,}", m.group(2))[0]) for m in found if m])  # a size column after


def _typed(value: Any) -> str | None:
    """A JSON list of named entries of a kind (`{"name": "a.txt", "type": "file"}`) in words, grouped by kind; ""
    for an empty list; None for any other value."""
    if not isinstance(value, list):
        return None
    if all(isinstance(v, dict) and isinstance(v.get("name"), str) and isinstance(v.get("type"), str) for v in value):
        return _kinds([(v["type"], v["name"]) for v in value])
    return None


def _kinds(entries: list[tuple[str, str]]) -> str:
    """(kind, name) pairs as one sentence grouped by kind ("there are two files: a.txt and b.txt, and one
    directory: old"); "" for none."""
    groups: dict[str, list[str]] = {}
    for kind, name in entries:
        groups.setdefault({"dir": "directory"}.get(kind.lower(), kind.lower()), []).append(name)
    clauses = [_list_phrase(names, plural(kind)) for kind, names in groups.items()]
    return _sentence(clauses[0] + "".join(", and " + re.sub(r"^there (?:is|are) ", "", c) for c in clauses[1:])) \
        if clauses else ""


def text_block(lines: list[str], about: str = "") -> str:
    """A text of several lines (a listing, a status, a file) shown as it is, under a lead saying what it is for,
    as an assistant pastes command output: its first BLOCK_LINES lines, then how many more there are."""
    shown = lines[:BLOCK_LINES]
    rest = len(lines) - len(shown)
    more = f"\n(and {rest} more line{'s' if rest > 1 else ''})" if rest else ""
    return f"Here's what I got{' ' + about if about else ''}:\n" + "\n".join(shown) + more


_QUALIFIERS = {"left", "available", "remaining", "count", "number", "total", "current", "list"}  # "seats left":
# a user asks "how many seats are open"


def asked_fields(result: Any, message: str) -> set[str]:
    """The fields of an object result that a user's message names by all their words, in any number, a
    qualifier such as "left" or "available" aside ("walk me through the payment methods I've saved":
    `payment_methods`; "how many seats are open": `seats_left`); not ids and names (a forecast's city: "visit them in
    another city" asked for no forecast's city), which say which thing it is, nor
    a value the message itself holds ("my zip code is 53763"); one-word fields of a word the message may only use
    in passing ("my order") only when nothing longer is named."""
    if not isinstance(result, dict) or not message:
        return set()
    said = {singular(w) for w in re.findall(r"[a-z]+", message.lower())}
    naming = _subject(result, "")[1]  # "the flight from the results" asks for no flight number: it names the flight
    named = {k for k in result if not k.startswith("_") and not _ID_NAME.search(k) and k not in (*NAME_KEYS, "status")
             and k not in naming
             and result[k] not in (None, "", [], {})  # an empty field answers nothing
             and (words := {singular(w) for w in field_words(k).split()} - _QUALIFIERS) and words <= said
             and not (isinstance(result[k], (str, int)) and str(result[k]) in message)}  # not what the user said
    longer = {k for k in named if len(field_words(k).split()) > 1}
    return longer or named if len(named) < len(result) else set()


def _asked_about(args: dict[str, Any]) -> str:
    """What a read was asked for, in words, from its short argument values ("for HAT029 on 2024-05-25"); "" when
    it took none or more than two."""
    shown = [v for k, v in args.items() if isinstance(v, (str, int, float)) and not isinstance(v, bool)
             and not is_secret_param(k) and 0 < len(str(v)) <= 40]
    if not shown or len(shown) > 2 or len(shown) < len(args):
        return ""
    dates = [str(v) for v in shown if re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(v))]
    named = [_say(v, "") for v in shown if str(v) not in dates]
    return " ".join(([f"for {' and '.join(named)}"] if named else []) + [f"on {d}" for d in dates])


def _echoed(result: Any, args: dict[str, Any]) -> set[str]:
    """The top-level fields of a read's result that repeat one of its own arguments (a search's dates and guests)."""
    asked = [v for v in args.values() if v not in (None, "", [], {})]
    return {k for k, v in result.items() if any(v == a for a in asked)} if isinstance(result, dict) else set()


def _object_sentence(obj: dict[str, Any], noun: str, changed: Mapping[str, Any],
                     echoed: set[str] = frozenset(), about: str = "", keep: Collection[str] = (),
                     tool: str = "", focused: bool = False) -> str:
    """An object in words: who or what it is, its status, then its salient fields (a write's changed ones); an
    object that names nothing of itself is said `about` what was asked ("For TSLA, the price is ..."); `focused`:
    the `echoed` fields stay unsaid even when nothing else is (they are what the user did not ask about)."""
    subject, used = _subject(obj, noun)
    if subject and not changed and used <= echoed and not _about_itself(used, noun):
        subject = ""  # a search's origin it was asked for names the query, not what it found
    status_key = next((k for k in obj if field_words(k).split()[-1:] == ["status"] and isinstance(obj[k], str)
                       and k not in used), None)
    message_key = next((k for k in obj if isinstance(obj[k], str) and len(obj[k].split()) > 1
                        and (field_words(k).split()[-1:] in (["status"], ["result"], ["message"], ["notification"])
                             or len(obj[k].split()) >= 4 and obj[k][:1].isupper() and "\n" not in obj[k]
                             and not _names_thing(k))
                        and (k != status_key or obj[k][:1].isupper() and (len(obj[k].split()) > 2 or _OUTCOME.search(
                            obj[k])))), None)  # "Withdrawal successful" is a message, "In Transit" a status
    message = _message(obj[message_key]) if message_key else ""
    if message_key:  # a message of the result's own ("Navigating to ...", "'a.txt' removed")
        used = used | {message_key}
        status_key = None if status_key == message_key else status_key
    skip = used | ({status_key} if status_key else set())
    facts = _facts(obj, skip | echoed, changed, keep, tool) or ([] if focused else _facts(obj, skip, changed, keep,
                                                                                          tool))
    updated = bool(changed) and any(k in obj and obj[k] in changed.values() for k in used)  # a thing the call named
    if updated and not (status_key and _status_of_task(obj[status_key], tool)):
        status_key = None  # an address change: what it set, not the order's unchanged "is pending"
        facts = [_now(f, changed) for f in facts]
        if subject and len(facts) == 1 and (field := re.match(r"the (.+?) (is|are) now ", facts[0])) and \
                not _customer(obj, used):
            return _sentence(f"the {field.group(1)} of {subject} {field.group(2)} now {facts[0][field.end():]}")
    if subject and facts and not status_key and _customer(obj, used):  # the user's own account: "you", "your"
        # a user id a later turn points at is said, as the name said it before
        shown = [f"the user ID is {obj['user_id']}"] if "user_id" in keep else []
        yours = [re.sub(r"^there (?:is|are) (?!no )", "you have ", re.sub(r"^the ", "your ", f)) for f in shown + facts]
        return " ".join(t for t in (_sentence(message), _sentence(_clauses(yours))) if t)
    if subject and status_key:
        head = f"{subject} {_state(_say(obj[status_key], status_key))}"
        text = _sentence(head + (f"; {_join(facts)}" if facts else ""))
    elif subject and facts and (held := re.match(r"there (?:is|are) (?!no )", facts[0])):
        text = _sentence(f"{subject} has {facts[0][held.end():]}" + (f"; {_clauses(facts[1:])}" if facts[1:] else ""))
    elif subject:
        text = _sentence(f"{subject}: {_clauses(facts)}" if facts else f"{_SUBJECT_ONLY}{subject}")
    else:
        if status_key:
            facts = [f"the {field_words(status_key)} is {_say(obj[status_key], status_key)}"] + facts
        text = _sentence((f"{about}, " if about and facts else "") + _join(facts))
    return " ".join(t for t in (_sentence(message), text) if t)


def _customer(obj: dict[str, Any], used: set[str]) -> bool:
    """Whether an object is the signed-in customer's own account: named by a person's name and a user id."""
    return "user_id" in used and bool({"first_name", "name"} & used)


def _status_of_task(status: Any, tool: str) -> bool:
    """Whether a status says what the tool's verb did ("cancelled" for cancel_pending_order, "return requested" for
    return_delivered_order_items), not a state it left as it was ("pending" after modify_pending_order_address)."""
    verb = field_words(tool).split()[:1]
    return bool(verb) and any(w[:5] == verb[0][:5] for w in str(status).lower().split())


def _now(fact: str, changed: Mapping[str, Any]) -> str:
    """A fact holding one of the values a write set, said as the thing's new state ("the address is now ...")."""
    given = [str(v) for v in changed.values() if isinstance(v, (str, int, float)) and len(str(v)) >= 3]
    if any(g in fact for g in given):
        return re.sub(r"^the (.+?) (is|are) ", r"the \1 \2 now ", fact, count=1)
    return fact


def _about_itself(used: set[str], noun: str) -> bool:
    """Whether the keys that name an object name the thing the tool is about (an order's `order_id` for
    get_order_details), not another one it was asked about (a flight search's `origin_location_id`)."""
    own = set(noun.split()) | {_singular(w) for w in noun.split()}
    return any(own & set(field_words(k).split()[:-1]) or k in ("id", "name") for k in used)


def _clauses(facts: list[str]) -> str:
    """Facts joined as prose; with "; " where one holds a listing of its own ("two orders: #1, #2 and #3; the
    email is ...")."""
    return "; ".join(facts) if any(": " in f for f in facts[:-1]) else _join(facts)


_NOT_NOUNS = {"not", "in", "on", "being", "fully", "partially", "now", "already", "auto"}


def _state(said: str) -> str:
    """A status as the verb phrase after its thing: "is pending", but a requested action as what the thing has
    ("has a return requested", not "is return requested")."""
    match = re.fullmatch(r"([a-z]+) (requested|scheduled|initiated|approved|pending)", said)
    if match and match.group(1) not in _NOT_NOUNS and not match.group(1).endswith(("ly", "ed")):
        return f"has {'an' if said[0] in 'aeiou' else 'a'} {said}"
    return f"is {said}"


def _names_thing(key: str) -> bool:
    """Whether a field holds a thing's own text rather than a message about the result (a title, name, content,
    description, address or comment)."""
    return re.search(r"name|title|content|text|description|address|comment|body|subject|question|answer|bio",
                     key, re.I) is not None


def _message(text: str) -> str:
    """A result's own message, its quoted names in typographic quotes ("'a.txt' removed" -> "“a.txt” removed"); a
    heading with nothing under it says so ("Unstaged changes:" -> "Unstaged changes: none")."""
    text = re.sub(r"'([^']+)'", "\u201c\\1\u201d", text.strip())
    text = text + " none" if text.endswith(":") else text
    return _cut(re.sub(r"\bNone\b", "none", text), SHORT_STRING)  # a missing value said as a word, not a repr


def _subject(obj: dict[str, Any], noun: str) -> tuple[str, set[str]]:
    """How to name an object ("order #W123", "Park Hotel (hotel HTL1)", "tweet 2 by ana") and the keys that says."""
    id_key = next((k for k in obj if re.fullmatch(r"(?:\w+_)?id|\w+Id|\w+_number|\w+Number", k)
                   and isinstance(obj[k], (str, int)) and not isinstance(obj[k], bool)), None)
    if id_key and (number := re.sub(r"_id$|Id$", lambda m: "_number" if m.group().startswith("_") else "Number",
                                    id_key)) != id_key and isinstance(obj.get(number), (str, int)):
        id_key = number  # a flight by its flight number, as people name it, not by the system's flight id
    name_key = next((k for k in NAME_KEYS if k in obj and isinstance(obj[k], (str, dict)) and obj[k]), None)
    author_key = next((k for k in AUTHOR_KEYS if isinstance(obj.get(k), str) and obj[k]), None)
    used = {k for k in (id_key, name_key, author_key) if k}
    name = _person(obj[name_key]) if name_key and isinstance(obj[name_key], dict) else obj.get(name_key) if name_key \
        else None
    if {"first_name", "last_name"} <= set(obj):
        name = name or f"{obj['first_name']} {obj['last_name']}"
        used |= {"first_name", "last_name"}
    kind = field_words(id_key).rsplit(" ", 1)[0] if id_key and " " in field_words(id_key) else noun
    ident = f"{kind} {obj[id_key]}" if id_key else None
    by = f" by {obj[author_key]}" if author_key else ""
    if name and ident and name_key and "_" in name_key and name_key.split("_")[0] not in kind.split():
        return f"{ident} ({name}{by})", used  # a booking named by its hotel: "booking BK1 (Park Hotel)"
    if name and ident and (name_key == "city" or len(kind.split()) > 1 and not _about_itself({id_key}, noun)):
        return f"{name}{by}", used  # a place is its city ("Seoul"); a person not by a relation ("home location L5")
    if name and ident:
        return f"{name} ({ident}{by})", used
    return (f"{name}{by}" if name else f"{ident}{by}" if ident else ""), used


def _facts(obj: dict[str, Any], skip: set[str], changed: Mapping[str, Any], keep: Collection[str] = (),
           tool: str = "") -> list[str]:
    """The object's salient fields as clauses ("the email is x", "there are three orders: ..."), most salient first;
    a write's changed fields first of all (of several holding what it set, those named like the `tool`: a
    return's `return_items`, not the order's items again), and the `keep` fields (what a later turn refers to)
    never left out; a kept id said by the field that names its thing in words where the object has one (a room id
    as its `room_type`, "Deluxe King", which is what the user then points at)."""
    out = []
    keep = {_in_words(k, obj) for k in keep}
    address = {"address1", "city"} <= set(obj) and not {"address1", "city"} <= skip  # unless left unsaid
    if address:
        skip = skip | set(ADDRESS_FIELDS)
    empty = next((k for k, v in obj.items() if v == [] and k not in skip), None)
    if empty and not any(isinstance(v, list) and v for v in obj.values()):  # the one thing found is nothing
        out.append(_list_phrase([], field_words(empty)))
    keys = [k for k in obj if k not in skip and not k.startswith("_") and obj[k] not in (None, "", [], {})
            and not (isinstance(obj[k], str) and len(obj[k]) > 4 * SHORT_STRING)
            and not (obj[k] is True and field_words(k).split()[-1] in (("status", "success") if changed else
                                                                      ("success",)))
            and not _counted(k, obj)]
    keys.sort(key=lambda k: (-2 if k in keep else -1 if k in changed else _rank(k, obj[k]), list(obj).index(k)))
    if changed:  # a write: what it set, else its two most salient fields (not the whole object again)
        ids = {str(v) for k, v in obj.items() if _ID_NAME.search(k)}  # the thing written names itself
        given = {s for s in _scalars(list(changed.values())) if len(s) >= 3} - ids
        own = [k for k in keys if _sets(k, obj[k], changed, given)]
        topic = set(field_words(tool).split()) - {"id", "ids"}
        overlap = {k: len(set(field_words(k).split()) & topic) for k in own}
        best = max(overlap.values(), default=0)
        own = [k for k in own if k in changed or (best and overlap[k] == best)] or own
        address = address and bool(changed.keys() & set(ADDRESS_FIELDS))
        outcome = [k for k in keys if k not in own and MONEY.search(k) and isinstance(obj[k], (int, float))][:1]
        kept = [k for k in keys if k in keep and k not in own]
        if any(not _ID_NAME.search(k) for k in own):  # a booking's hotel and room ids say nothing its names don't
            own = [k for k in own if not _ID_NAME.search(k)]
        keys = kept + own + outcome if own or address else keys[:max(FACTS_AFTER_WRITE, len(kept))]  # + its cost
    if address:
        out.append(f"the address is {address_line(obj)}")
    for key in keys[:max(MOST_FACTS - len(out), 0) + sum(k in keep for k in keys)]:  # what a later turn points
        # at comes on top of the answer: a hotel search referred to for its dates still says the hotels it found
        value = obj[key]
        if isinstance(value, list) and value and all(isinstance(v, (str, int)) and not isinstance(v, bool)
                                                     for v in value) \
                and (_ID_NAME.search(key) or all(re.fullmatch(r"#?\d{4,}", str(v)) for v in value)):
            out.append(_id_list_clause(field_words(key), value))
        elif isinstance(value, list) or (isinstance(value, dict) and _is_collection(value)):
            items = value if isinstance(value, list) else _collection_items(value)
            total = obj.get(f"{_singular(key)}_count")
            out.append(_list_phrase(items, field_words(key), total if isinstance(total, int) else None))
        elif key == "content" or (isinstance(value, str) and "\n" in value):
            verb = "read" if _is_plural(field_words(key)) else "reads"
            out.append(f"the {field_words(key)} {verb} \u201c{_say(value, key).strip(chr(0x201c) + chr(0x201d))}\u201d")
        elif isinstance(value, bool):
            out.append(_flag_clause(field_words(key), value))
        elif key in SHARE_KEYS and isinstance(value, int) and ("symbol" in obj or "symbol" in changed):
            out.append(f"it is for {_count(value) if value <= 12 else value} share{'' if value == 1 else 's'}")
        elif key in ("today", "now"):
            out.append(f"{key} is {_say(value, key)}")
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and MONEY.search(key) \
                and (currency := currency_of(obj, key)) not in (None, "USD"):
            out.append(_field_clause(_numbered(field_words(key)), f"{value:,.2f} {currency}", value))
        elif re.fullmatch(r"[a-z]+ed", key):  # a participle ("removed", "appended"): what it names
            out.append(f"{key}: {_say(value, key)}")
        else:
            out.append(_field_clause(_numbered(field_words(key)), _say(value, key), value))
    return out


def _in_words(key: str, obj: dict[str, Any]) -> str:
    """The field of `obj` that names the thing an id field `key` identifies in words (`room_id` -> `room_type`,
    `hotel_id` -> `hotel_name`), else `key`."""
    stem = re.sub(r"_id$", "", key)
    return next((f"{stem}_{kind}" for kind in ("name", "type") if stem != key and isinstance(obj.get(f"{stem}_{kind}"),
                                                                                          str)), key)


def _id_list_clause(words: str, ids: list[Any]) -> str:
    """A list of ids as what they name: "the item is 8983261521", "the items are 1 and 2" (not "there is one item
    ID: 8983261521")."""
    noun = re.sub(r"\s*ids?$", "", words, flags=re.I) or "id"
    noun = _singular(noun)
    said = [str(i) for i in ids]
    return f"the {noun} is {said[0]}" if len(said) == 1 else f"the {plural(noun)} are {_join(said)}"


def _sets(key: str, value: Any, changed: Mapping[str, Any], given: set[str]) -> bool:
    """Whether a result field holds what a write's arguments set: the argument itself, a field ending in its name
    or last word (`cancel_reason` for `reason`, `currentACTemperature` for `temperature`), the address object of a
    flat address's parts, or a structure holding one of `given` (the values the write set, as text, but the thing's
    own ids: the payment history holding the new payment method)."""
    if key in changed or (key == "address" and changed.keys() & set(ADDRESS_FIELDS)):
        return True
    last = field_words(key).split()[-1:]
    if any(last == field_words(c).split()[-1:] and not _ID_NAME.search(c) for c in changed):
        return True
    return isinstance(value, (list, dict)) and bool(given & _scalars(value))


def _scalars(value: Any) -> set[str]:
    """Every string or integer inside a structure, as text."""
    return {str(v) for _, v in leaves(value) if isinstance(v, (str, int)) and not isinstance(v, bool)}


def _flag_clause(words: str, value: bool) -> str:
    """A yes/no field as a clause: a state word said of the thing ("identical" -> "they are identical", "appended"
    -> "it was not appended"), any other field as "<field>: yes"."""
    state = re.sub(r"^(?:is|was|has been)\s+", "", words)
    if " " in state or not (state.endswith("ed") or state in STATE_WORDS or state != words):
        return f"{words}: {'yes' if value else 'no'}"
    subject, verb = ("they", "are") if state in PAIR_STATES else \
        ("it", "was") if state.endswith("ed") and state == words else ("it", "is")
    return f"{subject} {verb}{'' if value else ' not'} {state}"


def _numbered(words: str) -> str:
    """A field numbered by a digit as an ordinal ("file name 1" -> "first file name")."""
    match = re.fullmatch(r"(.+?)\s*([1-3])", words)
    return f"{('first', 'second', 'third')[int(match.group(2)) - 1]} {match.group(1)}" if match else words


def _field_clause(words: str, said: str, value: Any) -> str:
    """"the <field> is <value>", agreeing with a plural field: a count as "the number of removed files is 2",
    other values with "are" ("the tags are #a and #b")."""
    if re.fullmatch(r"[a-z]+ed (?:by|to|on|at|for|from)", words):  # "created by Rosa Chen", not "the created by is"
        return f"{words} {said}"
    if re.fullmatch(r"[a-z]+s (?:in|at|on|until|after)", words):  # "it expires in 2", not "the expires in is 2"
        return f"it {words} {said}"
    if (m := re.fullmatch(r"([a-z ]*[a-z]+s) (left|available|remaining)", words)) and isinstance(value, int) \
            and not isinstance(value, bool):  # "there are 2 seats left", not "the seats left is 2"
        noun = m.group(1) if value != 1 else _singular(m.group(1))
        return f"there {'is' if value == 1 else 'are'} {said} {noun} {m.group(2)}"
    if not _is_plural(words):
        return f"the {words} is {said}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"the {words} is {said}" if words.startswith("number of") else f"the number of {words} is {said}"
    return f"the {words} are {said}"


def _is_plural(words: str) -> bool:
    """Whether a field's last word is a plural noun ("remaining unlocked doors"; not "status", "address")."""
    last = words.split()[-1].lower() if words.split() else ""
    return len(last) > 3 and last.endswith("s") and not last.endswith(("ss", "us", "is", "ics"))


def _counted(key: str, obj: dict[str, Any]) -> bool:
    """Whether a count field only repeats the size of a listing beside it (`match_count` beside `matches`)."""
    if key == "count":
        return sum(isinstance(v, list) for v in obj.values()) == 1
    if not key.endswith("_count"):
        return False
    stem = key[:-len("_count")]
    return any(isinstance(v, list) and _singular(k) == stem for k, v in obj.items()) or \
        (stem == "directory" and isinstance(obj.get("directories"), list))


def _rank(key: str, value: Any) -> int:
    """How salient a field is: money and dates, then plain values and named listings, then other ids and lists."""
    if MONEY.search(key) or re.search(r"date|time|day", key, re.I):
        return 0
    if _ID_NAME.search(key):
        return 3
    if isinstance(value, (list, dict)):
        items = value if isinstance(value, list) else list(value.values())
        return 2 if items and all(_subject(i, "")[0] if isinstance(i, dict) else not isinstance(i, list)
                                  for i in items) else 3
    return 1


def _list_phrase(items: list[Any], noun: str, total: int | None = None) -> str:
    """A list in words: its size in words and a few named elements ("there are three files: a.txt, b.txt and c.md");
    `total` is the size when the list shows only part."""
    item_noun = _singular(noun)
    size = max(total or 0, len(items))
    entries = item_noun.split()[-1] == "entry" and noun.split()[-1] != "entries"  # "the log has two entries"
    if not items:
        return f"the {noun} is empty" if entries else f"there are no {plural(item_noun)}"
    labels = list(dict.fromkeys(_label(i, item_noun) for i in items))
    head = f"{_count(size)} {item_noun if size == 1 else plural(item_noun)}"
    tail = ""
    if labels != [item_noun]:  # elements with nothing to name them by ("fulfillment"): their number alone
        shown = labels[:SHOWN]
        rest = size - len(shown)
        tail = ": " + _join(shown + ([f"{_count(rest)} more"] if rest else []))
        priced = [(i.get("price"), _label(i, item_noun, priced=False)) for i in items if isinstance(i, dict)
                  and isinstance(i.get("price"), (int, float)) and not isinstance(i.get("price"), bool)]
        if len(priced) > 1:
            price, label = max(priced, key=lambda p: p[0])
            tail += f", the most expensive being {label} at {_money(price)}"
    if entries:
        return f"the {noun} has {head}{tail}"
    return f"there {'is' if size == 1 else 'are'} {head}{tail}"


def _label(item: Any, noun: str, priced: bool = True) -> str:
    """A short name for one list element: a scalar as it is, an object by its name (else id) with its options
    (a variant's "white, 10 hours"), status or price, else its first short field."""
    if isinstance(item, list):  # a connection of several (a one-stop trip's two flights)
        return " then ".join(_label(i, noun, priced) for i in item)
    if not isinstance(item, dict):
        return _say(item, noun)
    name_key = next((k for k in NAME_KEYS if isinstance(item.get(k), str) and item[k]), None)
    subject = item[name_key] if name_key else _subject(item, noun)[0]
    extras = [_options(k, v) for k, v in item.items() if isinstance(v, dict) and v
              and all(isinstance(o, (str, int, float)) and not isinstance(o, bool) and len(str(o)) < 30
                      for o in v.values())][:1]  # a variant's options: what tells it from its siblings
    extras += [_say(item[k], k) for k in item if field_words(k).split()[-1:] in (["status"], ["type"])
               and isinstance(item[k], str)]  # a state or kind: a refund is not the payment beside it
    extras += [_money(v) for k, v in item.items() if priced and MONEY.search(k) and isinstance(v, (int, float))
               and not isinstance(v, bool)][:1]
    if subject:
        return subject + (f" ({('; ' if any(': ' in e for e in extras[:2]) else ', ').join(extras[:2])})"
                          if extras else "")
    short = [v for k, v in item.items() if isinstance(v, (str, int, float)) and not isinstance(v, bool)
             and len(str(v)) < 60 and not k.startswith("_")]
    return _say(short[0], noun) if short else noun


def _options(key: str, options: dict[str, Any]) -> str:
    """A small object of an element in words: words that say what they are as they are (a variant's "white, 10
    hours"), a bare number, size or yes/no with its name ("size 12, synthetic, waterproof no"; bare, "12, synthetic,
    no" says nothing), and numbers with what they count ("available seats: basic economy 3, economy 20")."""
    if all(isinstance(o, str) for o in options.values()):
        return ", ".join(o if _self_evident(o) else f"{field_words(k)} {o}" for k, o in options.items())
    return f"{field_words(key)}: " + ", ".join(f"{field_words(k)} {_say(o, k)}" for k, o in options.items())


def _self_evident(value: str) -> bool:
    """Whether an option's value says what it is without its name: words, not a number, a size letter or yes/no."""
    return len(value) > 2 and bool(re.search(r"[A-Za-z]{3}", value)) and value.lower() not in _UNCLEAR_ALONE


_UNCLEAR_ALONE = frozenset({"yes", "no", "none", "true", "false", "high", "low", "medium", "on", "off"})


def _say(value: Any, key: str) -> str:
    """One value in words: money with its sign, numbers rounded, yes/no, an address or name on one line, long text
    cut at a word boundary, small objects as their fields in words."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return _money(value) if MONEY.search(key) else _number(value)
    if isinstance(value, str) and re.fullmatch(r"[A-Z][a-z]+(?: [A-Z][a-z]+)?", value) and \
            re.search(r"(?:status|type)$", key):
        return value.lower()  # a state or kind said mid-sentence ("order 7 is pending", "the order type is buy")
    if isinstance(value, str):
        text = value.replace("\n", " / ") if "\n" in value else value
        if re.fullmatch(r"[a-z]+(?:_[a-z]+)+", text):  # an enum value ("round_trip", "basic_economy")
            text = text.replace("_", " ")
        text = _cut(text, SHORT_STRING)
        return f"\u201c{text}\u201d" if re.search(r"[{}\[\]]", text) else text  # brackets in a value: quoted
    if isinstance(value, dict):
        if _person(value):
            return _person(value) or ""
        if {"address1", "city"} <= set(value):
            return address_line(value)
        if _subject(value, key)[0]:
            return _label(value, field_words(key))
        if all(isinstance(v, list) for v in value.values()):  # lists grouped by a key (messages by receiver)
            return "; ".join(f"{k}: {_group(v, k)}" for k, v in list(value.items())[:MOST_FACTS])
        return "; ".join(f"{field_words(k)} {_say(v, k)}" for k, v in list(value.items())[:MOST_FACTS]
                         if v not in (None, "", [], {}) and not k.startswith("_"))
    if isinstance(value, list):
        return _list_phrase(value, key)
    return "none" if value is None else str(value)


def _group(items: list[Any], key: str) -> str:
    """One group of a grouped listing in words: its first few elements and a count of the rest, or "none"."""
    if not items:
        return "none"
    rest = len(items) - SHOWN
    return _join([_say(i, key) for i in items[:SHOWN]] + ([f"{_count(rest)} more"] if rest > 0 else []))


def _person(value: dict[str, Any]) -> str | None:
    """A name object ({"first_name", "last_name"}) as one name, else None."""
    if {"first_name", "last_name"} <= set(value):
        return f"{value['first_name']} {value['last_name']}"
    return None


def _is_collection(obj: dict[str, Any]) -> bool:
    """Whether a dict is a keyed listing (payment methods by id, product ids by name) rather than one object."""
    if obj and all(isinstance(v, dict) for v in obj.values()) and (len(obj) >= 2 or any(
            ch.isdigit() for k in obj for ch in k)):
        return True
    return len(obj) > 8 and all(not re.fullmatch(r"[a-z][a-z0-9_]*|[a-z]+[A-Z]\w*", k) for k in obj)


def _collection_items(obj: dict[str, Any]) -> list[Any]:
    """A keyed listing's elements, each named by its key."""
    return [k if not isinstance(v, (dict, list)) and len(str(v)) > 30 else f"{k} ({_say(v, k)})"
            if not isinstance(v, (dict, list)) else k for k, v in obj.items()]


def _arg_facts(args: dict[str, Any], spec: ToolSpec | None) -> str:
    """A write's key values from its arguments, in words ("folder name reports"); not a value with no word in it
    (`..`, which "folder .." would not say to anyone)."""
    shown = [(k, v) for k, v in args.items() if isinstance(v, (str, int, float)) and not isinstance(v, bool)
             and not is_secret_param(k) and re.search(r"\w", str(v))][:3]
    return ", ".join(f"{field_words(k)} {_say(v, k)}" for k, v in shown)


_VERBS = LEAD_VERBS | WRITE_VERBS
_TOOL_PREFIXES = _VERBS | {"posting", "message", "ticket", "trading", "travel", "all"}  # a verb or a BFCL class's word


def _tool_noun(tool: str) -> str:
    """What a tool's result is about, in words: get_flight_status -> "flight status", calculate -> "result"."""
    words = field_words(tool).split()
    while len(words) > 1 and words[0].lower() in _TOOL_PREFIXES:
        words = words[1:]  # the verb and a class prefix go; the last word stays ("get_ticket" -> "ticket")
    if words and words[0].lower() in _VERBS:
        words = []
    for i, w in enumerate(words):
        if w in CUT_WORDS or w == "to":
            words = words[:i]
            break
    while len(words) > 1 and words[-1].lower() in ("details", "info", "information"):  # "order details 1" -> "order 1"
        words = words[:-1]
    return " ".join(words) or "result"


def _singular(noun: str) -> str:
    """The last word of a plural noun made singular ("matching lines" -> "matching line"), "entry" for non-nouns."""
    words = noun.split()
    if not words:
        return "entry"
    last = words[-1]
    if last in {"content", "history", "log", "result", "output", "information", "info", "data"} or \
            last.endswith("list"):  # a list, a watchlist, a playlist: what it lists is not in its name
        return "entry"
    if last.endswith("ies") and len(last) > 4:
        last = last[:-3] + "y"
    elif re.search(r"(ss|sh|ch|x)es$", last):
        last = last[:-2]
    elif last.endswith("s") and not last.endswith(("ss", "us", "is")):
        last = last[:-1]
    return " ".join(words[:-1] + [last])


def _count(n: int) -> str:
    """A count in words up to twelve, in digits beyond."""
    return NUMBER_WORDS[n] if 0 <= n < len(NUMBER_WORDS) else str(n)


def _number(value: float) -> str:
    """A number as people write it: whole numbers without decimals, others to two decimals."""
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value)}"
    return f"{value:.2f}".rstrip("0").rstrip(".")


def currency_of(obj: dict[str, Any], key: str) -> str | None:
    """The currency code the object gives the amount `key` in: a converted amount's target (`to_currency`), the
    amount converted from (`from_currency`), else the object's own `currency`; None when it names none (dollars)."""
    named = {k: v.upper() for k, v in obj.items() if isinstance(v, str) and re.fullmatch(r"[A-Za-z]{3}", v)
             and re.search(r"currency", k, re.I)}
    if "converted" in key or "result" in key:
        return named.get("to_currency") or named.get("target_currency")
    if "from_currency" in named or "base_currency" in named:
        return named.get("from_currency") or named.get("base_currency")
    return named.get("currency")


def _money(value: float) -> str:
    """An amount in dollars: "$237.89", "-$8.54"."""
    return f"{'-' if value < 0 else ''}${abs(value):,.2f}"


def _cut(text: str, limit: int) -> str:
    """`text` whole if short, else cut at the last word boundary before `limit` with an ellipsis."""
    if len(text) <= limit:
        return text
    head = text[:limit].rsplit(" ", 1)[0].rstrip(" ,;:/")
    return head + "\u2026"


def _join(parts: list[str]) -> str:
    """Clauses joined as a list in prose: "a", "a and b", "a, b and c"."""
    parts = [p for p in parts if p]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1] if parts else ""


def _sentence(text: str) -> str:
    """A clause as a sentence: capital first letter, a final full stop (unless it ends in one already)."""
    text = text.strip()
    if not text:
        return ""
    return _upper_first(text) + ("" if text[-1] in ".!?\u2026" else ".")


def _upper_first(text: str) -> str:
    """The text with its first letter upper-case."""
    return text[:1].upper() + text[1:]


def _lower_first(text: str) -> str:
    """The text with its first letter lower-case unless it opens an acronym or a name with capitals inside."""
    return text[:1].lower() + text[1:] if text.split(" ", 1)[0] in COMMON_OPENERS else text


def _joined(part: str, rng: random.Random) -> str:
    """A later call's part opened with a linking word when it starts with a common word (never before a name)."""
    if part.split(" ", 1)[0] not in COMMON_OPENERS | {"I"}:
        return part
    link = rng.choice(["", "Also, ", "And "])
    return link + _lower_first(part) if link else part
