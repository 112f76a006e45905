"""Provenance statistics for data sap did not write: BFCL multi-turn files and OpenAI-messages JSONL.

Such data declares no provenance, so a tag and an origin are inferred for every argument value from
where the value can be seen in the dialogue before it is used:

| the value appears ...                                   | tag             |
|---------------------------------------------------------|-----------------|
| in the user message of the turn that uses it            | `self_create`   |
| in an earlier user message only                         | `prev_user_msg` |
| in the return of an earlier tool call                   | `prev_output`   |
| in the initial configuration                            | `initial_state` |
| nowhere                                                 | `unknown`       |

The first row that applies wins. `unknown` is its own bucket: `fallback` means that sap could not use
a declared source, which cannot be seen in someone else's data, so it never occurs here and
`fallback_rate` is None.

"Appears" is a case-insensitive substring match of the value's string form, for strings of at
least 2 characters, and a match of a number's digits not inside a longer number. Booleans, None,
empty containers and 1-character strings cannot be matched and are `unknown`. A list or dict is
matched leaf by leaf: it is `unknown` if one leaf is, and otherwise takes the tag and origin of the
leaf that appeared last, since the whole value exists only from then on. A one-item list counts as
its item.

Chain lengths follow SAP 3.4 as `sap.provenance.stats` does for sap records: a `prev_output` or
`prev_user_msg` value's origin is the earliest turn where it appears in a tool return or user message,
every other argument has L = 0. L = turn of use - origin. The broader `value_reuse` figures count
from the earliest use or appearance of an equal matchable value, whatever its tag.

BFCL multi-turn data has no tool returns: its possible_answer file holds the ground-truth calls but
not what they returned. When bfcl-eval is installed, the ground truth is replayed on sap's BFCL
executors (the record's `involved_classes` loaded with its `initial_config`), and the replayed results
are the tool returns, so a value carried from one call's result to the next is `prev_output` as in the
real dialogue. Without bfcl-eval (or with `replay=False`), only the user messages and `initial_config`
are searched: such a value shows up as `initial_state` or `unknown`, and `prev_output` is never inferred.
"""
from __future__ import annotations

import ast
import inspect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from sap.executors.bfcl import BfclExecutor
from sap.jsonutil import read_records
from sap.model import Tag, ToolCall
from sap.provenance.record_tools import all_tools
from sap.provenance.stats import (
    CARRIED,
    ArgNode,
    RecordSummary,
    dataset_stats,
    has_parallel_calls,
    record_kind,
    summarize,
    value_key,
)

UNKNOWN = "unknown"
EXTERNAL_TAGS = [Tag.initial_state.value, Tag.prev_output.value, Tag.self_create.value, Tag.prev_user_msg.value, UNKNOWN]
FORMATS = ("sap", "openai", "bfcl")


# ---------------------------------------------------------------- BFCL call strings

def _dotted_name(node: ast.expr, text: str) -> str:
    """`a.b.c` of a call's function expression; anything else is an error."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted_name(node.value, text)}.{node.attr}"
    raise ValueError(f"not a function name in call {text!r}")


def parse_call(text: str) -> tuple[str, dict[str, Any]]:
    """(function name, keyword arguments) of a BFCL call string such as `cd(folder='document')`.

    The string is parsed with `ast`, never evaluated: every argument must be a Python literal. The
    name may be dotted (`TwitterAPI.post_tweet`). Positional arguments, which BFCL answers do not
    normally use, are named `_0`, `_1`, ...
    """
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not a call: {text!r}") from exc
    call = tree.body
    if not isinstance(call, ast.Call):
        raise ValueError(f"not a call: {text!r}")
    name = _dotted_name(call.func, text)
    args: dict[str, Any] = {}
    try:
        for i, node in enumerate(call.args):
            args[f"_{i}"] = ast.literal_eval(node)
        for kw in call.keywords:
            if kw.arg is None:
                raise ValueError(f"**kwargs in call {text!r}")
            args[kw.arg] = ast.literal_eval(kw.value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError(f"an argument is not a Python literal in call {text!r}") from exc
    return name, args


# ---------------------------------------------------------------- matching values against text

def _fold(text: str) -> str:
    return text.casefold()


def _leaves(value: Any) -> Iterator[Any]:
    """The scalar values inside a value (dict values, list items), depth first."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def _text_of(value: Any) -> str:
    """All keys and scalar values of a JSON-like value, one per line, for searching."""
    parts: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            for k, sub in v.items():
                parts.append(str(k))
                walk(sub)
        elif isinstance(v, (list, tuple, set, frozenset)):
            for sub in v:
                walk(sub)
        elif v is not None:
            parts.append(str(v))

    walk(value)
    return "\n".join(parts)


def _haystack(content: Any) -> str:
    """Searchable, case-folded text of a message body: the raw text plus, if it is JSON, its decoded leaves."""
    if content is None:
        return ""
    if not isinstance(content, str):
        return _fold(_text_of(content))
    text = content
    try:
        decoded = json.loads(content)
    except (ValueError, TypeError):
        decoded = None
    if isinstance(decoded, (dict, list)):
        text += "\n" + _text_of(decoded)
    return _fold(text)


def _number_forms(value: int | float) -> list[str]:
    forms = [repr(value)]
    if isinstance(value, float) and value.is_integer():
        forms.append(str(int(value)))
    return forms


class _Matcher:
    """A compiled test for one scalar value: does it appear in a case-folded text?"""

    def __init__(self, leaf: Any) -> None:
        self.pattern: re.Pattern[str] | None = None
        self.needle: str | None = None
        if isinstance(leaf, bool) or leaf is None:
            return
        if isinstance(leaf, (int, float)):
            alts = "|".join(re.escape(f) for f in _number_forms(leaf))
            self.pattern = re.compile(rf"(?<![\d.])(?:{alts})(?!\.?\d)")
        elif isinstance(leaf, str) and len(leaf.strip()) >= 2:
            self.needle = _fold(leaf.strip())

    @property
    def matchable(self) -> bool:
        return self.pattern is not None or self.needle is not None

    def __call__(self, text: str) -> bool:
        if self.needle is not None:
            return self.needle in text
        return self.pattern is not None and self.pattern.search(text) is not None


# ---------------------------------------------------------------- inference over a dialogue

@dataclass
class Dialogue:
    """A dialogue reduced to what inference needs: events in order, the initial configuration, tool docs."""

    id: str
    initial_config: Any = None
    events: list[tuple] = field(default_factory=list)  # ("user", turn, text) | ("return", turn, text) | ("call", turn, name, args)
    tools: set[str] | None = None
    parallel: bool | None = None
    kind: str = "base"
    turns: int = 0


def infer_nodes(dialogue: Dialogue) -> list[ArgNode]:
    """One ArgNode per argument of every call, with the inferred tag and origin (see the module docstring)."""
    users: list[tuple[int, str]] = []
    returns: list[tuple[int, str]] = []
    config = _haystack(dialogue.initial_config) if dialogue.initial_config is not None else ""
    first_seen: dict[str, int] = {}
    nodes: list[ArgNode] = []

    def leaf_tag(leaf: Any, turn: int) -> tuple[str, int | None]:
        match = _Matcher(leaf)
        if not match.matchable:
            return UNKNOWN, None
        user_turns = [t for t, text in users if match(text)]
        return_turns = [t for t, text in returns if match(text)]
        origin = min(user_turns + return_turns, default=None)
        if turn in user_turns:
            return Tag.self_create.value, origin
        if user_turns:
            return Tag.prev_user_msg.value, origin
        if return_turns:
            return Tag.prev_output.value, origin
        if config and match(config):
            return Tag.initial_state.value, None
        return UNKNOWN, None

    for event in dialogue.events:
        kind, turn = event[0], event[1]
        if kind == "user":
            users.append((turn, _haystack(event[2])))
        elif kind == "return":
            returns.append((turn, _haystack(event[2])))
        else:
            for name, value in event[3].items():
                if isinstance(value, list) and len(value) == 1:
                    value = value[0]
                leaves = list(_leaves(value))
                results = [leaf_tag(leaf, turn) for leaf in leaves]
                if not results or any(tag == UNKNOWN for tag, _ in results):
                    tag, origin = UNKNOWN, None
                else:
                    # the leaf that became available last decides; None (config only) means "at first use"
                    tag, origin = max(results, key=lambda r: turn if r[1] is None else r[1])
                matchable = bool(leaves) and all(_Matcher(leaf).matchable for leaf in leaves)
                sap_origin = origin if tag in CARRIED and origin is not None else turn
                if matchable:
                    key = value_key(value)
                    earlier = first_seen.get(key)
                    candidates = [x for x in (origin, earlier) if x is not None]
                    reuse = min(candidates) if candidates else turn
                    announced = tag == Tag.prev_user_msg.value and earlier is None
                    first_seen[key] = reuse
                else:
                    reuse, announced = turn, False
                nodes.append(ArgNode(turn, name, tag, sap_origin, announced, reuse))
    return nodes


def _summary(dialogue: Dialogue) -> RecordSummary:
    return RecordSummary(turns=dialogue.turns, calls=[e[2] for e in dialogue.events if e[0] == "call"],
                         nodes=infer_nodes(dialogue), tools=dialogue.tools, parallel=dialogue.parallel,
                         kind=dialogue.kind)


# ---------------------------------------------------------------- OpenAI-messages records

def _openai_tool_names(record: dict[str, Any]) -> set[str] | None:
    docs = all_tools(record) if isinstance(record.get("tools"), list) else record.get("functions")
    if not isinstance(docs, list):
        return None
    names = set()
    for doc in docs:
        if isinstance(doc, dict):
            name = (doc.get("function") or {}).get("name") if isinstance(doc.get("function"), dict) else doc.get("name")
            if name:
                names.add(str(name))
    return names


def _arguments(raw: Any, rid: str, name: str) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if raw in (None, ""):
        return {}
    try:
        args = json.loads(raw)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"record {rid}: arguments of tool call {name!r} are not JSON") from exc
    if not isinstance(args, dict):
        raise ValueError(f"record {rid}: arguments of tool call {name!r} are not a JSON object")
    return args


def openai_dialogue(record: dict[str, Any], line: int = 0) -> Dialogue:
    """The dialogue of an OpenAI-messages record: each user message opens a turn; tool messages are returns.

    Assistant `tool_calls` (with JSON-string or object `arguments`) and the older `function_call` are
    read. Calls before the first user message belong to turn 0. The initial configuration is taken
    from `initial_config` if the record has one.
    """
    rid = str(record.get("id", f"#{line}"))
    d = Dialogue(id=rid, initial_config=record.get("initial_config"), tools=_openai_tool_names(record),
                 parallel=has_parallel_calls(record["messages"]), kind=record_kind(record))
    turn = -1
    for msg in record["messages"]:
        role = msg.get("role")
        content = msg.get("content")
        if isinstance(content, list):  # content parts
            content = "\n".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
        if role == "user":
            turn += 1
            d.events.append(("user", turn, content or ""))
        elif role in ("tool", "function"):
            d.events.append(("return", max(turn, 0), content))
        elif role == "assistant":
            calls = [tc.get("function") or {} for tc in msg.get("tool_calls") or []]
            if msg.get("function_call"):
                calls.append(msg["function_call"])
            for fn in calls:
                name = str(fn.get("name", ""))
                d.events.append(("call", max(turn, 0), name, _arguments(fn.get("arguments"), rid, name)))
    d.turns = turn + 1
    return d


# ---------------------------------------------------------------- BFCL multi-turn

def bfcl_answers_path(questions: str | Path) -> Path:
    """Where BFCL keeps the possible answers of a question file: `possible_answer/<same name>` beside it."""
    questions = Path(questions)
    return questions.parent / "possible_answer" / questions.name


def _bfcl_kind(rid: str) -> str:
    """`multi_turn_miss_func_12` -> `miss_func`; ids of other shapes count as "base"."""
    m = re.fullmatch(r"multi_turn_(.+?)_\d+", rid)
    return m.group(1) if m else "base"


def load_bfcl(questions: str | Path, answers: str | Path | None = None) -> list[dict[str, Any]]:
    """The question records of a BFCL multi-turn file, each with its `ground_truth` from the answers file."""
    answers_path = Path(answers) if answers else bfcl_answers_path(questions)
    if not answers_path.is_file():
        raise ValueError(f"no possible_answer file for {questions} (looked for {answers_path}); pass --answers FILE")
    truth: dict[str, Any] = {}
    for no, rec in read_records(answers_path):
        if "id" not in rec or "ground_truth" not in rec:
            raise ValueError(f"{answers_path}:{no}: not a BFCL possible_answer record (needs id and ground_truth)")
        truth[str(rec["id"])] = rec["ground_truth"]
    records = []
    for no, rec in read_records(questions):
        if "question" not in rec:
            raise ValueError(f"{questions}:{no}: not a BFCL question record (no question)")
        rid = str(rec.get("id", f"#{no}"))
        if rid not in truth:
            raise ValueError(f"{questions}:{no}: no ground truth for {rid} in {answers_path}")
        records.append({**rec, "ground_truth": truth[rid]})
    return records


@dataclass(frozen=True)
class ReplayedCall:
    """One ground-truth call replayed on an executor: its result, whether it failed, whether it changed state."""

    turn: int
    name: str
    args: dict[str, Any]
    ok: bool
    result: Any
    changed: bool


def bfcl_executor(record: dict[str, Any]) -> BfclExecutor | None:
    """A BfclExecutor for the record's `involved_classes`, reset to its `initial_config`; None when bfcl-eval is
    not installed or a class is not one sap knows."""
    from sap.toolsets.bfcl import BFCL_CLASSES, BfclUnavailable, backend_class

    classes = record.get("involved_classes") or []
    if not classes or any(c not in BFCL_CLASSES for c in classes):
        return None
    try:
        types = [backend_class(c) for c in classes]
    except BfclUnavailable:
        return None
    ex = BfclExecutor(types, long_context="long_context" in str(record.get("id", "")))
    ex.reset(record.get("initial_config") or {})
    return ex


def replay_calls(ex: Any, calls: Iterable[tuple[int, str, dict[str, Any]]]) -> list[ReplayedCall]:
    """Run (turn, name, args) calls in order on a reset executor; a dotted name (`TwitterAPI.post_tweet`) runs
    as its last part."""
    out = []
    before = json.dumps(ex.state(), sort_keys=True, default=repr)
    for i, (turn, name, args) in enumerate(calls):
        res = ex.execute(ToolCall(call_id=f"replay_{i}", name=name.rsplit(".", 1)[-1], args_exec=args, args_prov={}))
        after = json.dumps(ex.state(), sort_keys=True, default=repr)
        out.append(ReplayedCall(turn, name, args, res.ok, res.value if res.value is not None or res.ok else
                                {"error": res.error}, after != before))
        before = after
    return out


def named_arguments(classes: list[type], name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A call's arguments with positional ones (`_0`, `_1`, as `parse_call` names them) under the parameter names
    of the backend method `name` (the last part of a dotted name); unknown methods keep them as they are."""
    method = next((getattr(c, name.rsplit(".", 1)[-1]) for c in classes if hasattr(c, name.rsplit(".", 1)[-1])), None)
    if method is None or not any(k.startswith("_") for k in args):
        return args
    params = [p for p in inspect.signature(method).parameters if p != "self"]
    return {params[int(k[1:])] if k[:1] == "_" and k[1:].isdigit() and int(k[1:]) < len(params) else k: v
            for k, v in args.items()}


def replay_bfcl(record: dict[str, Any]) -> list[ReplayedCall] | None:
    """The record's ground truth replayed on sap's BFCL executors, or None when that cannot be done."""
    ex = bfcl_executor(record)
    if ex is None:
        return None
    try:
        calls = [(turn, *parse_call(text)) for turn, texts in enumerate(record["ground_truth"]) for text in texts]
        return replay_calls(ex, [(turn, name, named_arguments(ex.classes, name, args)) for turn, name, args in calls])
    except ValueError:
        return None
    finally:
        ex.close()


def bfcl_user_text(messages: Any) -> str:
    """The user's words of one BFCL question turn (a message or a list of them, possibly empty)."""
    messages = [messages] if isinstance(messages, dict) else messages
    return "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")


def bfcl_dialogue(record: dict[str, Any], replay: bool = True) -> Dialogue:
    """The dialogue of a BFCL question record merged with its ground truth (see `load_bfcl`).

    Each entry of `question` is one turn (a list of messages, possibly empty); `ground_truth[i]` is
    the list of call strings of turn i. With `replay` (and bfcl-eval installed) each call is followed
    by its replayed result as a tool return; else there are no tool returns. Tool docs are known only
    when the record carries a `function` list.
    """
    rid = str(record.get("id", ""))
    questions, truth = record["question"], record["ground_truth"]
    if len(truth) > len(questions):
        raise ValueError(f"BFCL record {rid}: {len(truth)} ground-truth turns but {len(questions)} question turns")
    docs = record.get("function")
    tools = {str(f["name"]) for f in docs if isinstance(f, dict) and "name" in f} if isinstance(docs, list) else None
    d = Dialogue(id=rid, initial_config=record.get("initial_config"), tools=tools, parallel=None,
                 kind=_bfcl_kind(rid), turns=len(questions))
    replayed = iter(replay_bfcl(record) or []) if replay else iter(())
    for turn, messages in enumerate(questions):
        d.events.append(("user", turn, bfcl_user_text(messages)))
        for call in truth[turn] if turn < len(truth) else []:
            try:
                name, args = parse_call(call)
            except ValueError as exc:
                raise ValueError(f"BFCL record {rid} turn {turn}: {exc}") from exc
            d.events.append(("call", turn, name, args))
            done = next(replayed, None)
            if done is not None:
                d.events.append(("return", turn, json.dumps(done.result)))
    return d


# ---------------------------------------------------------------- any file

def detect_format(record: dict[str, Any]) -> str:
    """"sap" (has provenance), "openai" (messages, no provenance) or "bfcl" (question); else ValueError."""
    if "provenance" in record and "messages" in record:
        return "sap"
    if "messages" in record:
        return "openai"
    if "question" in record:
        return "bfcl"
    raise ValueError("unknown record format: expected sap records (provenance), OpenAI messages (messages) "
                     "or BFCL multi-turn questions (question)")


def load_any(path: str | Path, answers: str | Path | None = None) -> tuple[str, list[dict[str, Any]]]:
    """(format, records) of a JSONL file, the format taken from its first record (see `detect_format`).

    For BFCL, each record gets its `ground_truth` from `answers`, or from `possible_answer/<same
    name>` beside the question file. Every record must be of the first record's format.
    """
    rows = list(read_records(path))
    if not rows:
        return "sap", []
    fmt = detect_format(rows[0][1])
    for no, rec in rows:
        try:
            other = detect_format(rec)
        except ValueError as exc:
            raise ValueError(f"{path}:{no}: {exc}") from exc
        if other != fmt:
            raise ValueError(f"{path}:{no}: a {other} record in a file of {fmt} records")
    if answers is not None and fmt != "bfcl":
        raise ValueError(f"--answers is for BFCL question files; {path} holds {fmt} records")
    if fmt == "bfcl":
        return fmt, load_bfcl(path, answers)
    return fmt, [rec for _, rec in rows]


def external_stats(fmt: str, records: Iterable[dict[str, Any]], replay: bool = True) -> dict[str, Any]:
    """The `dataset_stats` figures of openai or bfcl records, with inferred tags (and an "unknown" bucket);
    BFCL ground truth is replayed for its tool returns when `replay` and bfcl-eval allow."""
    if fmt == "openai":
        dialogues = (openai_dialogue(r, i) for i, r in enumerate(records, 1))
    elif fmt == "bfcl":
        dialogues = (bfcl_dialogue(r, replay) for r in records)
    else:
        raise ValueError(f"not an external format: {fmt!r}")
    stats = summarize((_summary(d) for d in dialogues), EXTERNAL_TAGS)
    stats["fallback_rate"] = None
    stats["source_columns"]["P_f"] = None  # a fallback cannot be seen in someone else's data
    return stats


def file_stats(path: str | Path, answers: str | Path | None = None, replay: bool = True) -> dict[str, Any]:
    """The statistics of any supported file, with its `format` first (and, for BFCL, whether the ground truth
    was replayed for its tool returns)."""
    fmt, records = load_any(path, answers)
    stats = dataset_stats(records) if fmt == "sap" else external_stats(fmt, records, replay)
    if fmt == "bfcl":
        stats["replayed"] = replay and bool(records) and bfcl_executor(records[0]) is not None
    return {"format": fmt, **stats}
