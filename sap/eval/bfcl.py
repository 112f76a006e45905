"""Evaluation tasks from BFCL multi-turn question files with their possible_answer files, run on BFCL's own
backend classes (package `bfcl-eval`, installed with `pip install --no-deps bfcl-eval`)."""
from __future__ import annotations

import functools
import importlib
import inspect
from pathlib import Path
from typing import Any

from sap.eval.tasks import EvalTask, EvalTurn
from sap.executors import PythonObjectExecutor
from sap.provenance.external import bfcl_dialogue, infer_nodes, parse_call
from sap.rewards.calls import GoldCall
from sap.toolsets.loaders import load_bfcl_func_doc, validate_tool_spec

SYSTEM = "You are a helpful assistant. Use the provided tools to carry out the user's requests."
# BFCL's own user turn for a turn that only gives back withheld functions (its question turn is empty)
ADDED_FUNCTIONS_PROMPT = "I have updated some more functions you can choose from. What about now?"


def _bfcl() -> tuple[dict[str, str], dict[str, str], Path]:
    """BFCL's class -> module and class -> func-doc file maps, and its data directory."""
    try:
        import bfcl_eval
        from bfcl_eval.constants.executable_backend_config import (CLASS_FILE_PATH_MAPPING,
                                                                   MULTI_TURN_FUNC_DOC_FILE_MAPPING)
    except ImportError as exc:
        raise ValueError("BFCL question files need the bfcl-eval package: pip install --no-deps bfcl-eval") from exc
    return CLASS_FILE_PATH_MAPPING, MULTI_TURN_FUNC_DOC_FILE_MAPPING, Path(bfcl_eval.__file__).parent / "data"


@functools.cache
def backend_class(name: str) -> type:
    """BFCL's backend class called `name` (e.g. GorillaFileSystem)."""
    modules, _, _ = _bfcl()
    if name not in modules:
        raise ValueError(f"unknown BFCL class {name!r}; known: {', '.join(sorted(modules))}")
    return getattr(importlib.import_module(modules[name]), name)


@functools.cache
def _class_tools(name: str) -> tuple[dict[str, Any], ...]:
    _, docs, data = _bfcl()
    return tuple(spec.to_openai() for spec in load_bfcl_func_doc(data / "multi_turn_func_doc" / docs[name]))


def _long_context(cls: type) -> type:
    """`cls` loading its scenarios with long_context=True, as BFCL does for its long-context category."""
    def load(self: Any, config: dict[str, Any]) -> None:
        cls._load_scenario(self, config, long_context=True)

    return type(cls.__name__, (cls,), {"_load_scenario": load})


def _named_args(args: dict[str, Any], method: Any) -> dict[str, Any]:
    """Positional arguments of a parsed call (`_0`, `_1`, ...) renamed after the method's parameters."""
    params = [p for p in inspect.signature(method).parameters if p != "self"]
    return {params[int(k[1:])] if k.startswith("_") and k[1:].isdigit() and int(k[1:]) < len(params) else k: v
            for k, v in args.items()}


def task_from_bfcl(record: dict[str, Any]) -> EvalTask:
    """The task of a BFCL multi-turn question merged with its ground truth (`sap.provenance.external.load_bfcl`).

    Tools: the record's `function` list if it has one, else BFCL's func docs of its involved classes, less
    `excluded_function`; a function in `missed_function[t]` is withheld before turn t. Argument tags are
    inferred from the dialogue as in `sap stats` (no tool returns: prev_output is never inferred). Records
    whose id names the long_context category load their scenarios with long_context=True, as BFCL does."""
    rid = str(record["id"])
    classes = [backend_class(c) for c in record.get("involved_classes", [])]
    if "long_context" in rid:
        classes = [_long_context(c) if hasattr(c, "_load_scenario") else c for c in classes]
    if isinstance(record.get("function"), list):
        tools = [validate_tool_spec(f, None, i, bfcl=True).to_openai() for i, f in enumerate(record["function"])]
    else:
        tools = [t for c in record.get("involved_classes", []) for t in _class_tools(c)]
    excluded = set(record.get("excluded_function") or [])
    tools = [t for t in tools if t["function"]["name"] not in excluded]
    missed = {int(t): set(names) for t, names in (record.get("missed_function") or {}).items()}
    tags = iter(infer_nodes(bfcl_dialogue(record)))
    turns = []
    for t, messages in enumerate(record["question"]):
        messages = [messages] if isinstance(messages, dict) else messages
        text = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
        gold = []
        for call in record["ground_truth"][t] if t < len(record["ground_truth"]) else []:
            name, args = parse_call(call)
            method = next((getattr(c, name) for c in classes if hasattr(c, name)), None)
            named = _named_args(args, method) if method is not None else args
            gold.append(GoldCall(name, named, {new: next(tags).tag for new in named}))
        hidden = frozenset(n for turn, names in missed.items() if t < turn for n in names)
        turns.append(EvalTurn(text or ADDED_FUNCTIONS_PROMPT, gold, hidden))
    config = record.get("initial_config") or {}
    if len(classes) == 1:  # PythonObjectExecutor gives a lone class the whole c0, BFCL keys it by class name
        config = config.get(classes[0].__name__, {})
    return EvalTask(id=rid, system=SYSTEM, tools=tools, c0=config, turns=turns,
                    executor_factory=lambda: PythonObjectExecutor(classes),
                    meta={"format": "bfcl", "involved_classes": record.get("involved_classes", [])})
