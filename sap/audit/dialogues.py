"""Records of any supported format (sap, OpenAI messages, BFCL with answers) as dialogues the audit can check:
user text per turn, calls with arguments, results, declared provenance, and (where the calls could be replayed on
sap's own executors) whether each call changed state."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sap.errors import SapError
from sap.export.records import record_to_trajectory
from sap.provenance.record_tools import all_tools
from sap.jsonutil import read_records
from sap.provenance.external import (
    ReplayedCall,
    bfcl_dialogue,
    detect_format,
    load_bfcl,
    openai_dialogue,
    replay_bfcl,
    replay_calls,
)
from sap.fsm.build import action_tools, classify
from sap.fsm.probe import probe
from sap.model import Toolset
from sap.provenance.policy import policy_of, violations
from sap.toolsets import UnknownToolset, builtin_names, load_toolset


_READ_ONLY: dict[str, dict[str, bool]] = {}  # toolset name -> tool -> read-only (probing is not free)


class AuditInputError(SapError, ValueError):
    """Input the audit cannot read, as one line naming the file and line."""


@dataclass
class AuditCall:
    """One call: its turn, name, arguments, result (None if unknown), declared provenance and state change."""

    turn: int
    name: str
    args: dict[str, Any]
    result: Any = None
    prov: dict[str, dict[str, Any]] | None = None  # sap records: param -> {"tag", "source"}
    changed: bool | None = None  # None: not replayed


@dataclass
class AuditDialogue:
    """What the checks read from one record."""

    id: str
    users: dict[int, str]
    calls: list[AuditCall]
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {"description", "parameters"}
    read_only: dict[str, bool | None] = field(default_factory=dict)
    policy_problems: list[str] | None = None  # violations of the toolset's declared policy (None: no policy)


def _tool_docs(docs: Any) -> dict[str, dict[str, Any]]:
    """name -> function doc, from OpenAI `tools` entries or BFCL `function` entries."""
    out = {}
    for doc in docs if isinstance(docs, list) else []:
        fn = doc.get("function", doc) if isinstance(doc, dict) else None
        if isinstance(fn, dict) and fn.get("name"):
            out[str(fn["name"])] = fn
    return out


def _loadable(name: Any) -> bool:
    """Whether a record's toolset is built into sap (replaying it runs no user code)."""
    return isinstance(name, str) and (name in builtin_names() or name.startswith(("bfcl/", "tau2/")))


def _from_messages(record: dict[str, Any], line: int, fmt: str, toolsets: dict[str, Any]) -> AuditDialogue:
    """A sap or OpenAI-messages record: calls from tool_calls, results from tool messages, sap provenance."""
    base = openai_dialogue(record, line)
    results: dict[str, Any] = {}
    for msg in record["messages"]:
        if msg.get("role") == "tool" and msg.get("tool_call_id"):
            try:
                results[msg["tool_call_id"]] = json.loads(msg.get("content") or "null")
            except (TypeError, ValueError):
                results[msg["tool_call_id"]] = msg.get("content")
    ids = [tc.get("id") for m in record["messages"] if m.get("role") == "assistant" for tc in m.get("tool_calls") or []]
    prov = {p["call_id"]: p["args"] for p in record.get("provenance", [])} if fmt == "sap" else {}
    events = [e for e in base.events if e[0] == "call"]
    calls = [AuditCall(e[1], e[2], e[3], results.get(cid), prov.get(cid)) for e, cid in zip(events, ids + [None] * len(events))]
    users = {e[1]: str(e[2]) for e in base.events if e[0] == "user"}
    out = AuditDialogue(base.id, users, calls, _tool_docs(all_tools(record) or record.get("functions")))
    name = (record.get("meta") or {}).get("toolset")
    if fmt == "sap" and _loadable(name):
        if name not in toolsets:
            try:
                toolsets[name] = load_toolset(name)
            except (UnknownToolset, ValueError):
                toolsets[name] = None
        toolset = toolsets[name]
        if toolset is not None:
            ex = toolset.executor_factory()
            try:
                ex.reset(record.get("initial_config") or {})
                mark_changes(calls, replay_calls(ex, [(c.turn, c.name, c.args) for c in calls]))
            finally:
                if hasattr(ex, "close"):
                    ex.close()
            out.read_only = read_only_tools(toolset)
            if (policy := policy_of(toolset)) is not None:
                out.policy_problems = violations(record_to_trajectory(record), policy)
    return out


def read_only_tools(toolset: Toolset) -> dict[str, bool]:
    """Per tool, whether it is read-only: as declared, else as the rule FSM builder classifies it by probing (an
    action changes the state; `echo` without a file prints), computed once per toolset."""
    if toolset.name not in _READ_ONLY:
        undeclared = any(t.read_only is None for t in toolset.tools)
        writes = set(action_tools(classify(toolset, probe(toolset)))) if undeclared else set()
        _READ_ONLY[toolset.name] = {t.name: t.read_only if t.read_only is not None else t.name not in writes
                                    for t in toolset.tools}
    return _READ_ONLY[toolset.name]


def mark_changes(calls: list[AuditCall], replayed: list[ReplayedCall]) -> None:
    """Copy each replayed call's state change (and its result, where the record shows none) onto the calls."""
    for call, done in zip(calls, replayed):
        call.changed = done.changed
        if call.result is None:
            call.result = done.result


def _from_bfcl(record: dict[str, Any]) -> AuditDialogue:
    """A BFCL question record with its ground truth; results and state changes by replay when bfcl-eval is there."""
    base = bfcl_dialogue(record, replay=False)
    calls = [AuditCall(e[1], e[2].rsplit(".", 1)[-1], e[3]) for e in base.events if e[0] == "call"]
    mark_changes(calls, replay_bfcl(record) or [])
    users = {e[1]: str(e[2]) for e in base.events if e[0] == "user"}
    return AuditDialogue(base.id, users, calls, _tool_docs(record.get("function")))


def load_dialogues(path: str | Path, answers: str | Path | None = None) -> tuple[str, list[AuditDialogue]]:
    """(format, dialogues) of a JSONL file; unreadable input raises AuditInputError naming the file and line."""
    try:
        rows = list(read_records(path))
    except OSError as exc:
        raise AuditInputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise AuditInputError(str(exc) if str(path) in str(exc) else f"{path}: {exc}") from None
    if not rows:
        raise AuditInputError(f"{path}:1: empty file: no records to audit")
    formats = []
    for no, rec in rows:
        try:
            formats.append(detect_format(rec) if isinstance(rec, dict) else detect_format({}))
        except ValueError as exc:
            raise AuditInputError(f"{path}:{no}: {exc}") from None
        if formats[-1] != formats[0]:
            raise AuditInputError(f"{path}:{no}: a {formats[-1]} record in a file of {formats[0]} records")
    fmt = formats[0]
    try:
        if fmt == "bfcl":
            return fmt, [_from_bfcl(r) for r in load_bfcl(path, answers)]
        toolsets: dict[str, Any] = {}
        return fmt, [_from_messages(rec, no, fmt, toolsets) for no, rec in rows]
    except (KeyError, TypeError, AttributeError) as exc:
        raise AuditInputError(f"{path}: a {fmt} record is malformed: {type(exc).__name__}: {exc}") from None
    except ValueError as exc:
        raise AuditInputError(f"{path}: {exc}") from None


def records_dialogues(records: list[dict[str, Any]]) -> list[AuditDialogue]:
    """Dialogues of in-memory sap records (as `sap.api.synthesize` returns them)."""
    toolsets: dict[str, Any] = {}
    return [_from_messages(r, i, "sap", toolsets) for i, r in enumerate(records, 1)]
