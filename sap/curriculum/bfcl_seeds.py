"""BFCL multi-turn tasks as RODS seeds: the ground truth replayed on sap's BFCL executors and each argument's source
located (the tag `sap stats` infers, then the earlier result or c0 field that holds the value), written as a sap
record, so `sap frontier` and the pool make variants of it as of any synthesized record."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from sap.errors import SapError
from sap.eval.bfcl import record_toolset
from sap.export.records import to_record
from sap.model import ArgProvenance, Tag, ToolCall, Toolset, Trajectory, Turn
from sap.provenance.external import (
    bfcl_dialogue,
    bfcl_user_text,
    infer_nodes,
    load_bfcl,
    named_arguments,
    parse_call,
)
from sap.provenance.fields import iter_fields


class NotASeed(SapError, ValueError):
    """A BFCL task that cannot seed variants (a turn without calls, a gold call that fails), naming why."""


def _field_path(doc: Any, name: str, value: Any) -> str | None:
    """The path of a field of `doc` holding `value`, one named like the parameter first; None if none does."""
    def same(v: Any) -> bool:  # equal and of one kind: a flag is no number (False == 0 in Python)
        return v == value and type(v) is type(value) or (isinstance(value, list) and [v] == value)

    found = [f for f in iter_fields(doc) if same(f.value)]
    named = [f for f in found if name in f.names or any(name.endswith(n) or n.endswith(name) for n in f.names)]
    return (named or found)[0].path if found else None


def _source(tag: str, origin: int, name: str, value: Any, turn: int, index: int,
            calls: list[tuple[int, int, ToolCall]], c0: dict[str, Any]) -> ArgProvenance:
    """Where an argument came from: for prev_output the newest earlier call whose result holds it; else, for a name
    (a string), a c0 field holding it (initial_state: a file or account the user names is read from the
    configuration, as sap tags it); else the earlier turn the user stated it in; else a value the user states now
    (self_create)."""
    if tag == Tag.prev_output.value:
        for t, i, call in reversed(calls):
            if (t, i) < (turn, index) and call.ok and (path := _field_path(call.result, name, value)) is not None:
                return ArgProvenance(tag=Tag.prev_output, turn=t, call=i, path=path)
    named = isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
    if named and (path := _field_path(c0, name, value)) is not None:  # a number or flag in c0 is a coincidence
        return ArgProvenance(tag=Tag.initial_state, path=path)
    if tag == Tag.prev_user_msg.value and origin < turn:
        return ArgProvenance(tag=Tag.prev_user_msg, turn=origin)
    return ArgProvenance(tag=Tag.self_create)


def bfcl_seed_record(record: dict[str, Any]) -> dict[str, Any]:
    """The sap record of a BFCL multi-turn question merged with its ground truth (`load_bfcl`); NotASeed naming the
    task when a turn has no gold call or a gold call fails on replay."""
    rid = str(record["id"])
    toolset: Toolset = record_toolset(record)
    c0 = record.get("initial_config") or {}
    truth = record["ground_truth"]
    kind = next((k for k in ("miss_param", "miss_func") if f"multi_turn_{k}" in rid), "base")
    if len(truth) < len(record["question"]) or not truth[-1] or (kind == "base" and any(not c for c in truth)):
        raise NotASeed(f"BFCL task {rid}: a turn without gold calls (RODS seeds of its category call a tool every "
                       f"turn but a MissParam or MissFunc turn, and end with a call)")
    nodes = iter(infer_nodes(bfcl_dialogue(record)))
    ex = toolset.executor_factory()
    ex.reset(c0)
    calls: list[tuple[int, int, ToolCall]] = []
    turns = []
    try:
        for t, texts in enumerate(truth):
            made = []
            for i, text in enumerate(texts):
                name, args = parse_call(text)
                name = name.rsplit(".", 1)[-1]
                args = named_arguments(ex.classes, name, args)
                prov = {}
                for param, value in args.items():
                    node = next(nodes)
                    prov[param] = _source(node.tag, node.origin, param, value, t, i, calls, c0)
                call = ToolCall(call_id=f"call_{t}_{i}", name=name, args_exec=args, args_prov=prov)
                res = ex.execute(call)
                if not res.ok:
                    raise NotASeed(f"BFCL task {rid} turn {t}: gold call {text} fails on replay: {res.error}")
                call = call.model_copy(update={"result": res.value, "ok": True})
                calls.append((t, i, call))
                made.append(call)
            turns.append(Turn(index=t, state=f"t{t + 1}", transition=t, calls=made,
                              user_message=bfcl_user_text(record["question"][t])))
    finally:
        if hasattr(ex, "close"):
            ex.close()
    hidden = {int(t) - 1: list(tools) for t, tools in (record.get("missed_function") or {}).items()}
    traj = Trajectory(id=f"bfcl_seed_{rid}", toolset=toolset.name, seed=0, c0=c0, turns=turns, rewrite_kind=kind,
                      missed_function=hidden)
    return to_record(traj, toolset, {"source": {"format": "bfcl", "id": rid}})


def bfcl_seed_records(questions: str | Path, answers: str | Path | None = None) -> tuple[list[dict[str, Any]],
                                                                                        list[str]]:
    """The sap seed records of a BFCL multi-turn question file (with its possible_answer file, found beside it
    unless given), and why each task that cannot seed was left out."""
    seeds, skipped = [], []
    for record in load_bfcl(questions, answers):
        try:
            seeds.append(bfcl_seed_record(record))
        except NotASeed as exc:
            skipped.append(str(exc))
    return seeds, skipped
