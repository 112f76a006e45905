"""Judge role: checks a finished trajectory against SAP's five criteria and accepts it or rejects it.

A rejection has one of two kinds. `reject_text` means the calls are sound but a message is wrong, so the
messages can be rewritten. `reject_truth` means the ground truth itself (the calls, or the dialogue's
structure) is wrong, so the trajectory is discarded. The rule judge checks by code whatever code can check.
An LLM judge returns the same `Verdict` through the same `Judge` protocol.
"""
from __future__ import annotations

import functools
import json
import re
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from sap.fsm.build import READ_VERBS, named_read
from sap.model import Tag, ToolCall, ToolSpec, Trajectory, Turn, split_item_key
from sap.provenance.checks import (answers_recap, mentions, normalize_text, request_start, states_value,
                                   stating_text)
from sap.provenance.fields import index_of
from sap.provenance.goals import requested
from sap.provenance.leaks import data_values, find_leaks, names_of
from sap.provenance.phrasebook import PLACEHOLDER, conveyed, phrase_book
from sap.provenance.jsonpath import PathError, resolve
from sap.provenance.generic_phrases import generic_phrases
from sap.text import task_phrase


Criterion = Literal["message_matches_calls", "config_consistency", "state_evolves", "reads_as_user",
                    "scenario_structure"]
Decision = Literal["accept", "reject_text", "reject_truth"]

CRITERIA: tuple[str, ...] = ("message_matches_calls", "config_consistency", "state_evolves", "reads_as_user",
                             "scenario_structure")
TEXT_CRITERIA = frozenset({"message_matches_calls", "reads_as_user"})  # a failure can be fixed by rewriting text
TRUTH_CRITERIA = frozenset({"config_consistency", "state_evolves", "scenario_structure"})  # calls or structure wrong

MIN_MESSAGE_CHARS = 15
MAX_MESSAGE_CHARS = 1200
MIN_RESTATED_CHARS = 4  # shorter history values are not looked for (too many accidental hits)

_STATED = (Tag.self_create, Tag.initial_state)  # values the user must state in the turn itself
_HISTORY = (Tag.prev_output, Tag.prev_user_msg)  # values the user must refer to, not restate
_RAW_JSON = re.compile(r'\{\s*"[^"\n]*"\s*:|\[\s*\{')
_API_WORDS = re.compile(r"\b(?:args|parameters?|functions?)\b", re.I)
_WORD = re.compile(r"[a-z]+")
_QUESTION = re.compile(r"\?")
_CANNOT = re.compile(r"\b(?:can ?not|can't|can’t|unable|not able|isn't possible|is not possible|not supported|"
                     r"don't have|do not have|no (?:tool|way|function|means)|not available|beyond)\b", re.I)
_STOPWORDS = frozenset("""
    about above after again also an and any are because been before being below between both but by can could
    does doing down during each either else every from further have having here into itself just more most
    much must need only other otherwise over same should since some such than that their theirs them then
    there these they this those through under unless until upon very want were what when where whether which
    while will with within without would your yours given optionally the one its all not
""".split())
_COURTESY = frozenset({"please", "kindly", "could", "can", "would", "just", "also", "now", "then"})  # not a task word


class Finding(BaseModel):
    """One failed criterion: which, where (turn index, or None for the whole dialogue) and why."""

    criterion: Criterion
    turn: int | None = None
    detail: str
    diagnosis: Literal["text", "truth"] | None = Field(default=None, exclude_if=lambda v: v is None)  # an LLM
    # judge's own diagnosis; None: the kind follows from the criterion

    @property
    def kind(self) -> Literal["text", "truth"]:
        """`text` if rewriting the messages can fix it, `truth` if the calls or structure are wrong."""
        if self.diagnosis is not None:
            return self.diagnosis
        return "text" if self.criterion in TEXT_CRITERIA else "truth"


class Verdict(BaseModel):
    """The judge's decision on one trajectory, with every finding behind it."""

    decision: Decision
    reasons: list[Finding] = Field(default_factory=list)

    @property
    def accepted(self) -> bool:
        """Whether the trajectory passed."""
        return self.decision == "accept"

    @property
    def criteria(self) -> set[str]:
        """The names of the criteria that failed."""
        return {f.criterion for f in self.reasons}

    def next_step(self, rounds: int, max_rewrites: int) -> tuple[Literal["accept", "rewrite", "drop"], str | None]:
        """What a graph does with this verdict after `rounds` texts: accept; rewrite the text while a text problem
        has rewrites left; else drop, with the reason."""
        if self.accepted:
            return "accept", None
        if self.decision == "reject_text" and rounds <= max_rewrites:
            return "rewrite", None
        first = self.reasons[0]
        return "drop", f"judge {self.decision}: {first.criterion}: {first.detail}"

    @classmethod
    def from_findings(cls, findings: list[Finding]) -> "Verdict":
        """Any ground-truth finding rejects as truth; else any text finding rejects as text; else accept."""
        if any(f.kind == "truth" for f in findings):
            decision: Decision = "reject_truth"
        elif findings:
            decision = "reject_text"
        else:
            decision = "accept"
        return cls(decision=decision, reasons=list(findings))


class Judge(Protocol):
    """Judges a trajectory against SAP's criteria (rule or LLM)."""

    def judge(self, traj: Trajectory, specs: dict[str, ToolSpec]) -> Verdict:
        """The verdict on `traj`, whose calls use the tools in `specs` (by name)."""


@runtime_checkable
class CallsJudge(Protocol):
    """A judge that can also judge a trajectory's calls alone, before any message is written (both built-in judges
    can; the synthesis graph then spares writing messages for a trajectory `judge` would reject whatever they say)."""

    def judge_calls(self, traj: Trajectory, specs: dict[str, ToolSpec]) -> Verdict:
        """The verdict of the criteria that read the calls only."""


# ---------------------------------------------------------------------------------------------------------
# text helpers


def _occurs(text: str, value: str) -> bool:
    """Whether `value` occurs in `text` as a whole token run (case- and whitespace-insensitive); a part of a longer
    identifier (`roadmap` in `roadmap_review.log`) or path (`/workspace` in `/workspace/docs/a.txt`) does not
    count."""
    needle = normalize_text(value)
    if not needle:
        return False
    return re.search(r"(?<![a-z0-9_-])" + re.escape(needle) + r"(?![a-z0-9_-]|[/.][a-z0-9])",
                     normalize_text(text)) is not None


def stem(word: str) -> str:
    """A crude stem, so that `bookings`, `booked` and `booking` meet `book`."""
    for suffix in ("ings", "ing", "ies", "es", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def task_words(spec: ToolSpec) -> list[str]:
    """The content words (4+ letters, no stop words) of a tool's description, else of its name, in order: a user
    message refers to the task when it holds one of them (in any form of the same stem)."""
    text = spec.description or spec.name.replace("_", " ")
    words = [w for w in _WORD.findall(text.lower()) if len(w) >= 4 and w not in _STOPWORDS]
    if not words:
        words = [w for w in _WORD.findall(spec.name.lower()) if len(w) >= 4]
    return list(dict.fromkeys(words))


def content_words(spec: ToolSpec) -> set[str]:
    """Stems of the task words of a tool."""
    return {stem(w) for w in task_words(spec)}


def phrase_verbs(specs: dict[str, ToolSpec]) -> dict[str, frozenset[str]]:
    """Per tool, the stems of the words its requests open with ("remove {file_name}", "look for ..."): how users of
    the toolset word the task, beside its description's words (its phrase book's requests, else its generic ones)."""
    book = phrase_book(specs)
    entries = {name: book.tools[name] if book is not None and name in book.tools else generic_phrases(spec, specs)
               for name, spec in specs.items()}
    return {name: _opening_stems((*t.requests, *(r for c in t.when for r in c.requests), *t.goals))
            for name, t in entries.items()}


@functools.lru_cache(maxsize=4096)
def _opening_stems(texts: tuple[str, ...]) -> frozenset[str]:
    """The stems of the first content word of each request text (once per tool's texts: the judge asks per
    record)."""
    firsts = (next((w for w in _WORD.findall(PLACEHOLDER.sub(" ", text).lower())
                    if w not in _STOPWORDS and w not in _COURTESY), None) for text in texts)
    return frozenset(stem(w) for w in firsts if w)


def _message_stems(message: str) -> set[str]:
    """Stems of every word of a message."""
    return {stem(w) for w in _WORD.findall(message.lower())}


def _strings(value: Any) -> list[str]:
    """The string values inside an argument value (itself, or the strings of a list)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def _changes_state(spec: ToolSpec | None, name: str) -> bool:
    """Whether a tool changes something: its doc's read_only flag, else a non-read verb leading its name."""
    if spec is not None and spec.read_only is not None:
        return not spec.read_only
    return name.lower().split("_")[0] not in READ_VERBS


def _consumes_a_result(calls: list[ToolCall]) -> bool:
    """Whether a call takes a value that an earlier call's result showed: a P_o source, or (what the dialogue shows
    whatever the tags say, so also for records made without them) a name-like argument value, a string of at least
    MIN_RESTATED_CHARS characters, that stands in an earlier successful result."""
    shown: set[str] = set()
    for call in calls:
        if any(p.effective_tag() == Tag.prev_output for p in call.args_prov.values()):
            return True
        values = [v for arg in call.args_exec.values() for v in (arg if isinstance(arg, list) else [arg])]
        if any(isinstance(v, str) and len(v) >= MIN_RESTATED_CHARS and v in shown for v in values):
            return True
        if call.ok:
            for f in index_of(call.result).fields:
                shown.update(v for v in (f.value if isinstance(f.value, list) else [f.value]) if isinstance(v, str))
    return False


def _signature(turn: Turn) -> tuple[tuple[str, str], ...]:
    """The calls of a turn as comparable (name, canonical arguments) pairs."""
    return tuple((c.name, json.dumps(c.args_exec, sort_keys=True, default=str)) for c in turn.calls)


_NO_VALUE = object()


def _single_value(c0: dict[str, Any], key: str) -> Any:
    """The one distinct value c0 holds under `key` anywhere in it, or _NO_VALUE (absent or several values)."""
    fields = [f for _, f in index_of(c0).by_name.get(key, ()) if f.names[0] == key]
    distinct = {json.dumps(f.value, sort_keys=True, default=str): f.value for f in fields}
    return next(iter(distinct.values())) if len(distinct) == 1 else _NO_VALUE


def _same(a: Any, b: Any) -> bool:
    """Equal values, strings compared case- and whitespace-insensitively."""
    if isinstance(a, str) and isinstance(b, str):
        return normalize_text(a) == normalize_text(b)
    return a == b


# ---------------------------------------------------------------------------------------------------------
# the rule judge


class RuleJudge:
    """Checks by code what code can check of SAP's five judge criteria; lists every finding."""

    def judge(self, traj: Trajectory, specs: dict[str, ToolSpec]) -> Verdict:
        """All findings on `traj`, and the decision they lead to."""
        findings: list[Finding] = []
        findings += self.message_matches_calls(traj, specs)
        findings += self.config_consistency(traj, specs)
        findings += self.state_evolves(traj, specs)
        findings += self.reads_as_user(traj, specs)
        findings += self.scenario_structure(traj, specs)
        return Verdict.from_findings(findings)

    def judge_calls(self, traj: Trajectory, specs: dict[str, ToolSpec]) -> Verdict:
        """The findings of the criteria that read the calls only (state_evolves)."""
        return Verdict.from_findings(self.state_evolves(traj, specs))

    # 1 -----------------------------------------------------------------------------------------------
    def message_matches_calls(self, traj: Trajectory, specs: dict[str, ToolSpec]) -> list[Finding]:
        """Each user message states its new and config values, does not restate history values verbatim,
        and refers to the task of each call the user asks for (not to a goal turn's prerequisites)."""
        out: list[Finding] = []
        verbs = phrase_verbs(specs)
        for pos, turn in enumerate(traj.turns):
            message = stating_text(traj, pos)  # a yes to a recap: the request it confirms, with its calls
            request = [c for t in traj.turns[request_start(traj, pos) if answers_recap(traj, pos) else pos:pos + 1]
                       for c in t.calls]
            stated_here = [v for c in request for n, p in c.args_prov.items()
                           if p.effective_tag() in _STATED or (p.selector is not None and p.selector.named)
                           for v in _strings(c.arg_value(n))]  # a value the user names on purpose counts too
            task_text = " ".join(f"{specs[c.name].description} {task_phrase(specs[c.name])}" for c in request
                                 if c.name in specs)  # the doc's wording and the imperative a message uses
            # after a clarification turn with no calls, the task may have been named in that turn
            context = message
            if pos > 0 and not traj.turns[pos - 1].calls:
                context = traj.turns[pos - 1].user_message + " " + message
            words = _message_stems(context)
            for index, call in enumerate(turn.calls):
                where = f"call {index} ({call.name})"
                out += self._values_stated(turn, message, call, where, stated_here, task_text)
                spec = specs.get(call.name)
                if spec is not None and index in requested(turn) and \
                        not ((content_words(spec) | verbs.get(call.name, set())) & words):
                    out.append(Finding(criterion="message_matches_calls", turn=turn.index,
                                       detail=f"{where}: the user message does not refer to the task "
                                              f"({spec.description[:60] or spec.name!r})"))
        return out

    def _values_stated(self, turn: Turn, message: str, call: ToolCall, where: str, stated_here: list[str],
                       task_text: str) -> list[Finding]:
        """New and config values appear; history values are not restated (unless stated anew in this turn, part
        of the task's own wording, such as `pending` in `cancel a pending order` or a conditional phrase of the
        tool that conveys it, "cancel it, it's no longer needed", or named on purpose: an element of a listing the
        user has not seen yet, which a selector names)."""
        out: list[Finding] = []
        for name, prov in call.args_prov.items():
            value = call.arg_value(name)
            tag = prov.effective_tag()
            if tag in _STATED and not states_value(message, call.name, name, value):
                out.append(Finding(criterion="message_matches_calls", turn=turn.index,
                                   detail=f"{where} arg {name}: {tag.value} value {value!r} is not stated "
                                          f"in the user message"))
            elif tag in _HISTORY and not (prov.selector is not None and prov.selector.named) and \
                    not split_item_key(name):  # an item of an array of whole objects: the user names their choice
                for s in _strings(value):
                    if len(s.strip()) < MIN_RESTATED_CHARS or not _occurs(message, s):
                        continue
                    if any(_same(s, x) for x in stated_here) or _occurs(task_text, s) or \
                            conveyed(message, call.name, name, value):  # a wording of the tool that says it
                        continue
                    out.append(Finding(criterion="message_matches_calls", turn=turn.index,
                                       detail=f"{where} arg {name}: {tag.value} value {s!r} is restated "
                                              f"verbatim instead of referred to"))
        return out

    # 2 -----------------------------------------------------------------------------------------------
    def config_consistency(self, traj: Trajectory, specs: dict[str, ToolSpec]) -> list[Finding]:
        """Config-bound values equal c0 at their path; a read's new values do not contradict a key c0 fixes (a
        write's may: what it sets differs from the current value on purpose, a new baggage count, a flow rate)."""
        out: list[Finding] = []
        for turn_no, index, call in traj.calls():
            where = f"call {index} ({call.name})"
            for name, prov in call.args_prov.items():
                value = call.arg_value(name)
                tag = prov.effective_tag()
                if tag == Tag.initial_state:
                    try:
                        found = resolve(traj.c0, prov.path or "")
                    except PathError as exc:
                        out.append(Finding(criterion="config_consistency", turn=turn_no,
                                           detail=f"{where} arg {name}: {exc}"))
                        continue
                    if found != value and [found] != value:
                        out.append(Finding(criterion="config_consistency", turn=turn_no,
                                           detail=f"{where} arg {name}: initial_state value {value!r} differs "
                                                  f"from c0 {found!r} at {prov.path}"))
                elif tag == Tag.self_create and not (call.name in specs and not named_read(specs[call.name])):
                    fixed = _single_value(traj.c0, name)
                    if fixed is not _NO_VALUE and not _same(fixed, value):
                        out.append(Finding(criterion="config_consistency", turn=turn_no,
                                           detail=f"{where} arg {name}: the user states {value!r}, but c0 holds "
                                                  f"{fixed!r} for {name}"))
        return out

    # 3 -----------------------------------------------------------------------------------------------
    def state_evolves(self, traj: Trajectory, specs: dict[str, ToolSpec]) -> list[Finding]:
        """No two consecutive turns repeat the same calls, and something changes or a lookup chains."""
        out: list[Finding] = []
        for prev, turn in zip(traj.turns, traj.turns[1:]):
            if turn.calls and _signature(prev) == _signature(turn):
                names = ", ".join(c.name for c in turn.calls)
                out.append(Finding(criterion="state_evolves", turn=turn.index,
                                   detail=f"turn {turn.index} repeats the calls of turn {prev.index} ({names})"))
        calls = [c for _, _, c in traj.calls()]
        if calls and not any(_changes_state(specs.get(c.name), c.name) for c in calls) and not _consumes_a_result(calls):
            out.append(Finding(criterion="state_evolves", turn=None,
                               detail="no call changes anything and no call consumes an earlier result"))
        return out

    # 4 -----------------------------------------------------------------------------------------------
    def reads_as_user(self, traj: Trajectory, specs: dict[str, ToolSpec]) -> list[Finding]:
        """User messages contain no raw JSON, no snake_case tool names, no API vocabulary, and have a sane length;
        no user or assistant message leaks internals (sap.provenance.leaks)."""
        out: list[Finding] = []
        tool_names = [n for n in specs if "_" in n]
        tools, params = names_of(specs)
        values = data_values(*[(c.args_exec, c.result) for _, _, c in traj.calls()])
        for pos, turn in enumerate(traj.turns):
            message = turn.user_message or ""

            def add(detail: str) -> None:
                out.append(Finding(criterion="reads_as_user", turn=turn.index, detail=detail))

            if m := _RAW_JSON.search(message):
                add(f"raw JSON in the user message ({message[m.start():m.start() + 30]!r})")
            named = [n for n in tool_names
                     if re.search(r"(?<![A-Za-z0-9_])" + re.escape(n) + r"(?![A-Za-z0-9_])", message, re.I)]
            if named:
                add(f"the user message names tools: {', '.join(named)}")
            for role, text in (("user", message), ("assistant", turn.assistant_message or "")):
                for leak in find_leaks(text, tools, params, values):
                    if role == "assistant" or not any(repr(n) in leak for n in named):
                        add(f"the {role} message leaks {leak}")
            if words := sorted({w.lower() for w in _API_WORDS.findall(message)}):
                add(f"API vocabulary in the user message: {', '.join(words)}")
            length = len(message.strip())
            if not MIN_MESSAGE_CHARS <= length <= MAX_MESSAGE_CHARS and not answers_recap(traj, pos):
                add(f"user message length {length} is outside {MIN_MESSAGE_CHARS}..{MAX_MESSAGE_CHARS}")
        return out

    # 5 -----------------------------------------------------------------------------------------------
    def scenario_structure(self, traj: Trajectory, specs: dict[str, ToolSpec]) -> list[Finding]:
        """The turn structure that `traj.rewrite_kind` calls for."""
        out: list[Finding] = []

        def add(turn: int | None, detail: str) -> None:
            out.append(Finding(criterion="scenario_structure", turn=turn, detail=detail))

        turns = traj.turns
        if not turns:
            add(None, "the dialogue has no turns")
            return out
        for turn in turns:
            if not turn.assistant_message.strip():
                add(turn.index, "the turn has no assistant reply")
        # a turn that ends with the recap of a write the next turn confirms is not a turn without calls' scenario
        empty = [pos for pos, t in enumerate(turns) if not t.calls and not answers_recap(traj, pos + 1)]
        kind = traj.rewrite_kind
        if kind == "base":
            for pos in empty:
                add(turns[pos].index, "a base trajectory has a turn without calls")
        elif kind == "miss_param":
            if len(empty) != 1:
                add(None, f"a miss_param trajectory needs exactly one turn without calls, found {len(empty)}")
            for pos in empty:
                turn = turns[pos]
                if not _QUESTION.search(turn.assistant_message):
                    add(turn.index, "the clarification turn's assistant reply asks no question")
                nxt = turns[pos + 1] if pos + 1 < len(turns) else None
                if nxt is None or not nxt.calls:
                    add(turn.index, "the clarification turn is not followed by a turn with calls")
                elif not any(p.effective_tag() in _STATED and mentions(nxt.user_message, c.arg_value(n))
                             for c in nxt.calls for n, p in c.args_prov.items()):
                    add(nxt.index, "the turn after the clarification supplies no value")
        elif kind == "miss_func":
            if not empty:
                add(None, "a miss_func trajectory needs a turn without calls")
            for pos in empty:
                turn = turns[pos]
                if not _CANNOT.search(turn.assistant_message):
                    add(turn.index, "the turn without calls does not say the assistant cannot do it")
                if pos + 1 >= len(turns) or not turns[pos + 1].calls:
                    add(turn.index, "the turn without calls is not followed by a turn with calls")
        else:
            add(None, f"unknown rewrite kind {kind!r}")
        return out
