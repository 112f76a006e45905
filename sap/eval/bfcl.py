"""Evaluation tasks from BFCL multi-turn question files with their possible_answer files, run on the `bfcl/...`
toolset of each record's involved classes (package `bfcl-eval`, see `sap.toolsets.bfcl`)."""
from __future__ import annotations

import functools
import inspect
from typing import Any

from sap.eval.tasks import EvalTask, EvalTurn
from sap.model import Toolset
from sap.provenance.external import bfcl_dialogue, bfcl_user_text, infer_nodes, parse_call
from sap.rewards.calls import GoldCall
from sap.toolsets import UnknownToolset, load_toolset
from sap.toolsets.bfcl import LONG_CONTEXT, PREFIX, backend_class
from sap.toolsets.loaders import validate_tool_spec

SYSTEM = "You are a helpful assistant. Use the provided tools to carry out the user's requests."
# BFCL's own user turn for a turn that only gives back withheld functions (its question turn is empty)
ADDED_FUNCTIONS_PROMPT = "I have updated some more functions you can choose from. What about now?"


@functools.cache
def _toolset(name: str) -> Toolset:
    """The toolset `name`, loaded once per process (tasks only read it; each makes its own executors)."""
    return load_toolset(name)


def record_toolset(record: dict[str, Any]) -> Toolset:
    """The `bfcl/A+B[:long_context]` toolset of a BFCL record's involved classes; long-context when its id names
    the long_context category, as BFCL's checker decides. ValueError naming the record for bad classes."""
    rid = str(record["id"])
    name = PREFIX + "+".join(record.get("involved_classes") or []) + (LONG_CONTEXT if "long_context" in rid else "")
    try:
        return _toolset(name)
    except UnknownToolset as exc:
        raise ValueError(f"BFCL record {rid}: involved_classes {record.get('involved_classes')!r}: {exc}") from None


def _named_args(args: dict[str, Any], method: Any) -> dict[str, Any]:
    """Positional arguments of a parsed call (`_0`, `_1`, ...) renamed after the method's parameters."""
    params = [p for p in inspect.signature(method).parameters if p != "self"]
    return {params[int(k[1:])] if k.startswith("_") and k[1:].isdigit() and int(k[1:]) < len(params) else k: v
            for k, v in args.items()}


def task_from_bfcl(record: dict[str, Any]) -> EvalTask:
    """The task of a BFCL multi-turn question merged with its ground truth (`sap.provenance.external.load_bfcl`).

    Tools: the record's `function` list if it has one, else its toolset's tools, less `excluded_function`; a
    function in `missed_function[t]` is withheld before turn t. Calls run on the toolset's BfclExecutor, c0 is
    the record's `initial_config`. Argument tags are inferred from the dialogue as in `sap stats` (no tool
    returns: prev_output is never inferred)."""
    toolset = record_toolset(record)
    classes = [backend_class(c) for c in toolset.extra["bfcl_classes"]]
    if isinstance(record.get("function"), list):
        tools = [validate_tool_spec(f, None, i, bfcl=True).to_openai() for i, f in enumerate(record["function"])]
    else:
        tools = [spec.to_openai() for spec in toolset.tools]
    excluded = set(record.get("excluded_function") or [])
    tools = [t for t in tools if t["function"]["name"] not in excluded]
    missed = {int(t): set(names) for t, names in (record.get("missed_function") or {}).items()}
    tags = iter(infer_nodes(bfcl_dialogue(record)))
    turns = []
    for t, messages in enumerate(record["question"]):
        text = bfcl_user_text(messages)
        gold = []
        for call in record["ground_truth"][t] if t < len(record["ground_truth"]) else []:
            name, args = parse_call(call)
            method = next((getattr(c, name) for c in classes if hasattr(c, name)), None)
            named = _named_args(args, method) if method is not None else args
            gold.append(GoldCall(name, named, {new: next(tags).tag for new in named}))
        hidden = frozenset(n for turn, names in missed.items() if t < turn for n in names)
        turns.append(EvalTurn(text or ADDED_FUNCTIONS_PROMPT, gold, hidden))
    return EvalTask(id=str(record["id"]), system=SYSTEM, tools=tools, c0=record.get("initial_config") or {},
                    turns=turns, executor_factory=toolset.executor_factory,
                    meta={"format": "bfcl", "involved_classes": record.get("involved_classes", []),
                          "toolset": toolset.name})
