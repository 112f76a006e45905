"""Repair role: when a call keeps failing, patch the initial configuration c0 (a few set-operations) so that it
can succeed; the rule repairer reads the error by code (statuses, numeric shortfalls, missing records), and
`repair_call` accepts a patch only if every committed call replays to the same result on the patched c0."""
from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol

from pydantic import BaseModel, Field

from sap.agents.llm_common import RESULT_CHARS, STATE_CHARS, Fit, LLMRole, compact, fit, newest_lines
from sap.llm.schema import closed, text_run
from sap.text import QUOTED_SPAN, error_quotes
from sap.errors import SapError
from sap.executors.base import ReplayMismatch, replay
from sap.jsonutil import json_copy
from sap.llm import LLMRoleError
from sap.model import ExecResult, Executor, Tag, ToolCall, Toolset, ToolSpec
from sap.provenance.fields import child_path, singular
from sap.provenance.jsonpath import PATH_TOKEN, PathError, resolve

PatchOp = dict[str, Any]  # {"path": "$.orders[3].status", "value": "pending"}: set the value at path in c0
Part = str | int
_NUMBER = re.compile(r"(?<![\w.\-])\d+(?:\.\d+)?(?![\w\-]|\.\d)")
_MISSING = re.compile(r"not found|no such|does not exist|unknown", re.I)
MAX_OPS = 5
OUTCOME_CHARS = 300  # repair-log outcomes are cut here: the log is in the checkpointed state


class PatchError(SapError, ValueError):
    """A patch operation whose path does not fit the configuration."""


def parse_path(path: str) -> list[Part]:
    """The keys and indexes of a `$.a[0]["b c"]` path; PatchError if it is malformed."""
    if not path.startswith("$"):
        raise PatchError(f"path {path!r} does not start with '$'")
    parts: list[Part] = []
    pos = 1
    for m in PATH_TOKEN.finditer(path, 1):
        if m.start() != pos:
            break
        pos = m.end()
        parts.append(int(m.group(2)) if m.group(2) is not None else
                     json.loads(m.group(3)) if m.group(3) else m.group(1))
    if pos != len(path) or not parts:
        raise PatchError(f"malformed path {path!r}")
    return parts


def format_path(parts: list[Part]) -> str:
    """The path string of `parts`, in the syntax sap records use."""
    path = "$"
    for p in parts:
        path = f"{path}[{p}]" if isinstance(p, int) else child_path(path, p)
    return path


def _kind(value: Any) -> str:
    """The JSON type of a value (integers and floats are both numbers)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), "null")


def op_problem(c0: dict[str, Any], op: PatchOp) -> str | None:
    """Why `op` cannot apply to c0, or None: the path must exist (or add an entry to an existing list or object
    whose entries are alike), and the value must have the JSON type of what it replaces."""
    try:
        parts = parse_path(op["path"])
        parent = resolve(c0, format_path(parts[:-1])) if len(parts) > 1 else c0
    except (PatchError, PathError) as exc:
        return f"path: {exc}"
    last, value = parts[-1], op["value"]
    if isinstance(parent, list) and isinstance(last, int) and last <= len(parent):
        like = parent[last] if last < len(parent) else (parent[0] if parent else None)
    elif isinstance(parent, dict) and isinstance(last, str):
        siblings = list(parent.values())
        like = parent[last] if last in parent else (siblings[0] if siblings else None)
        if last not in parent and len({_kind(v) for v in siblings}) > 1:
            return f"path: {op['path']} adds a key to an object whose values differ in type"
    else:
        return f"path: {op['path']} does not exist in the initial state"
    if like is not None and _kind(like) != _kind(value):
        return f"value: {json.dumps(value)[:60]} is a {_kind(value)}, the initial state has a {_kind(like)} there"
    return None


def apply_patch(c0: dict[str, Any], ops: list[PatchOp]) -> dict[str, Any]:
    """A copy of c0 with every operation applied in order (c0 itself is never changed)."""
    out = json_copy(c0)
    for op in ops:
        if (problem := op_problem(out, op)) is not None:
            raise PatchError(problem)
        parts = parse_path(op["path"])
        parent = resolve(out, format_path(parts[:-1])) if len(parts) > 1 else out
        if isinstance(parent, list) and parts[-1] == len(parent):
            parent.append(json_copy(op["value"]))
        else:
            parent[parts[-1]] = json_copy(op["value"])
    return out


@dataclass(frozen=True)
class RepairRequest:
    """What a repairer sees: the failing call, the executor's error, the current c0 and the earlier rounds."""

    spec: ToolSpec
    call: ToolCall
    error: str
    c0: dict[str, Any]
    history: list[ToolCall]  # the committed calls before the failing one
    tools: list[ToolSpec]  # every tool of the toolset (their enums name the values a field can take)
    tried: list[dict[str, Any]] = field(default_factory=list)  # earlier rounds: {"patch": [...], "outcome": "..."}


class Repairer(Protocol):
    """Proposes a c0 patch that may let a failing call succeed (rule or LLM)."""

    def propose(self, req: RepairRequest) -> list[PatchOp] | None:
        """Set-operations on c0, or None when no configuration change can help."""


def _walk(doc: Any, parts: tuple[Part, ...] = ()) -> Iterator[tuple[tuple[Part, ...], Any]]:
    """Every value in `doc` with its path parts, depth first in document order (the root included)."""
    yield parts, doc
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _walk(v, (*parts, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _walk(v, (*parts, i))


def _words(text: str) -> set[str]:
    """Lower-cased singular words of a text or a key (`seats_left` -> {seat, left})."""
    return {singular(w) for w in re.split(r"[^a-z0-9]+", text.lower()) if w}


def _id_key(key: str) -> bool:
    """Whether a key holds an identifier."""
    return key == "id" or key.endswith("_id")


_ID_INDEX: dict[int, tuple[dict[str, Any], dict[str, list[tuple[tuple[Part, ...], dict[str, Any]]]]]] = {}


def _records(c0: dict[str, Any], value: str) -> list[tuple[tuple[Part, ...], dict[str, Any]]]:
    """Objects that `value` identifies (held under an id key), own records before mentions in other records:
    an id key listed first, then shallower paths. The index is built once per c0 object (c0s are never mutated)."""
    hit = _ID_INDEX.get(id(c0))
    if hit is None or hit[0] is not c0:
        found: dict[str, list[tuple[bool, int, tuple[Part, ...], dict[str, Any]]]] = {}
        for parts, record in _walk(c0):
            if isinstance(record, dict):
                for i, (key, held) in enumerate(record.items()):
                    if isinstance(held, str) and _id_key(key):
                        found.setdefault(held, []).append((i > 0, len(parts), parts, record))
        if len(_ID_INDEX) > 64:
            _ID_INDEX.clear()
        hit = _ID_INDEX[id(c0)] = (c0, {v: [(p, r) for _, _, p, r in sorted(recs, key=lambda f: (f[0], f[1]))]
                                        for v, recs in found.items()})
    return hit[1].get(value, [])


def _siblings(c0: dict[str, Any], record_parts: tuple[Part, ...]) -> list[Any]:
    """The entries of the collection holding the record at `record_parts` (itself included)."""
    if not record_parts:
        return []
    parent = resolve(c0, format_path(list(record_parts[:-1]))) if len(record_parts) > 1 else c0
    return list(parent.values()) if isinstance(parent, dict) else list(parent)


def status_patches(req: RepairRequest) -> Iterator[list[PatchOp]]:
    """A record the error names holds a value the error complains about (`order '#W1' is 'cancelled'; only
    pending orders ...`): set that status-like field (its values repeat across sibling records, or a tool enum
    lists them) to another of its values, one the error names first."""
    quoted, words = error_quotes(req.error), _words(req.error)
    for token in sorted(quoted):
        for parts, record in _records(req.c0, token):
            for key, value in record.items():
                if _id_key(key) or not isinstance(value, str) or value == token:
                    continue
                if value not in quoted and not (_words(value) and _words(value) <= words):
                    continue
                seen = Counter(s[key] for s in _siblings(req.c0, parts)
                               if isinstance(s, dict) and isinstance(s.get(key), str))
                enums = {v for spec in req.tools for v in spec.properties.get(key, {}).get("enum", [])
                         if isinstance(v, str)}
                if not enums and len(seen) > sum(seen.values()) / 2:
                    continue  # not a status-like field: its values hardly repeat (names, descriptions)
                seen.update({v: 0 for v in enums})
                options = sorted((v for v in seen if v != value),
                                 key=lambda v: (not (_words(v) and _words(v) <= words), -seen[v], v))
                if options:
                    yield [{"path": format_path([*parts, key]), "value": options[0]}]


def numeric_patches(req: RepairRequest) -> Iterator[list[PatchOp]]:
    """A number field the error names falls short: raised to the largest number the error gives (`wallet balance
    427.0 is less than the price 790.0`), or from zero to one in a record the error names (`no economy seats left`)."""
    plain = QUOTED_SPAN.sub(" ", req.error)
    numbers = [float(n) for n in _NUMBER.findall(plain)]
    words = _words(plain)
    found: list[tuple[int, int, list[PatchOp]]] = []
    for parts, value in _walk(req.c0) if len(numbers) > 1 else ():
        if not parts or isinstance(value, bool) or not isinstance(value, (int, float)) or not isinstance(parts[-1], str):
            continue
        overlap = len(_words(parts[-1]) & words)
        if overlap and value in numbers and max(numbers) > value:
            target = math.ceil(max(numbers))
            found.append((-overlap, numbers.index(value), [{"path": format_path(list(parts)),
                                                            "value": float(target) if isinstance(value, float) else target}]))
    for token in sorted(error_quotes(req.error)):
        for rparts, record in _records(req.c0, token)[:1]:
            for parts, value in _walk(record, rparts):
                if (parts and isinstance(parts[-1], str) and not isinstance(value, bool)
                        and isinstance(value, (int, float)) and value <= 0):
                    overlap = len(_words(" ".join(str(p) for p in parts[len(rparts):])) & words)
                    if overlap:
                        found.append((-overlap, len(numbers), [{"path": format_path(list(parts)), "value": 1}]))
    for _, _, patch in sorted(found, key=lambda f: (f[0], f[1], f[2][0]["path"])):
        yield patch


def _descend(doc: dict[str, Any], name: str) -> tuple[list[str], Any] | None:
    """The child called `name` of a tree node, directly or through one wrapper object (`contents`)."""
    if name in doc:
        return [name], doc[name]
    for key, value in doc.items():
        if isinstance(value, dict) and name in value:
            return [key, name], value[name]
    return None


def _tree_slot(c0: dict[str, Any], location: str, name: str) -> tuple[list[Part], str] | None:
    """Where a missing entry `name` (relative to the folder-like `location`) belongs in a keyed tree: the parts of
    the object that should hold it, and the wrapper key its siblings live under."""
    names = [n for n in location.split("/") if n] + name.split("/")[:-1]
    if any(n in (".", "..") for n in names):
        return None
    parts: list[Part] = []
    node: Any = c0
    wrapper = ""
    for n in names:
        if not isinstance(node, dict) or (step := _descend(node, n)) is None:
            return None
        wrapper = step[0][0] if len(step[0]) > 1 else wrapper
        parts += step[0]
        node = step[1]
    if not isinstance(node, dict):
        return None
    holder = wrapper if isinstance(node.get(wrapper), dict) else next(
        (k for k, v in node.items() if isinstance(v, dict)), None)
    return (parts + [holder], holder) if holder else None


def missing_patches(req: RepairRequest) -> Iterator[list[PatchOp]]:
    """A record the call names does not exist: add one, copied from its kind's first record with the id set (a
    booking to `bookings`), or for a keyed tree an entry like its smallest namesake (a file of the same extension)."""
    if not _MISSING.search(req.error):
        return
    quoted = error_quotes(req.error)
    named = [(arg, v) for arg, v in sorted(req.call.args_exec.items()) if isinstance(v, str) and v in quoted]
    if not named:
        return
    known: set[str] = set()
    for _, v in _walk(req.c0):
        if isinstance(v, str):
            known.add(v)
        elif isinstance(v, dict):
            known.update(v)
    for arg, value in named:
        if value in known:
            continue
        for parts, doc in _walk(req.c0):
            if isinstance(doc, list) and doc and all(isinstance(x, dict) and arg in x for x in doc):
                yield [{"path": format_path([*parts, len(doc)]), "value": {**doc[0], arg: value}}]
        for location in sorted(q for q in quoted if q.startswith("/")):
            slot = _tree_slot(req.c0, location, value)
            if slot is None:
                continue
            holder_parts, holder = slot
            leaf = value.split("/")[-1]
            ext = os.path.splitext(leaf)[1]
            like = min(((len(json.dumps(v)), k, v) for parts, doc in _walk(req.c0)
                        if parts and parts[-1] == holder and isinstance(doc, dict)
                        for k, v in doc.items() if isinstance(v, dict) and os.path.splitext(k)[1] == ext),
                       key=lambda entry: entry[:2], default=None)
            if like is not None:
                yield [{"path": format_path([*holder_parts, leaf]), "value": like[2]}]


STRATEGIES: tuple[Callable[[RepairRequest], Iterator[list[PatchOp]]], ...] = (
    status_patches, numeric_patches, missing_patches)


def _key(patch: list[PatchOp]) -> str:
    """A patch's identity, to tell whether it was tried."""
    return json.dumps(patch, sort_keys=True)


class RuleRepairer:
    """Proposes, by code, the first patch of its strategies (status, numeric, missing record) not tried yet."""

    def propose(self, req: RepairRequest) -> list[PatchOp] | None:
        """The first untried patch that applies to c0, or None."""
        tried = {_key(t["patch"]) for t in req.tried}
        for strategy in STRATEGIES:
            for patch in strategy(req):
                if _key(patch) not in tried and all(op_problem(req.c0, op) is None for op in patch):
                    return patch
        return None


class PatchAnswerOp(BaseModel):
    """One set-operation the model proposes."""

    path: str = Field(min_length=2)
    value: Any


class RepairAnswer(BaseModel):
    """The model's patch to c0 (empty: no configuration change can fix the call) and why."""

    patch: list[PatchAnswerOp] = Field(default_factory=list, max_length=MAX_OPS)
    reason: str = ""


# a patch: at most MAX_OPS set-operations, each a `$...` path and a value of any JSON type (op_problem checks it
# against c0, which a schema cannot); no operation means no configuration change can fix the call
REPAIR_SCHEMA = closed({
    "patch": {"type": "array", "maxItems": MAX_OPS, "items": closed({
        "path": {"type": "string", "minLength": 2, "pattern": "^[\\x24]" + text_run(200) + "$"}, "value": {}})},
    "reason": {"type": "string"}})


def related_records(req: RepairRequest, limit: int = 4) -> str:
    """The c0 records the error and the call's arguments name, one `path: record` line each (cut)."""
    tokens = sorted(error_quotes(req.error) | {v for v in req.call.args_exec.values() if isinstance(v, str)})
    lines: list[str] = []
    for token in tokens:
        for parts, record in _records(req.c0, token)[:1]:
            line = f"{format_path(list(parts))}: {compact(record, 500)}"
            if line not in lines:
                lines.append(line)
    return "\n".join(lines[:limit]) or "(none found)"


class LLMRepairer:
    """Asks the model for a patch, showing it the rule repairer's proposal; an invalid answer after the
    client's feedback rounds counts as no patch (the ledger records the failure)."""

    def __init__(self, llm: LLMRole, rule: RuleRepairer | None = None) -> None:
        self.llm, self.rule = llm, rule or RuleRepairer()

    def propose(self, req: RepairRequest) -> list[PatchOp] | None:
        """The model's patch, checked to fit c0 and not to repeat an earlier round's."""
        suggestion = self.rule.propose(req)
        tried = {_key(t["patch"]): t["outcome"] for t in req.tried}

        def check(answer: RepairAnswer) -> None:
            problems = []
            for k, op in enumerate(answer.patch):
                if (problem := op_problem(req.c0, op.model_dump())) is not None:
                    problems.append(f"patch[{k}].{problem}")
            if (outcome := tried.get(_key([op.model_dump() for op in answer.patch]))) is not None:
                problems.append(f"patch: already tried ({outcome})")
            if problems:
                raise ValueError("; ".join(problems))

        try:
            answer = self.llm.ask(
                "repair", RepairAnswer, REPAIR_SCHEMA, check=check, tool=req.spec.name, description=req.spec.description or "(none)",
                args=compact(req.call.args_exec, 600), error=req.error, records=related_records(req),
                state=fit(req.c0, STATE_CHARS),
                history=Fit(newest_lines([f"{c.call_id}: {c.name}({compact(c.args_exec, 200)}) -> "
                                          f"{compact(c.result, RESULT_CHARS)}" for c in req.history[-6:]]), 6 * 700),
                tried="\n".join(f"{compact(t['patch'], 300)} -> {t['outcome']}" for t in req.tried) or "(none)",
                suggestion=json.dumps(suggestion) if suggestion else "(none)")
        except LLMRoleError as exc:
            if exc.kind != "invalid":
                raise
            return None
        return [op.model_dump() for op in answer.patch] or None


@dataclass
class Repaired:
    """A repair that made the call succeed: the whole patch, the patched c0, the live executor and the result."""

    patch: list[PatchOp]
    c0: dict[str, Any]
    executor: Executor
    result: ExecResult


def _source_conflict(c0: dict[str, Any], calls: list[ToolCall]) -> str | None:
    """A call argument taken from c0 whose value the patched c0 no longer holds at its path."""
    for call in calls:
        for name, prov in call.args_prov.items():
            if prov.effective_tag() == Tag.initial_state and prov.path:
                try:
                    held = resolve(c0, prov.path)
                except PathError:
                    held = None
                value = call.arg_value(name)
                if held != value and [held] != value:  # an array argument may take one element as a list
                    return f"{call.call_id} ({call.name}) took {name} from {prov.path}, which the patch changes"
    return None


def repair_call(repairer: Repairer, toolset: Toolset, config: Callable[[list[PatchOp]], dict[str, Any]],
                patch: list[PatchOp], call: ToolCall, error: str, committed: list[ToolCall],
                rounds: int = 3) -> tuple[Repaired | None, list[dict[str, Any]]]:
    """Up to `rounds` repair rounds for a call that failed with `error` on `config(patch)`: each proposal is
    applied on top of the patches kept so far, the committed calls must replay to their results and their c0
    sources must hold, then the call runs again. A proposal that changes the call's error is kept for the next
    round; the outcome is the successful repair (or None) and one log entry per round."""
    specs = {t.name: t for t in toolset.tools}
    log: list[dict[str, Any]] = []
    kept = list(patch)
    ex: Executor | None = None  # one scratch executor for every round (replay resets it)
    try:
        for number in range(1, rounds + 1):
            c0 = config(kept)
            proposal = repairer.propose(RepairRequest(specs[call.name], call, error, c0, committed, toolset.tools,
                                                      [{"patch": e["patch"], "outcome": e["outcome"]} for e in log]))
            if not proposal:
                break
            entry: dict[str, Any] = {"round": number, "patch": proposal}
            log.append(entry)
            try:
                new_c0 = config(kept + proposal)
            except PatchError as exc:
                entry["outcome"] = f"rejected: {exc}"[:OUTCOME_CHARS]
                continue
            if (conflict := _source_conflict(new_c0, committed + [call])) is not None:
                entry["outcome"] = f"rejected: {conflict}"[:OUTCOME_CHARS]
                continue
            ex = ex or toolset.executor_factory()
            try:
                replay(ex, new_c0, committed)
            except ReplayMismatch as exc:
                entry["outcome"] = f"rejected: {exc}"[:OUTCOME_CHARS]
                continue
            res = ex.execute(call)
            if res.ok:
                entry["outcome"] = "ok"
                done, ex = Repaired(kept + proposal, new_c0, ex, res), None
                return done, log
            entry["outcome"] = f"still failing: {res.error}"[:OUTCOME_CHARS]
            if res.error != error:
                kept, error = kept + proposal, res.error or ""
        return None, log
    finally:
        if ex is not None and hasattr(ex, "close"):
            ex.close()
