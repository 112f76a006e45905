"""Probe a toolset on sampled configurations to learn what each tool returns, changes and requires."""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from sap.model import ArgProvenance, Tag, ToolCall, Toolset, ToolSpec
from sap.provenance.fields import candidates
from sap.provenance.generate import generate

AUTH_NAME = re.compile(r"(log_?in|sign_?in|authenticat)", re.I)
LOGOUT_NAME = re.compile(r"(log_?out|sign_?out)", re.I)
AUTH_ERROR = re.compile(r"(log ?in|logged|authenticat|sign ?in|unauthori[sz]ed)", re.I)


@dataclass
class ToolProfile:
    """What probing learned about one tool."""

    outputs: list[Any] = field(default_factory=list)  # successful results, a few kept
    successes: int = 0
    failures: int = 0
    changed_state: bool = False
    auth_errors: int = 0  # failures before any login that name authentication


@dataclass
class ProbeReport:
    """Per-tool profiles and the sampled configurations they came from."""

    profiles: dict[str, ToolProfile]
    configs: list[dict[str, Any]]


def _bind_for_probe(spec: ToolSpec, docs: list[Any], rng: random.Random) -> dict[str, Any]:
    """Fill required parameters from earlier results or c0 (newest first), else generate them."""
    args: dict[str, Any] = {}
    for name in spec.required:
        schema = spec.properties.get(name, {})
        found = next((c for doc in reversed(docs) for c in [candidates(name, schema, doc)] if c), None)
        args[name] = rng.choice(found).value if found else generate(name, schema, rng)
    return args


def probe(toolset: Toolset, seeds: int = 3, passes: int = 4, keep: int = 4) -> ProbeReport:
    """Run every tool several times per sampled c0, feeding results forward, and profile the outcomes."""
    profiles = {t.name: ToolProfile() for t in toolset.tools}
    configs = []
    auth_tools = [t for t in toolset.tools if AUTH_NAME.search(t.name)]
    others = [t for t in toolset.tools if t not in auth_tools and not LOGOUT_NAME.search(t.name)]
    logouts = [t for t in toolset.tools if LOGOUT_NAME.search(t.name)]
    for seed in range(seeds):
        c0 = toolset.sample_config(seed)
        configs.append(c0)
        rng = random.Random(f"probe:{seed}")
        ex = toolset.executor_factory()
        ex.reset(c0)
        docs: list[Any] = [c0]
        order = [others] + [auth_tools + others] * passes + [logouts]
        logged_in = False
        for round_no, tools in enumerate(order):
            for spec in tools:
                before = ex.state()
                call = ToolCall(call_id="probe", name=spec.name, args_exec=_bind_for_probe(spec, docs, rng),
                                args_prov={k: ArgProvenance(tag=Tag.self_create) for k in spec.required})
                res = ex.execute(call)
                prof = profiles[spec.name]
                if res.ok:
                    prof.successes += 1
                    if len(prof.outputs) < keep:
                        prof.outputs.append(res.value)
                    docs.append(res.value)
                    if ex.state() != before:
                        prof.changed_state = True
                    if spec in auth_tools:
                        logged_in = True
                else:
                    prof.failures += 1
                    if not logged_in and round_no == 0 and AUTH_ERROR.search(res.error or ""):
                        prof.auth_errors += 1
    return ProbeReport(profiles, configs)
