"""Import recorded conversations into a cache: ComplexFuncBench JSONL and sap's own records."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sap.cache.index import CacheIndex
from sap.errors import ConfigError
from sap.model import ToolSpec


class ImportFormatError(ConfigError):
    """A line that is neither format, or a conversation whose calls and observations do not line up."""


@dataclass
class Imported:
    """What an import found: the functions, the calls with their responses, and the format per line."""

    specs: dict[str, ToolSpec] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, Any], Any]] = field(default_factory=list)
    formats: dict[str, int] = field(default_factory=dict)

    def into(self, index: CacheIndex) -> int:
        """Add the calls to `index`; how many were new."""
        return sum(index.add(f, a, r)[1] for f, a, r in self.calls)


def _arguments(raw: Any, where: str) -> dict[str, Any]:
    """Call arguments given as an object or as JSON text."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise ImportFormatError(f"{where}: arguments are not JSON: {exc.msg}") from exc
    if not isinstance(raw, dict):
        raise ImportFormatError(f"{where}: arguments must be an object, got {type(raw).__name__}")
    return raw


def _observation(raw: Any) -> Any:
    """An observation item: JSON text is parsed, anything else kept."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def _spec(raw: dict[str, Any], where: str) -> ToolSpec:
    fn = raw.get("function", raw) if raw.get("type") == "function" else raw
    if not isinstance(fn, dict) or not fn.get("name"):
        raise ImportFormatError(f"{where}: a function without a name")
    return ToolSpec(name=fn["name"], description=fn.get("description", ""),
                    parameters=fn.get("parameters") or {"type": "object", "properties": {}, "required": []})


def _complexfuncbench(row: dict[str, Any], where: str, out: Imported) -> None:
    """`functions` plus `conversations`: an assistant turn's `function_call` list, then an `observation` turn whose
    `content` list answers those calls in order."""
    for k, fn in enumerate(row.get("functions") or []):
        spec = _spec(fn, f"{where} functions[{k}]")
        out.specs.setdefault(spec.name, spec)
    pending: list[tuple[str, dict[str, Any]]] = []
    for k, turn in enumerate(row["conversations"]):
        at = f"{where} conversations[{k}]"
        role = turn.get("role")
        if role == "assistant" and turn.get("function_call"):
            calls = turn["function_call"]
            calls = calls if isinstance(calls, list) else [calls]
            pending = [(c.get("name", ""), _arguments(c.get("arguments", {}), f"{at} function_call[{i}]"))
                       for i, c in enumerate(calls)]
        elif role == "observation":
            content = turn.get("content")
            results = content if isinstance(content, list) else [content]
            if len(results) != len(pending):
                raise ImportFormatError(f"{at}: {len(results)} observation(s) for {len(pending)} call(s)")
            for (name, args), result in zip(pending, results):
                value = _observation(result)
                if not (isinstance(value, dict) and "error" in value):
                    out.calls.append((name, args, value))
            pending = []


def _sap_record(row: dict[str, Any], where: str, out: Imported) -> None:
    """A sap record: every assistant tool call with its tool message's content."""
    for k, tool in enumerate(row.get("tools") or []):
        spec = _spec(tool, f"{where} tools[{k}]")
        out.specs.setdefault(spec.name, spec)
    results = {m["tool_call_id"]: m.get("content") for m in row["messages"] if m.get("role") == "tool"}
    for m in row["messages"]:
        for i, tc in enumerate(m.get("tool_calls") or []):
            if tc["id"] not in results:
                raise ImportFormatError(f"{where}: tool call {tc['id']} has no tool message")
            value = _observation(results[tc["id"]])
            if not (isinstance(value, dict) and "error" in value):
                out.calls.append((tc["function"]["name"],
                                  _arguments(tc["function"].get("arguments", {}), f"{where} call {tc['id']}"), value))


def import_file(path: str | Path) -> Imported:
    """Read a JSONL file of ComplexFuncBench conversations or sap records (the format is told per line)."""
    out = Imported()
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path}:{no}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ImportFormatError(f"{where}: not JSON: {exc.msg}") from exc
            if isinstance(row, dict) and isinstance(row.get("conversations"), list):
                _complexfuncbench(row, where, out)
                kind = "complexfuncbench"
            elif isinstance(row, dict) and isinstance(row.get("messages"), list):
                _sap_record(row, where, out)
                kind = "sap"
            else:
                raise ImportFormatError(f"{where}: neither a ComplexFuncBench line (conversations) nor a sap record "
                                        "(messages)")
            out.formats[kind] = out.formats.get(kind, 0) + 1
    missing = sorted({f for f, _, _ in out.calls} - set(out.specs))
    if missing:
        raise ImportFormatError(f"{path}: calls to functions with no spec: {', '.join(missing)}")
    return out
