"""SAP's rewrite operators as LangGraph subgraphs: an accepted base trajectory -> a hard variant.

Both operators split one base turn k* in two:

- **MissParam.** The user message of k* loses one or more values it stated verbatim (replaced by vague
  references), the assistant asks for them at k* (no calls), and a reveal turn k*+1 gives them verbatim. The
  original calls of k* run at k*+1, where the revealed values are `self_create`.
- **MissFunc.** A tool t* that k* calls is hidden at k* (`missed_function` {k*: [t*]}). The assistant says it
  cannot do that with the tools it has (no calls), the user hands the tool over at k*+1, and the original calls
  of k* run there.

Values of k* that stay stated in user message k* become `prev_user_msg` anchored at k*. Every later reference
into turns >= k* (prev_output turn indices, prev_user_msg anchors, virtual-history anchors) is renumbered for
the inserted turn. The graph (one for both operators) is `pick -> rewrite -> replay_check -> END`: the variant is
kept only when its calls replay from c0 on a fresh executor with the recorded results, reach the base's end state,
and pass the code check.
"""
from __future__ import annotations

import functools
import json
import random
import re
from dataclasses import dataclass
from typing import Any, Callable, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from sap.agents.judge import Judge
from sap.agents.messenger import ClarifyRequest
from sap.errors import SapError
from sap.executors.base import replay_fresh
from sap.llm import LLMRoleError
from sap.model import ArgProvenance, Tag, ToolCall, Toolset, ToolSpec, Trajectory, Turn
from sap.provenance.checks import mentions
from sap.provenance.policy import policy_check, policy_of
from sap.text import describe_value, humanize, loose_pattern, names_tool

RewriteOp = Literal["miss_param", "miss_func"]

_STATED = (Tag.self_create, Tag.initial_state)

# MissParam wording
_VAGUE = ["the {p} I'll give you", "the {p} I'll tell you in a moment", "{a} {p} I still need to give you"]
_VAGUE_FLAG = ["{p}: I'll tell you whether to set it", "{p}: I'll let you know whether I want it"]
_ASK = ["Could you tell me {x}?", "I need a bit more information before I can do that. Could you tell me {x}?",
        "Before I go ahead, can you let me know {x}?", "Happy to help, but first: could you let me know {x}?"]
_REVEAL = ["Sure, {x}.", "Of course: {x}.", "Sorry about that: {x}.", "Right, {x}."]
# MissFunc wording
_CANNOT = ["I'm sorry, but I can't {task} with the tools I have available right now, so I can't do that yet.",
           "Unfortunately none of the tools I currently have lets me {task}, so I'm unable to carry out that request.",
           "I'm not able to {task} with my current tools, so I can't complete this request for now."]
_CANNOT_PLAIN = ["I'm sorry, but I can't do that with the tools I have available right now.",
                 "Unfortunately none of the tools I currently have can handle that request, so I'm unable to do it."]
_HANDOFF = ["I've added the tool for that now, please go ahead.",
            "I've just given you access to the tool you need. Please go ahead with my request.",
            "The tool for that is available to you now; please continue."]


@dataclass(frozen=True)
class RewriteRejected:
    """A base trajectory the operator could not turn into a kept variant, and why."""

    kind: str
    reason: str


class RewriteState(TypedDict, total=False):
    """One rewrite's progress (plain JSON, last-value channels only)."""

    kind: str  # miss_param / miss_func
    seed: int
    base: dict[str, Any]  # the base Trajectory, model_dump(mode="json")
    plan: dict[str, Any] | None  # what pick chose: turn, the missing values or tool, and the new texts
    result: dict[str, Any] | None  # the kept variant Trajectory dump
    rejection: str | None  # why no variant is kept


class RewriteError(SapError, ValueError):
    """The chosen split cannot be expressed (a reference would point at a turn that no longer states its value)."""


# ---------------------------------------------------------------------------------------------------------
# small text helpers


def _key(value: Any) -> str:
    """A canonical key of a value, for grouping equal values."""
    return json.dumps(value, sort_keys=True, default=str)


def _join(items: list[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _task_words(spec: ToolSpec) -> str:
    """The first clause of a tool's description as a lower-case phrase (`cancel a pending order and refund ...`)."""
    text = (spec.description or "").strip().split("\n")[0]
    text = re.split(r"\. |; |: | \(", text)[0].strip().rstrip(".,")
    return text[:1].lower() + text[1:]


def _is_flag(value: Any) -> bool:
    return isinstance(value, bool)


# ---------------------------------------------------------------------------------------------------------
# the shared split: insert a call-less turn at k, move the calls of k to k+1, renumber the rest


def _stated_here(prov: ArgProvenance) -> bool:
    """Whether the argument's value had to be stated verbatim in its own turn (P_c or P_i, also as a fallback)."""
    return prov.effective_tag() in _STATED


def _revealed(prov: ArgProvenance) -> ArgProvenance:
    """A value the user now gives in the reveal turn: self_create (a fallback keeps its `fallback_from`)."""
    if prov.tag == Tag.fallback:
        return ArgProvenance(tag=Tag.fallback, fallback_from=prov.fallback_from)
    return ArgProvenance(tag=Tag.self_create)


def _restated(anchor: int) -> ArgProvenance:
    """A value stated in turn `anchor` and used one turn later: prev_user_msg, also for a base fallback (P_f may
    recover only from c0 or a new value, and the variant's value comes from the earlier user message)."""
    return ArgProvenance(tag=Tag.prev_user_msg, turn=anchor)


def _anchor(anchor: int, value: Any, k: int, user_k: str, user_next: str) -> int:
    """Where a prev_user_msg anchor (or a virtual-history anchor) into the old turns points after the split."""
    if anchor < k:
        return anchor
    if anchor > k:
        return anchor + 1
    if mentions(user_k, value):
        return k
    if mentions(user_next, value):
        return k + 1
    raise RewriteError(f"value {value!r} anchored at turn {k} is stated neither in user message {k} nor {k + 1}")


def _shift(prov: ArgProvenance, value: Any, k: int, user_k: str, user_next: str) -> ArgProvenance:
    """A history reference renumbered for the turn inserted at k."""
    tag = prov.effective_tag()
    if tag == Tag.prev_output and prov.turn is not None and prov.turn >= k:
        return prov.model_copy(update={"turn": prov.turn + 1})
    if tag == Tag.prev_user_msg and prov.turn is not None:
        return prov.model_copy(update={"turn": _anchor(prov.turn, value, k, user_k, user_next)})
    return prov


def _renumbered(calls: list[ToolCall], turn: int, provs: list[dict[str, ArgProvenance]]) -> list[ToolCall]:
    """The calls with ids for their new turn and the given provenance."""
    return [c.model_copy(update={"call_id": f"call_{turn}_{i}", "args_prov": p})
            for i, (c, p) in enumerate(zip(calls, provs))]


def split_turn(base: Trajectory, k: int, *, user_k: str, assistant_k: str, user_next: str,
               revealed: set[str] = frozenset()) -> Trajectory:
    """`base` with a call-less turn at k and the calls of base turn k at k+1; later turns shift by one.

    In the moved calls, stated values whose key is in `revealed` become self_create at k+1, other stated
    values prev_user_msg anchored at k. Raises RewriteError when a reference cannot be re-pointed.
    """
    old = base.turns[k]
    before = [t for t in base.turns if t.index < k]
    ask = Turn(index=k, state=before[-1].state if before else "", transition=-1, calls=[],
               user_message=user_k, assistant_message=assistant_k)
    moved_provs = []
    for call in old.calls:
        provs = {}
        for name, prov in call.args_prov.items():
            value = call.args_exec.get(name)
            if _stated_here(prov):
                provs[name] = _revealed(prov) if _key(value) in revealed else _restated(k)
            else:
                provs[name] = _shift(prov, value, k, user_k, user_next)
        moved_provs.append(provs)
    moved = old.model_copy(update={"index": k + 1, "user_message": user_next,
                                   "calls": _renumbered(old.calls, k + 1, moved_provs)})
    later = []
    for t in base.turns[k + 1:]:
        provs = [{n: _shift(p, c.args_exec.get(n), k, user_k, user_next) for n, p in c.args_prov.items()}
                 for c in t.calls]
        later.append(t.model_copy(update={"index": t.index + 1, "calls": _renumbered(t.calls, t.index + 1, provs)}))
    virtual = []
    for v in base.virtual_history:
        v = dict(v)
        if isinstance(v.get("turn"), int):
            v["turn"] = _anchor(v["turn"], v.get("value"), k, user_k, user_next)
        if isinstance(v.get("used_at"), int) and v["used_at"] >= k:
            v["used_at"] += 1
        virtual.append(v)
    return base.model_copy(update={"turns": [*before, ask, moved, *later], "virtual_history": virtual,
                                   "judge": None, "stats": {}}, deep=True)


# ---------------------------------------------------------------------------------------------------------
# MissParam: which values of which turn to withhold, and the texts


@dataclass
class _Group:
    """The stated arguments of one turn that share one value."""

    key: str
    value: Any
    names: list[str]  # parameter names, in call order, distinct
    required: bool
    created: bool  # every binding is self_create: a value only the user knows, which MissParam may withhold


def _stated_groups(turn: Turn, specs: dict[str, ToolSpec]) -> list[_Group]:
    """The turn's stated (P_c / P_i) values, one group per distinct value, in call order."""
    groups: dict[str, _Group] = {}
    for call in turn.calls:
        spec = specs.get(call.name)
        for name, prov in call.args_prov.items():
            if not _stated_here(prov):
                continue
            value = call.args_exec.get(name)
            g = groups.setdefault(_key(value), _Group(_key(value), value, [], False, True))
            if name not in g.names:
                g.names.append(name)
            g.required = g.required or (spec is not None and name in spec.required)
            g.created = g.created and prov.tag == Tag.self_create
    return list(groups.values())


def _withhold(message: str, group: _Group, rng: random.Random) -> str | None:
    """The message with the group's value replaced by a vague reference, or None if it cannot be removed."""
    value = group.value
    if isinstance(value, (dict, type(None))) or value == "" or value == []:
        return None
    literal = describe_value(value)
    p = humanize(group.names[0])
    vague = rng.choice(_VAGUE_FLAG if _is_flag(value) else _VAGUE).format(p=p, a="an" if p[:1].lower() in "aeiou" else "a")
    out = message
    for name in group.names:  # the messenger's form: `<param> <value>`
        out = re.sub(loose_pattern(f"{humanize(name)} {literal}"), lambda _: vague, out, flags=re.I)
    for form in dict.fromkeys([literal, literal.strip('"')]):
        if not mentions(out, value):
            break
        if _is_flag(value) or isinstance(value, (int, float)):  # a bare number or flag is too easy to hit elsewhere
            break
        out = re.sub(loose_pattern(form), lambda _: vague, out, flags=re.I)
    return None if mentions(out, value) or out == message else out


def _ask_text(groups: list[_Group], rng: random.Random) -> str:
    """The assistant's clarification request, naming the missing values in plain words."""
    things = []
    for g in groups:
        names = _join([humanize(n) for n in g.names])
        things.append(f"whether {names} should be set" if _is_flag(g.value) else f"the {names}")
    return rng.choice(_ASK).format(x=_join(things))


def _reveal_text(groups: list[_Group], rng: random.Random) -> str:
    """The user's reveal: every missing value verbatim."""
    items = []
    for g in groups:
        names = _join([humanize(n) for n in g.names])
        if _is_flag(g.value):
            items.append(f"{names} should be {describe_value(g.value)}")
        else:
            verb = "are" if isinstance(g.value, list) or len(g.names) > 1 else "is"
            items.append(f"the {names} {verb} {describe_value(g.value)}")
    return rng.choice(_REVEAL).format(x=_join(items))


def _needed_at(base: Trajectory, k: int) -> list[Any]:
    """Values that other turns read from user message k through an anchor (P_u, virtual history)."""
    values = [c.args_exec.get(n) for t in base.turns[k + 1:] for c in t.calls for n, p in c.args_prov.items()
              if p.effective_tag() == Tag.prev_user_msg and p.turn == k]
    return values + [v.get("value") for v in base.virtual_history if v.get("turn") == k]


def _plan_miss_param(base: Trajectory, specs: dict[str, ToolSpec], rng: random.Random) -> dict[str, Any] | str:
    """Choose k* and the values to withhold, and write the three texts; a reason string if nothing fits."""
    options = []  # (turn, groups that can be withheld one at a time, preferred ones)
    for turn in base.turns:
        if not turn.calls:
            continue
        # SAP's MissParam withholds values the user introduces (P_c), never ones read from c0
        groups = [g for g in _stated_groups(turn, specs) if g.created and mentions(turn.user_message, g.value)]
        virtual_here = {_key(v.get("value")) for v in base.virtual_history if v.get("turn") == turn.index}
        # a value also stated "for later" in this message stays; the wording rng here only probes removability
        removable = [g for g in groups if g.key not in virtual_here
                     and _withhold(turn.user_message, g, random.Random(0)) is not None]
        if removable:
            preferred = [g for g in removable if g.required and not _is_flag(g.value)]
            options.append((turn.index, removable, preferred))
    if not options:
        return "no turn states a user-introduced (self_create) value that can be withheld from its user message"
    best = [o for o in options if o[2]] or options
    rng.shuffle(best)
    for k, removable, preferred in best:
        pool = preferred or removable
        size = rng.randint(1, len(pool))
        for chosen in (rng.sample(pool, size), [rng.choice(pool)]):
            plan = _texts_miss_param(base, k, chosen, specs, rng)
            if plan is not None:
                return plan
    return "no choice of withheld values leaves the other values of the turn stated"


def _texts_miss_param(base: Trajectory, k: int, chosen: list[_Group], specs: dict[str, ToolSpec],
                      rng: random.Random) -> dict[str, Any] | None:
    """The plan for withholding `chosen` at turn k, or None if the texts do not work out."""
    turn = base.turns[k]
    chosen = [g for g in _stated_groups(turn, specs) if g.key in {c.key for c in chosen}]  # call order
    user_k = turn.user_message
    for g in chosen:
        user_k = _withhold(user_k, g, rng)
        if user_k is None:
            return None
    keys = {g.key for g in chosen}
    user_next = _reveal_text(chosen, rng)
    if any(mentions(user_k, g.value) or not mentions(user_next, g.value) for g in chosen):
        return None
    kept = [g.value for g in _stated_groups(turn, specs) if g.key not in keys]
    if not all(mentions(user_k, v) for v in kept):
        return None
    if not all(mentions(user_k, v) or (_key(v) in keys and mentions(user_next, v)) for v in _needed_at(base, k)):
        return None
    return {"turn": k, "missing": [{"params": g.names, "value": g.value} for g in chosen],
            "user_k": user_k, "assistant_k": _ask_text(chosen, rng), "user_next": user_next}


# ---------------------------------------------------------------------------------------------------------
# MissFunc: which tool to hide at which turn, and the texts


def _plan_miss_func(base: Trajectory, specs: dict[str, ToolSpec], rng: random.Random) -> dict[str, Any] | str:
    """Choose (k*, t*): a tool first called at k*, so it has not been used before it goes missing."""
    seen: set[str] = set()
    options = []
    for turn in base.turns:
        for name in dict.fromkeys(c.name for c in turn.calls):
            if name not in seen:
                options.append((turn.index, name))
        seen.update(c.name for c in turn.calls)
    if not options:
        return "the base has no calls"
    k, tool = rng.choice(options)
    tools = list(specs)
    task = _task_words(specs[tool]) if tool in specs else ""
    text = rng.choice(_CANNOT).format(task=task) if task else ""
    if not task or names_tool(text, tools):
        text = rng.choice(_CANNOT_PLAIN)
    return {"turn": k, "tool": tool, "user_k": base.turns[k].user_message, "assistant_k": text,
            "user_next": rng.choice(_HANDOFF)}


# ---------------------------------------------------------------------------------------------------------
# the graphs


def _state_diff(a: Any, b: Any) -> str:
    """Which top-level parts of two executor states differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        return f"differs in {', '.join(map(str, keys[:5]))}" + (" ..." if len(keys) > 5 else "")
    return "differs"


Clarifier = Callable[[ClarifyRequest], str]


def messenger_clarifier(messenger: Any) -> Clarifier | None:
    """The messenger's clarification writer (the LLM messenger's `clarify`), or None: the rule wording stands."""
    return getattr(messenger, "clarify", None)


def clarify_request(kind: RewriteOp, plan: dict[str, Any], specs: dict[str, ToolSpec]) -> ClarifyRequest:
    """What the assistant's reply at the plan's turn must do, with the rule wording as the template."""
    missing = plan.get("missing", [])
    tool = plan.get("tool")
    return ClarifyRequest(kind=kind, user_message=plan["user_k"],
                          missing=[humanize(n) for m in missing for n in m["params"]],
                          task=_task_words(specs[tool]) if tool in specs else "",
                          hidden=[m["value"] for m in missing], tools=list(specs), template=plan["assistant_k"])


@dataclass(frozen=True)
class RewriteContext:
    """The rewrite graph's runtime context: the toolset and, optionally, the clarifier (the LLM messenger's), which
    writes the assistant's reply at the unservable turn instead of the rule wording."""

    toolset: Toolset
    clarifier: Clarifier | None = None

    def specs(self) -> dict[str, ToolSpec]:
        """The toolset's tool specs by name."""
        return {t.name: t for t in self.toolset.tools}


Ctx = Runtime[RewriteContext]


def pick(state: RewriteState, runtime: Ctx) -> dict[str, Any]:
    """Choose the turn k* and what goes missing there, and write the rule texts; or reject the base."""
    kind = state["kind"]
    base = Trajectory.model_validate(state["base"])
    if base.rewrite_kind != "base":
        return {"plan": None, "result": None, "rejection": f"the trajectory is already a {base.rewrite_kind} variant"}
    if not base.turns:
        return {"plan": None, "result": None, "rejection": "the base has no turns"}
    rng = random.Random(f"{state['seed']}:{kind}")
    plan = (_plan_miss_param if kind == "miss_param" else _plan_miss_func)(base, runtime.context.specs(), rng)
    if isinstance(plan, str):
        return {"plan": None, "result": None, "rejection": plan}
    return {"plan": plan, "result": None, "rejection": None}


def rewrite_node(state: RewriteState, runtime: Ctx) -> dict[str, Any]:
    """Build the variant from the plan, with the clarifier's reply at k* when there is a clarifier."""
    kind = state["kind"]
    base = Trajectory.model_validate(state["base"])
    plan = state["plan"]
    clarifier = runtime.context.clarifier
    if clarifier is not None:
        try:
            plan = {**plan, "assistant_k": clarifier(clarify_request(kind, plan, runtime.context.specs()))}
        except LLMRoleError as exc:
            return {"result": None, "rejection": f"clarification: {exc}"}
    try:
        variant = build_variant(kind, base, plan)
    except RewriteError as exc:
        return {"result": None, "rejection": f"rewrite: {exc}"}
    return {"result": variant.model_dump(mode="json")}


def replay_check(state: RewriteState, runtime: Ctx) -> dict[str, Any]:
    """Keep the variant only if it replays from c0 to the base's end state and passes the code check."""
    factory = runtime.context.toolset.executor_factory
    base = Trajectory.model_validate(state["base"])
    variant = Trajectory.model_validate(state["result"])
    base_end, base_mismatch = replay_fresh(factory, base.c0, [c for _, _, c in base.calls()])
    if base_mismatch:
        return {"result": None, "rejection": f"the base does not replay: {base_mismatch}"}
    end, mismatch = replay_fresh(factory, variant.c0, [c for _, _, c in variant.calls()])
    reasons = []
    if end != base_end:
        reasons.append(f"the variant's end state differs from the base's end state ({_state_diff(end, base_end)})")
    if mismatch:
        reasons.append(f"replay: {mismatch}")
    reasons += [f"code check: {p}" for p in policy_check(variant, policy_of(runtime.context.toolset))[:3]]
    if reasons:
        return {"result": None, "rejection": "; ".join(reasons)}
    return {"rejection": None}


def _route(state: RewriteState) -> str:
    """Stop at the first rejection."""
    return "stop" if state.get("rejection") else "go"


@functools.cache
def rewrite_graph() -> CompiledStateGraph:
    """pick -> rewrite -> replay_check -> END, compiled once per process for both operators (the state's `kind`
    says which); invoke with {"kind": k, "seed": s, "base": traj dump} and `context=RewriteContext(...)`."""
    builder = StateGraph(RewriteState, context_schema=RewriteContext)
    builder.add_node("pick", pick)
    builder.add_node("rewrite", rewrite_node)
    builder.add_node("replay_check", replay_check)
    builder.add_edge(START, "pick")
    builder.add_conditional_edges("pick", _route, {"go": "rewrite", "stop": END})
    builder.add_conditional_edges("rewrite", _route, {"go": "replay_check", "stop": END})
    builder.add_edge("replay_check", END)
    return builder.compile(name="rewrite")


def build_variant(kind: RewriteOp, base: Trajectory, plan: dict[str, Any]) -> Trajectory:
    """The variant that `plan` (from the pick node) describes; raises RewriteError if it cannot be built."""
    k = plan["turn"]
    revealed = {_key(m["value"]) for m in plan.get("missing", [])}
    variant = split_turn(base, k, user_k=plan["user_k"], assistant_k=plan["assistant_k"],
                         user_next=plan["user_next"], revealed=revealed)
    update: dict[str, Any] = {"id": f"{base.id}-{kind}", "rewrite_kind": kind,
                              "checks": {"rewrite": {"base_id": base.id, "turn": k}}}
    if kind == "miss_func":
        update["missed_function"] = {k: [plan["tool"]]}
        update["checks"]["rewrite"]["tool"] = plan["tool"]
    else:
        update["checks"]["rewrite"]["missing"] = plan["missing"]
    return variant.model_copy(update=update)


def rewrite(kind: RewriteOp, base: Trajectory, toolset: Toolset, seed: int,
            clarifier: Clarifier | None = None) -> Trajectory | RewriteRejected:
    """Run the `kind` operator on `base`: the kept variant, or why there is none. Deterministic given `seed` (and
    the clarifier's answers)."""
    if kind not in ("miss_param", "miss_func"):
        raise ValueError(f"unknown rewrite kind {kind!r}")
    out = rewrite_graph().invoke({"kind": kind, "seed": seed, "base": base.model_dump(mode="json")},
                                 context=RewriteContext(toolset, clarifier))
    if out.get("rejection") or out.get("result") is None:
        return RewriteRejected(kind=kind, reason=out.get("rejection") or "no variant")
    return Trajectory.model_validate(out["result"])


def judged_rewrite(kind: RewriteOp, base: Trajectory, toolset: Toolset, seed: int, judge: Judge,
                   clarifier: Clarifier | None = None) -> Trajectory | RewriteRejected:
    """The `kind` variant of an accepted base as synthesis and RODS variants both make it: the operator (with the
    messenger's clarifier, if any), then the judge; the kept variant carries the judge's verdict."""
    out = rewrite(kind, base, toolset, seed, clarifier)
    if isinstance(out, RewriteRejected):
        return out
    verdict = judge.judge(out, {t.name: t for t in toolset.tools})
    if not verdict.accepted:
        return RewriteRejected(kind=kind, reason=f"judge {verdict.decision}: {verdict.reasons[0].detail}")
    out.judge = verdict.model_dump(mode="json")
    return out
