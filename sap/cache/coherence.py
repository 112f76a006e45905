"""Entity coherence of a chain joined from cached responses: a thing (an object with an id) keeps its fields from
one response to the next unless a call that changes state came between; responses recorded on different initial
states or around writes can disagree, and a chain that joins them tells a story no executor would."""
from __future__ import annotations

from typing import Any

from sap.fsm.build import named_read
from sap.model import ToolSpec, Trajectory

_SCALARS = (str, int, float, bool)


def _entities(node: Any, out: list[tuple[str, str, dict[str, Any]]]) -> None:
    """(id key, id, scalar fields) of every object in `node` that has a string id (`id` or a `*_id` key first)."""
    if isinstance(node, dict):
        key = next((k for k in node if (k == "id" or k.endswith("_id")) and isinstance(node[k], str)), None)
        if key is not None:
            out.append((key, node[key], {f: v for f, v in node.items() if f != key and isinstance(v, _SCALARS)}))
        for v in node.values():
            _entities(v, out)
    elif isinstance(node, list):
        for v in node:
            _entities(v, out)


def entity_contradictions(traj: Trajectory, specs: dict[str, ToolSpec]) -> list[str]:
    """Each field of a thing that differs between two responses with no state-changing call between them (a call
    of a tool not read-only by its doc or its name's verb), as "call K (tool): key ID field: before -> now"."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    problems = []
    for _, k, call in traj.calls():
        spec = specs.get(call.name)
        if spec is None or not named_read(spec):
            seen = {}  # a change may have happened: what was seen before no longer binds
            continue
        found: list[tuple[str, str, dict[str, Any]]] = []
        _entities(call.result, found)
        for key, ident, fields in found:
            known = seen.setdefault((key, ident), {})
            for field, value in fields.items():
                if field in known and known[field] != value:
                    problems.append(f"call {k} ({call.name}): {key} {ident} {field}: {known[field]!r} -> {value!r}")
                known.setdefault(field, value)
    return problems
