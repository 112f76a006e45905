"""Probe a toolset on sampled configurations to learn what each tool returns, changes and requires."""
from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sap.model import ArgProvenance, Tag, ToolCall, Toolset, ToolSpec
from sap.provenance.fields import candidates
from sap.provenance.generate import generate

AUTH_NAME = re.compile(r"(log_?in|sign_?in|authenticat)", re.I)
LOGOUT_NAME = re.compile(r"(log_?out|sign_?out)", re.I)
STATUS_NAME = re.compile(r"status", re.I)  # `get_login_status` reports a session, it does not open one
AUTH_ERROR = re.compile(r"(log ?in|logged|authenticat|sign ?in|unauthori[sz]ed|token)", re.I)


def is_auth_name(name: str) -> bool:
    """Whether a tool's name says it opens a session (log in, sign in, authenticate), not that it reports one."""
    return bool(AUTH_NAME.search(name)) and not STATUS_NAME.search(name)


@dataclass
class ToolProfile:
    """What probing learned about one tool."""

    outputs: list[Any] = field(default_factory=list)  # successful results, a few kept per sampled configuration
    successes: int = 0
    failures: int = 0
    changed_state: bool = False
    auth_errors: int = 0  # failures before any login that name authentication
    bound_ok: Counter = field(default_factory=Counter)  # (param, "history" | "generated") -> successes
    bound_failed: Counter = field(default_factory=Counter)  # (param, "history" | "generated") -> failures
    bound_changed: Counter = field(default_factory=Counter)  # (param, source) -> successes that changed state

    def prefers_new(self, param: str) -> bool:
        """Whether `param` wants a fresh value: earlier results either failed or changed nothing, fresh ones worked."""
        hist_ok, gen_ok = self.bound_ok[(param, "history")], self.bound_ok[(param, "generated")]
        never_worked = gen_ok > 0 and hist_ok == 0 and self.bound_failed[(param, "history")] > 0
        no_op = self.bound_changed[(param, "generated")] > 0 and hist_ok > 0 and self.bound_changed[(param, "history")] == 0
        return never_worked or no_op


@dataclass
class ProbeReport:
    """Per-tool profiles and the sampled configurations they came from."""

    profiles: dict[str, ToolProfile]
    configs: list[dict[str, Any]]


def _bind_for_probe(spec: ToolSpec, docs: list[Any], rng: random.Random) -> tuple[dict[str, Any], dict[str, str]]:
    """Fill required parameters from earlier results or c0 (newest first) or fresh values (`docs[0]` is c0: dates
    in its calendar, and a read's strings among its values); say which per parameter."""
    args: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in spec.required:
        schema = spec.properties.get(name, {})
        aliases = spec.aliases(name)
        found = next((c for doc in reversed(docs) for c in [candidates(name, schema, doc, aliases)] if c), None)
        if found and rng.random() < 0.75:
            args[name], sources[name] = rng.choice(found).value, "history"
        else:
            args[name], sources[name] = generate(name, schema, rng, docs[0], reuse_existing=False), \
                "generated"
    return args, sources


def probe(toolset: Toolset, seeds: int = 3, passes: int = 4, keep: int = 4, extra: int = 12) -> ProbeReport:
    """Run every tool several times per sampled c0, feeding results forward, and profile the outcomes (keeping
    `keep` results per tool and c0: one c0's empty listings do not hide what another's hold). A tool that has not
    succeeded yet gets up to `extra` more tries per c0, with fresh bindings, until it does (BFCL's estimate_distance
    knows only some pairs of its zip codes)."""
    profiles = {t.name: ToolProfile() for t in toolset.tools}
    configs = []
    auth_tools = [t for t in toolset.tools if is_auth_name(t.name)]
    others = [t for t in toolset.tools if t not in auth_tools and not LOGOUT_NAME.search(t.name)]
    logouts = [t for t in toolset.tools if LOGOUT_NAME.search(t.name)]
    for seed in range(seeds):
        c0 = toolset.sample_config(seed)
        configs.append(c0)
        rng = random.Random(f"probe:{seed}")
        ex = toolset.executor_factory()
        ex.reset(c0)
        docs: list[Any] = [c0]
        # the extra rounds, before the logouts, try only the tools that have not succeeded yet
        order = [others] + [auth_tools + others] * passes + [others] * extra + [logouts]
        extra_rounds = range(passes + 1, passes + 1 + extra)
        logged_in = False
        kept: Counter = Counter()  # results kept per tool for this c0
        for round_no, tools in enumerate(order):
            for spec in tools:
                if round_no in extra_rounds and profiles[spec.name].successes:
                    continue
                before = ex.state()
                args, sources = _bind_for_probe(spec, docs, rng)
                call = ToolCall(call_id="probe", name=spec.name, args_exec=args,
                                args_prov={k: ArgProvenance(tag=Tag.self_create) for k in spec.required})
                res = ex.execute(call)
                prof = profiles[spec.name]
                (prof.bound_ok if res.ok else prof.bound_failed).update(sources.items())
                if res.ok:
                    prof.successes += 1
                    if kept[spec.name] < keep:
                        kept[spec.name] += 1
                        prof.outputs.append(res.value)
                    docs.append(res.value)
                    if ex.state() != before:
                        prof.changed_state = True
                        prof.bound_changed.update(sources.items())
                    if spec in auth_tools:
                        logged_in = True
                else:
                    prof.failures += 1
                    if not logged_in and round_no == 0 and AUTH_ERROR.search(res.error or ""):
                        prof.auth_errors += 1
    return ProbeReport(profiles, configs)
