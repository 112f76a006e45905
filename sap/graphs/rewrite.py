"""SAP's rewrite operators as LangGraph subgraphs: an accepted base trajectory -> a hard variant.

Both operators split one base turn k* in two:

- **MissParam** (as BFCL does it). User message k* is re-worded as a natural underspecified request that leaves
  out one or two values silently (no announcement): only values the user introduces (P_c) for required parameters,
  which the dialogue has not shown before k* (earlier messages, tool results, c0). The assistant asks for exactly
  those, in plain words (no calls), and the user's follow-up k*+1 gives them verbatim. The original calls of k* run
  at k*+1, where the revealed values are `self_create`. The rule messenger writes both user turns
  (`RuleMessenger.write(withheld=...)`, `reveal_message`); a withholder (the LLM messenger's `withhold`) rewrites
  them when configured, under the same checks (`withheld_texts_problem`).
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

import dataclasses
import functools
import json
import random
import re
from dataclasses import dataclass
from typing import Any, Callable, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from sap.agents.judge import MIN_MESSAGE_CHARS, Judge
from sap.agents.messenger import ClarifyRequest, Mention, RuleMessenger, reveal_message
from sap.provenance.phrasebook import phrase_book
from sap.agents.requests import Wording
from sap.agents.withheld import WithheldRequest, WithheldValue
from sap.alternation import expand_all
from sap.errors import SapError
from sap.executors.base import replay_fresh
from sap.llm import LLMRoleError
from sap.model import ArgProvenance, Tag, ToolCall, Toolset, ToolSpec, Trajectory, Turn
from sap.provenance.checks import code_check, mentions, states_value
from sap.provenance.policy import policy_check, policy_of
from sap.provenance.withheld import announces, miss_param_problems, shown_before
from sap.text import describe_value, imperative, join_words, names_tool

RewriteOp = Literal["miss_param", "miss_func"]

_STATED = (Tag.self_create, Tag.initial_state)

# MissParam: at most this many values go missing from one request; draws of the follow-up's wording; the question
MAX_WITHHELD = 2
REVEAL_DRAWS = 5
_ASK_ONE = ["Sure - which {n} should I use?", "Happy to. Which {n} do you mean?", "Could you tell me the {n}?",
            "I can do that. What's the {n}?", "Before I go ahead: which {n} is it?"]
_ASK_MANY = ["Could you tell me {x}?", "I need a bit more information first: {x}?",
             "Happy to help - could you let me know {x}?"]
# MissFunc wording
_CANNOT = ["I'm sorry, but I can't {task} with the tools I have available right now, so I can't do that yet.",
           "Unfortunately none of the tools I currently have lets me {task}, so I'm unable to carry out that request.",
           "I'm not able to {task} with my current tools, so I can't complete this request for now."]
_CANNOT_STEP = ["To do that I'd first need to {task}, and none of the tools I have right now lets me, so I can't do "
                "it yet.", "I can't finish that yet: it needs me to {task} first, and I have no tool for that at the "
                "moment.", "That request needs a step I can't take right now - I'd have to {task}, and my current "
                "tools can't."]  # the hidden tool is a prerequisite of what the user asked for
_CANNOT_PLAIN = ["I'm sorry, but I can't do that with the tools I have available right now.",
                 "Unfortunately none of the tools I currently have can handle that request, so I'm unable to do it."]
_HANDOFF = expand_all([
    "I've [added|enabled|switched on|set up|unlocked] [the tool for that|what you needed|that feature|the missing piece]"
    " [now|on my end], [please go ahead|go ahead|carry on|try again][.|!]",
    "I've just given you access to [the tool you need|what was missing]. [Please go ahead with my request.|Give it "
    "another try.|Have another go.]", "[It|That] is available to you now; [please continue|carry on|go ahead].",
    "[Okay|OK|Right], you should have what you need [for that|to do it] now. [Try again|Give it another go|Can you do"
    " it now]?", "I've sorted out access on my end - [you can do it now|have another go|try again].",
    "That [capability|feature|option] is [switched on|enabled|available] for you now, so [please carry on|go ahead|have "
    "another go].", "You've got [the right tool|access|what you need] now. [Go ahead with what I asked.|Please do it."
    "|Try it again.]", "Access is enabled now; [could|can|would] you give it another go?",
    "I just turned that on for you. [Please continue with my request.|Try again, please.|Go for it.]",
    "[Fixed|Done|Sorted|All good] - you [can handle|should be able to do] that [request |]now[, please proceed|, go "
    "ahead|].", "It's enabled on your side now; please pick up where you left off.",
    "[Should work now|That ought to work now|You're unblocked now][.|!] [Please try again.|Go ahead.|Give it a go.]",
    "[Permissions|Access] [updated|granted|sorted][.|!] [Try that again|Carry on with it|Go ahead with my request]"
    "[, please|]."])


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


def _task_words(spec: ToolSpec) -> str:
    """The first clause of a tool's description as a lower-case imperative (`cancel a pending order and refund
    ...`; "Presses the brake pedal" -> "press the brake pedal"; "Cancel a booking, release the room and refund the
    wallet" -> "cancel a booking": what cannot be done, not every step of it)."""
    text = (spec.description or "").strip().split("\n")[0]
    return imperative(re.split(r"\. |; |: | \(|, ", text)[0].strip().rstrip(".,"))


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
            value = call.arg_value(name)
            if _stated_here(prov):
                provs[name] = _revealed(prov) if _key(value) in revealed else _restated(k)
            else:
                provs[name] = _shift(prov, value, k, user_k, user_next)
        moved_provs.append(provs)
    moved = old.model_copy(update={"index": k + 1, "user_message": user_next,
                                   "calls": _renumbered(old.calls, k + 1, moved_provs)})
    later = []
    for t in base.turns[k + 1:]:
        provs = [{n: _shift(p, c.arg_value(n), k, user_k, user_next) for n, p in c.args_prov.items()}
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


def _holds(doc: Any, value: Any) -> bool:
    """Whether a scalar (or a list whose items all are) stands somewhere in `doc`."""
    if isinstance(value, list):
        return bool(value) and all(_holds(doc, v) for v in value)
    if isinstance(doc, dict):
        return any(_holds(v, value) for v in doc.values())
    if isinstance(doc, list):
        return any(_holds(v, value) for v in doc)
    return doc == value and type(doc) is type(value)


def joined_turns(traj: Trajectory) -> Trajectory:
    """The base dialogue of a MissParam or MissFunc record: `split_turn` undone for every call-less turn, whose
    calls are those of the next turn. A value the moved calls took from the call-less turn's message is stated in
    the joined turn again (initial_state if c0 holds it, else self_create); later references shift back by one.
    The joined turn keeps the later turn's messages (the texts are not the base's: the variant graph writes new
    ones)."""
    out: list[Turn] = []
    shift: dict[int, int] = {}  # old turn index -> joined index
    pending: list[int] = []  # call-less turns waiting for the turn they join
    for turn in traj.turns:
        index = len(out)
        shift[turn.index] = index
        if not turn.calls:
            pending.append(turn.index)
            continue
        provs = []
        for call in turn.calls:
            row = {}
            for name, prov in call.args_prov.items():
                tag = prov.effective_tag()
                if tag == Tag.prev_user_msg and prov.turn in pending:
                    value = call.arg_value(name)
                    row[name] = ArgProvenance(tag=Tag.initial_state if _holds(traj.c0, value) else Tag.self_create)
                elif tag in (Tag.prev_output, Tag.prev_user_msg) and prov.turn is not None:
                    row[name] = prov.model_copy(update={"turn": shift[prov.turn]})
                else:
                    row[name] = prov
            provs.append(row)
        out.append(turn.model_copy(update={"index": index, "calls": _renumbered(turn.calls, index, provs)}))
        pending = []
    if pending:
        raise RewriteError(f"{traj.id}: turn {pending[0]} has no calls and no later turn with calls to join")
    virtual = [{**v, **{k: shift[v[k]] for k in ("turn", "used_at") if isinstance(v.get(k), int) and v[k] in shift}}
               for v in traj.virtual_history]
    return traj.model_copy(update={"turns": out, "virtual_history": virtual, "rewrite_kind": "base",
                                   "missed_function": {}, "judge": None, "stats": {}}, deep=True)


# ---------------------------------------------------------------------------------------------------------
# MissParam: which values of which turn to withhold, and the texts


@dataclass
class _Group:
    """The stated arguments of one turn that share one value."""

    key: str
    value: Any
    names: list[str]  # parameter names, in call order, distinct
    required: bool  # every binding of the value is a required parameter of its tool
    created: bool  # every binding is self_create: a value only the user knows, which MissParam may withhold
    noun: str  # the value's parameter in plain words (the phrase book's noun)


def _stated_groups(turn: Turn, specs: dict[str, ToolSpec], wording: Wording) -> list[_Group]:
    """The turn's stated (P_c / P_i) values, one group per distinct value, in call order."""
    groups: dict[str, _Group] = {}
    for call in turn.calls:
        spec = specs.get(call.name)
        for name, prov in call.args_prov.items():
            if not _stated_here(prov):
                continue
            value = call.arg_value(name)
            g = groups.setdefault(_key(value), _Group(_key(value), value, [], True, True, wording.noun(call.name, name)))
            if name not in g.names:
                g.names.append(name)
            g.required = g.required and spec is not None and name in spec.required
            g.created = g.created and prov.tag == Tag.self_create
    return list(groups.values())


def _askable(value: Any) -> bool:
    """Whether a value can go missing from a request and be asked for: text, a number or a list of them (a yes/no
    flag or an object cannot be left out as a natural underspecified request)."""
    if isinstance(value, list):
        return bool(value) and all(_askable(v) for v in value)
    return isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value).strip() != ""


def _ask_text(groups: list[_Group], rng: random.Random) -> str:
    """The assistant's clarification request, asking for exactly the missing values in plain words."""
    if len(groups) == 1:
        return rng.choice(_ASK_ONE).format(n=groups[0].noun)
    return rng.choice(_ASK_MANY).format(x=join_words([f"the {g.noun}" for g in groups]))


def _needed_at(base: Trajectory, k: int) -> list[Any]:
    """Values that other turns read from user message k through an anchor (P_u, virtual history)."""
    values = [c.arg_value(n) for t in base.turns[k + 1:] for c in t.calls for n, p in c.args_prov.items()
              if p.effective_tag() == Tag.prev_user_msg and p.turn == k]
    return values + [v.get("value") for v in base.virtual_history if v.get("turn") == k]


def _withholdable(base: Trajectory, turn: Turn, specs: dict[str, ToolSpec], wording: Wording) -> list[_Group]:
    """The values of a turn MissParam may leave out, as BFCL does: values the user introduces (P_c) for required
    parameters only, which the dialogue has not shown before the turn and the turn does not state for later."""
    virtual_here = {_key(v.get("value")) for v in base.virtual_history if v.get("turn") == turn.index}
    return [g for g in _stated_groups(turn, specs, wording)
            if g.created and g.required and _askable(g.value) and g.key not in virtual_here
            and mentions(turn.user_message, g.value)
            and all(shown_before(base, turn.index, g.value, name) is None for name in g.names)]


def _reveal(chosen: list[_Group], rng: random.Random) -> str:
    """The user's follow-up giving the chosen values: the first of a few draws of the rule messenger's wording that
    is as long as the judge requires of a user message (a bare "It's x." can be shorter)."""
    given = [Mention(g.names[0], g.value, "NEW", True) for g in chosen]
    nouns = {g.names[0]: g.noun for g in chosen}
    drawn = [reveal_message(given, rng, nouns) for _ in range(REVEAL_DRAWS)]
    return next((text for text in drawn if len(text) >= MIN_MESSAGE_CHARS), drawn[-1])


def withheld_request(base: Trajectory, k: int, chosen: list[_Group], specs: dict[str, ToolSpec],
                     rng: random.Random) -> WithheldRequest:
    """What a messenger needs to write the withheld turn k and its follow-up, with the rule messenger's texts (the
    request re-worded with the chosen values left out, and the reveal) as the template."""
    turn = base.turns[k]
    keys = {g.key for g in chosen}
    withheld = {(k, i): frozenset(n for n, p in c.args_prov.items()
                                  if _stated_here(p) and _key(c.arg_value(n)) in keys)
                for i, c in enumerate(turn.calls)}
    withheld = {at: params for at, params in withheld.items() if params}
    before = [t.model_copy(update={"calls": []}) for t in base.turns[:k]]  # kept as they are: only turn k is written
    written = RuleMessenger().write([*before, turn], specs, rng, virtual=base.virtual_history, withheld=withheld)
    reveal = _reveal(chosen, rng)
    return WithheldRequest(turn=turn, earlier=list(base.turns[:k]), withheld=withheld,
                           values=[WithheldValue(tuple(g.names), g.noun, g.value) for g in chosen], specs=specs,
                           virtual=[v for v in base.virtual_history if v.get("turn") == k],
                           template=(written[-1].user_message, reveal))


def withheld_texts_problem(base: Trajectory, k: int, values: list[Any], user_k: str, user_next: str,
                           specs: dict[str, ToolSpec]) -> str | None:
    """Why the texts of a withheld turn k and its follow-up do not work (None if they do): a withheld value stated
    or announced at k or missing from the follow-up, or a value the turn still states (or that later turns read
    from it) gone."""
    keys = {_key(v) for v in values}
    if announces(user_k):
        return f"the withheld request announces the missing value: {user_k!r}"
    if stated := [describe_value(v) for v in values if mentions(user_k, v)]:
        return f"the withheld request states {', '.join(stated)}"
    if unsaid := [describe_value(v) for v in values if not mentions(user_next, v)]:
        return f"the follow-up does not give {', '.join(unsaid)}"
    turn = base.turns[k]
    kept = [(c.name, n, c.arg_value(n)) for c in turn.calls for n, p in c.args_prov.items()
            if _stated_here(p) and _key(c.arg_value(n)) not in keys]
    if lost := [describe_value(v) for tool, n, v in kept if not states_value(user_k, tool, n, v)]:
        return f"the withheld request no longer states {', '.join(lost)}"
    if lost := [describe_value(v) for v in _needed_at(base, k)
                if not mentions(user_k, v) and not (_key(v) in keys and mentions(user_next, v))]:
        return f"later turns read {', '.join(lost)} from the withheld request, which no longer states it"
    return None


_REFERENCE_PROBLEM = re.compile(r"selector|ambiguous reference|unresolvable reference")


def _plan_miss_param(base: Trajectory, specs: dict[str, ToolSpec], rng: random.Random) -> dict[str, Any] | str:
    """Choose k* and the values to withhold, and write the rule texts; a reason string if nothing fits."""
    wording = Wording(specs, phrase_book(specs))
    options = [(t.index, pool) for t in base.turns if t.calls and (pool := _withholdable(base, t, specs, wording))]
    if not options:
        return ("no turn states a value the user introduces for a required parameter that the dialogue has not "
                "shown before")
    rng.shuffle(options)
    last = ""
    for k, pool in options:
        size = rng.randint(1, min(len(pool), MAX_WITHHELD))
        for picks in (sorted(rng.sample(range(len(pool)), size)), [rng.randrange(len(pool))]):
            chosen = [pool[i] for i in picks]  # call order
            request = withheld_request(base, k, chosen, specs, rng)
            user_k, user_next = request.template
            last = withheld_texts_problem(base, k, [g.value for g in chosen], user_k, user_next, specs) or ""
            plan = {"turn": k, "missing": [{"params": g.names, "value": g.value, "noun": g.noun} for g in chosen],
                    "user_k": user_k, "assistant_k": _ask_text(chosen, rng), "user_next": user_next}
            last = last or _reference_problem(base, plan)
            if not last:
                return plan
    return f"no choice of withheld values gives working texts ({last})"


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
    rng.shuffle(options)
    last = ""
    for k, tool in options:
        task = _task_words(specs[tool]) if tool in specs else ""
        step = all(i in base.turns[k].prerequisites for i, c in enumerate(base.turns[k].calls) if c.name == tool)
        text = rng.choice(_CANNOT_STEP if step else _CANNOT).format(task=task) if task else ""  # a prerequisite:
        # the step the user's request needs, not the request itself
        if not task or names_tool(text, list(specs)):
            text = rng.choice(_CANNOT_PLAIN)
        plan = {"turn": k, "tool": tool, "user_k": base.turns[k].user_message, "assistant_k": text,
                "user_next": rng.choice(_HANDOFF)}
        last = _reference_problem(base, plan)
        if not last:
            return plan
    return f"no turn can hide its tool without changing what a later reference means ({last})"


def _reference_problem(base: Trajectory, plan: dict[str, Any]) -> str:
    """Why the split `plan` describes would leave a reference that its words no longer resolve (the reveal turn
    now states a value after one a later "the last X I told you" meant), or "" when every reference holds."""
    try:
        variant = split_turn(base, plan["turn"], user_k=plan["user_k"], assistant_k=plan["assistant_k"],
                             user_next=plan["user_next"], revealed={_key(m["value"]) for m in plan.get("missing", [])})
    except RewriteError as exc:
        return str(exc)
    return next((p for p in code_check(variant, leaks=False) if _REFERENCE_PROBLEM.search(p)), "")


# ---------------------------------------------------------------------------------------------------------
# the graphs


def _state_diff(a: Any, b: Any) -> str:
    """Which top-level parts of two executor states differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        return f"differs in {', '.join(map(str, keys[:5]))}" + (" ..." if len(keys) > 5 else "")
    return "differs"


Clarifier = Callable[[ClarifyRequest], str]
Withholder = Callable[[WithheldRequest], tuple[str, str]]


def messenger_clarifier(messenger: Any) -> Clarifier | None:
    """The messenger's clarification writer (the LLM messenger's `clarify`), or None: the rule wording stands."""
    return getattr(messenger, "clarify", None)


def messenger_withholder(messenger: Any) -> Withholder | None:
    """The messenger's writer of a MissParam pair of user turns (the LLM messenger's `withhold`), or None: the rule
    messenger's texts stand."""
    return getattr(messenger, "withhold", None)


def clarify_request(kind: RewriteOp, plan: dict[str, Any], specs: dict[str, ToolSpec]) -> ClarifyRequest:
    """What the assistant's reply at the plan's turn must do, with the rule wording as the template."""
    missing = plan.get("missing", [])
    tool = plan.get("tool")
    return ClarifyRequest(kind=kind, user_message=plan["user_k"],
                          missing=[m["noun"] for m in missing],
                          task=_task_words(specs[tool]) if tool in specs else "",
                          hidden=[m["value"] for m in missing], tools=list(specs), template=plan["assistant_k"])


@dataclass(frozen=True)
class RewriteContext:
    """The rewrite graph's runtime context: the toolset and, optionally, the clarifier (the LLM messenger's), which
    writes the assistant's reply at the unservable turn instead of the rule wording, and the withholder (the LLM
    messenger's), which writes MissParam's withheld request and follow-up instead of the rule messenger."""

    toolset: Toolset
    clarifier: Clarifier | None = None
    withholder: Withholder | None = None

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
    if kind == "miss_param" and runtime.context.withholder is not None:
        try:
            plan = _withheld_by(runtime.context.withholder, base, plan, runtime.context.specs(), state["seed"])
        except (LLMRoleError, RewriteError) as exc:
            return {"result": None, "rejection": f"withheld turns: {exc}"}
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


def _withheld_by(withholder: Withholder, base: Trajectory, plan: dict[str, Any], specs: dict[str, ToolSpec],
                 seed: int) -> dict[str, Any]:
    """The plan with the withholder's withheld request and follow-up in place of the rule texts; RewriteError when
    they fail the checks the rule texts passed."""
    k = plan["turn"]
    wording = Wording(specs, phrase_book(specs))
    chosen = [g for g in _stated_groups(base.turns[k], specs, wording)
              if g.key in {_key(m["value"]) for m in plan["missing"]}]
    request = withheld_request(base, k, chosen, specs, random.Random(f"{seed}:withheld"))
    request = dataclasses.replace(request, template=(plan["user_k"], plan["user_next"]))
    user_k, user_next = withholder(request)
    if problem := withheld_texts_problem(base, k, [g.value for g in chosen], user_k, user_next, specs):
        raise RewriteError(problem)
    return {**plan, "user_k": user_k, "user_next": user_next}


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
    reasons += miss_param_problems(variant, runtime.context.specs())[:3]
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
            messenger: Any = None) -> Trajectory | RewriteRejected:
    """Run the `kind` operator on `base`: the kept variant, or why there is none. The messenger's clarifier and
    withholder (the LLM messenger's `clarify` and `withhold`), if it has them, write the assistant's question and
    the withheld user turns. Deterministic given `seed` (and the messenger's answers)."""
    if kind not in ("miss_param", "miss_func"):
        raise ValueError(f"unknown rewrite kind {kind!r}")
    context = RewriteContext(toolset, messenger_clarifier(messenger), messenger_withholder(messenger))
    out = rewrite_graph().invoke({"kind": kind, "seed": seed, "base": base.model_dump(mode="json")}, context=context)
    if out.get("rejection") or out.get("result") is None:
        return RewriteRejected(kind=kind, reason=out.get("rejection") or "no variant")
    return Trajectory.model_validate(out["result"])


def judged_rewrite(kind: RewriteOp, base: Trajectory, toolset: Toolset, seed: int, judge: Judge,
                   messenger: Any = None) -> Trajectory | RewriteRejected:
    """The `kind` variant of an accepted base as synthesis and RODS variants both make it: the operator (with the
    messenger's clarifier and withholder, if any), then the judge; the kept variant carries the judge's verdict."""
    out = rewrite(kind, base, toolset, seed, messenger)
    if isinstance(out, RewriteRejected):
        return out
    verdict = judge.judge(out, {t.name: t for t in toolset.tools})
    if not verdict.accepted:
        return RewriteRejected(kind=kind, reason=f"judge {verdict.decision}: {verdict.reasons[0].detail}")
    out.judge = verdict.model_dump(mode="json")
    return out
