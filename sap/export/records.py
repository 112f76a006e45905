"""The JSONL record: OpenAI chat messages, tools, initial_config, per-argument provenance and meta."""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sap.model import ArgProvenance, Selector, Tag, ToolCall, Toolset, Trajectory, Turn
from sap.version import __version__

TOOLS_ADDED_PROMPT = "You now also have access to the following tools:"


def trajectory_id(toolset: str, seed: int, index: int) -> str:
    """A record id unique across toolsets and runs: `<toolset>-<12 hex of sha256(toolset:slot seed)>-<slot>`, the
    toolset name with characters other than letters, digits, `_` and `.` as `_`; the slot seed carries the run's
    seed (`derive_seed(run_seed, slot)`)."""
    digest = hashlib.sha256(f"{toolset}:{seed}".encode()).hexdigest()[:12]
    return f"{re.sub(r'[^A-Za-z0-9_.]', '_', toolset)}-{digest}-{index}"


def _tool_content(call: ToolCall) -> str:
    """A tool message body: the result as compact JSON."""
    return json.dumps(call.result, ensure_ascii=False)


class RecordMeta(BaseModel):
    """A record's `meta`: the fields every record has, in this order, then its source's own (a synthesis, cache or
    variant slot's index, seeds, FSM, checks, ...) in the order the source gives them."""

    model_config = ConfigDict(extra="allow")

    seed: int
    toolset: str
    sap_version: str
    rewrite_kind: str
    kind: str  # the record kind: base, miss_param or miss_func (rewrite_kind kept for older readers)
    missed_function: dict[str, list[str]] | None = Field(default=None, exclude_if=lambda v: v is None)  # miss_func:
    # turn -> tools hidden at that turn
    virtual_history: list[dict[str, Any]]
    judge: dict[str, Any] | None  # the judge's verdict

    @classmethod
    def of(cls, traj: Trajectory, toolset: Toolset, source: dict[str, Any]) -> RecordMeta:
        """The meta of `traj`'s record over `toolset`, with the source's own fields `source` (which override a
        common field of the same name)."""
        missed = ({str(t): list(tools) for t, tools in sorted(traj.missed_function.items())}
                  if traj.rewrite_kind == "miss_func" or traj.missed_function else None)
        common = {"seed": traj.seed, "toolset": toolset.name, "sap_version": __version__,
                  "rewrite_kind": traj.rewrite_kind, "kind": traj.rewrite_kind, "missed_function": missed,
                  "virtual_history": traj.virtual_history, "judge": traj.judge}
        return cls(**{**common, **source})


def comeback_turns(traj: Trajectory) -> dict[int, list[str]]:
    """MissFunc, as BFCL's `missed_function` says it: turn -> the tools that come back at that turn. A tool hidden at
    turn k (`Trajectory.missed_function`) is unavailable from the first turn through k and available from k + 1."""
    return {k + 1: list(tools) for k, tools in sorted(traj.missed_function.items()) if tools}


def tools_notice(tools: list[dict[str, Any]]) -> str:
    """The system message that hands over tools at the turn they come back: the sentence, then their OpenAI schemas
    as a JSON list (what a chat template would have rendered had they been in `tools` from the start)."""
    return f"{TOOLS_ADDED_PROMPT}\n{json.dumps(tools, ensure_ascii=False)}"


def to_record(traj: Trajectory, toolset: Toolset, meta: dict[str, Any]) -> dict[str, Any]:
    """The export record of an accepted trajectory; `meta` holds its source's own meta fields. A tool that is hidden
    (MissFunc) is left out of `tools` and listed in `tools_added` at the turn it comes back, where a system message
    before that turn's user message carries its schema (`tools_notice`)."""
    from sap.toolsets.system_prompt import system_prompt  # here: importing sap.toolsets loads every backend

    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt(toolset)}]
    schemas = {t.name: t.to_openai() for t in toolset.tools}
    added = {k: [schemas[n] for n in names if n in schemas] for k, names in comeback_turns(traj).items()}
    hidden = {t["function"]["name"] for tools in added.values() for t in tools}
    provenance = []
    for turn in traj.turns:
        if added.get(turn.index):
            messages.append({"role": "system", "content": tools_notice(added[turn.index])})
        messages.append({"role": "user", "content": turn.user_message})
        for group in _groups(turn):
            messages.append({"role": "assistant", "content": None, "tool_calls": [{
                "id": call.call_id, "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.args_exec, ensure_ascii=False)}}
                for call in group]})
            messages += [{"role": "tool", "tool_call_id": call.call_id, "name": call.name, "content": _tool_content(call)}
                         for call in group]
        for i, call in enumerate(turn.calls):
            provenance.append({"call_id": call.call_id, "turn": turn.index, "name": call.name, "args": {
                name: {"tag": p.tag.value, "source": p.source() if p.tag != Tag.fallback else _fallback_source(p),
                       "fallback_from": p.fallback_from.value if p.fallback_from else None}
                for name, p in call.args_prov.items()}, **({"prerequisite": True} if i in turn.prerequisites else {})})
        messages.append({"role": "assistant", "content": turn.assistant_message})
    record = {
        "id": traj.id,
        "messages": messages,
        "tools": [s for name, s in schemas.items() if name not in hidden],
        "initial_config": traj.c0,
        "provenance": provenance,
        "meta": RecordMeta.of(traj, toolset, meta).model_dump(),
    }
    if hidden:
        record["tools_added"] = [{"turn": k, "tools": tools} for k, tools in added.items() if tools]
    return record


def _groups(turn: Turn) -> list[list[ToolCall]]:
    """The turn's calls split into their parallel groups, in order."""
    groups: list[list[ToolCall]] = []
    for call in turn.calls:
        if not groups or groups[-1][-1].group != call.group:
            groups.append([])
        groups[-1].append(call)
    return groups


def _fallback_source(p: ArgProvenance) -> dict[str, Any] | None:
    """Where a fallback value was actually taken from, if anywhere."""
    src = {k: v for k, v in (("turn", p.turn), ("call", p.call), ("path", p.path)) if v is not None}
    if p.selector is not None:
        src["selector"] = p.selector.model_dump(mode="json", exclude_defaults=True)
    return src or None


def record_to_trajectory(record: dict[str, Any]) -> Trajectory:
    """Rebuild the trajectory (calls, results, provenance, messages) from an export record."""
    prov_by_id = {p["call_id"]: p for p in record["provenance"]}
    turns: list[Turn] = []
    results: dict[str, Any] = {}
    for msg in record["messages"]:
        if msg["role"] == "tool":
            results[msg["tool_call_id"]] = json.loads(msg["content"])
    for msg in record["messages"]:
        if msg["role"] == "user":
            turns.append(Turn(index=len(turns), state="", transition=-1, user_message=msg["content"]))
        elif msg["role"] == "assistant" and msg.get("tool_calls"):
            group = max((c.group for c in turns[-1].calls), default=-1) + 1
            for tc in msg["tool_calls"]:
                p = prov_by_id[tc["id"]]
                args_prov = {}
                for name, a in p["args"].items():
                    src = a.get("source") or {}
                    args_prov[name] = ArgProvenance(tag=Tag(a["tag"]), turn=src.get("turn"), call=src.get("call"),
                                                    path=src.get("path"),
                                                    selector=Selector.model_validate(src["selector"])
                                                    if src.get("selector") else None,
                                                    fallback_from=Tag(a["fallback_from"]) if a.get("fallback_from") else None)
                if p.get("prerequisite"):
                    turns[-1].prerequisites.append(len(turns[-1].calls))
                turns[-1].calls.append(ToolCall(call_id=tc["id"], name=tc["function"]["name"],
                                                args_exec=json.loads(tc["function"]["arguments"]),
                                                args_prov=args_prov, result=results.get(tc["id"]), group=group))
        elif msg["role"] == "assistant" and turns:
            turns[-1].assistant_message = msg.get("content") or ""
    meta = record.get("meta", {})
    return Trajectory(id=record["id"], toolset=meta.get("toolset", ""), seed=meta.get("seed", 0),
                      c0=record["initial_config"], turns=turns, virtual_history=meta.get("virtual_history", []),
                      rewrite_kind=meta.get("kind", meta.get("rewrite_kind", "base")),
                      missed_function={int(t): list(tools) for t, tools in (meta.get("missed_function") or {}).items()})
