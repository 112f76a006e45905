"""Small builders shared by the tests: calls and plan requests, a collected travel cache, hotel tool specs, and the
mark for tests that need bfcl-eval."""
from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import pytest

from sap.agents.planner import HistoryCall, PlanRequest, StatedValue
from sap.model import ArgProvenance, Tag, ToolCall, ToolSpec
from sap.toolsets import bfcl as bfcl_mod

try:
    bfcl_mod.backend_class("GorillaFileSystem")
    HAVE_BFCL = True
except bfcl_mod.BfclUnavailable:
    HAVE_BFCL = False
needs_bfcl = pytest.mark.skipif(not HAVE_BFCL, reason=f"bfcl-eval is not installed ({bfcl_mod.INSTALL_HINT})")

_ids = itertools.count()


def call(name: str, args: dict[str, Any] | None = None, *, result: Any = None, ok: bool = True,
         error: str | None = None, prov: dict[str, ArgProvenance] | None = None, call_id: str | None = None) -> ToolCall:
    """A ToolCall with self_create provenance for every argument unless `prov` is given."""
    args = dict(args or {})
    if prov is None:
        prov = {k: ArgProvenance(tag=Tag.self_create) for k in args}
    return ToolCall(call_id=call_id or f"c{next(_ids)}", name=name, args_exec=args, args_prov=prov,
                    result=result, ok=ok, error=error)


def spec(name: str, description: str = "", required: dict[str, dict[str, Any]] | None = None,
         optional: dict[str, dict[str, Any]] | None = None) -> ToolSpec:
    """A ToolSpec with the given required and optional parameter schemas."""
    required = dict(required or {})
    props = {**required, **(optional or {})}
    return ToolSpec(name=name, description=description,
                    parameters={"type": "object", "properties": props, "required": list(required)})


def request(tool: ToolSpec, tags: dict[str, Tag] | None = None, *, turn: int = 1, index: int = 0,
            history: list[HistoryCall] | None = None, stated: list[StatedValue] | None = None,
            c0: dict[str, Any] | None = None, seed: int = 0, last_error: str | None = None,
            failed_args: list[dict[str, Any]] | None = None, upcoming: list[ToolSpec] | None = None) -> PlanRequest:
    """A PlanRequest with empty defaults."""
    return PlanRequest(spec=tool, tags=dict(tags or {}), turn=turn, index=index, history=list(history or []),
                       stated=list(stated or []), c0=c0 if c0 is not None else {}, rng=random.Random(seed),
                       last_error=last_error, failed_args=list(failed_args or []), upcoming=list(upcoming or []))


def travel_cache(root: Path, seeds: int) -> tuple[Path, Path, Path]:
    """`root`, templates derived from the travel toolset, and a database holding the travel cache collected by
    running them on `seeds` initial configurations."""
    from sap.cli import main

    templates, db = root / "t.yaml", root / "c.db"
    assert main(["templates", "derive", "--toolset", "travel", "-o", str(templates)]) == 0
    assert main(["cache", "collect", "--toolset", "travel", "--templates", str(templates), "--seeds", str(seeds),
                 "--db", f"sqlite:///{db}"]) == 0
    return root, templates, db


# two hotel tools and a template chaining them (cache query writer and role schema tests)
HOTEL_SPECS = [ToolSpec(name="search_hotels", description="Find hotels in a city for some nights.", parameters={
                   "type": "object", "properties": {"city": {"type": "string"}, "nights": {"type": "integer"}},
             "required": ["city", "nights"]}),
               ToolSpec(name="get_hotel", description="Get a hotel's rooms.", parameters={
                   "type": "object", "properties": {"hotel_id": {"type": "string"}}, "required": ["hotel_id"]})]
HOTEL_TEMPLATES = """
templates:
  - name: search-get
    steps:
      - function: search_hotels
      - function: get_hotel
        bind: {hotel_id: {step: 0, path: "$.hotels[*].id"}}
"""


def replay_script(records: list[dict]) -> list:
    """Scripted model replies that replay each record's own assistant messages: its tool calls, then its answers."""
    from sap.testing import Reply, ToolCalls

    script: list = []
    for record in records:
        for m in record["messages"][1:]:
            if m["role"] == "assistant" and m.get("tool_calls"):
                script.append(ToolCalls(tuple((tc["function"]["name"], tc["function"]["arguments"])
                                              for tc in m["tool_calls"])))
            elif m["role"] == "assistant":
                script.append(Reply(m["content"] or "ok"))
    return script
