"""LLM FSM builder: the model drafts the dialogue phases and transitions from the tool docs, the rule builder's
tool classification, the toolset's documentation (`extra["docs"]`, e.g. a domain policy) and a c0 summary; the
answer schema names the tools, state types and possible tags; code repairs what it can before V_spec (fills missing
or impossible tags from the classification), and at the drafting cap the rule FSM stands in, if configured,
with the fallback recorded."""
from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from sap.agents.llm_common import STATE_CHARS, LLMRole, compact, fit
from sap.fsm.build import (RuleFSMBuilder, ToolRole, action_tools, critical, probed_roles, requires_of, role_tags,
                            stated_params)
from sap.llm.schema import closed
from sap.model import FSM, FSMState, Precondition, StateType, Tag, Toolset, Transition
from sap.prompts import prompt

DraftTag = Literal["initial_state", "prev_output", "self_create", "prev_user_msg"]
Fallback = Literal["rule"] | None


class DraftState(BaseModel):
    """One phase of the draft."""

    id: str = Field(min_length=1)
    type: StateType
    description: str = ""


class DraftTransition(BaseModel):
    """One turn of the draft: its tools in order and, optionally, a tag per required argument."""

    model_config = ConfigDict(populate_by_name=True)

    source: str = Field(alias="from")
    target: str = Field(alias="to")
    action: list[str] = Field(min_length=1, max_length=2)
    tags: dict[str, dict[str, DraftTag]] = Field(default_factory=dict)


class FSMDraft(BaseModel):
    """The model's FSM draft."""

    states: list[DraftState] = Field(min_length=2)
    initial: str
    finals: list[str] = Field(min_length=1)
    transitions: list[DraftTransition] = Field(min_length=1)


def draft_problems(draft: FSMDraft) -> list[str]:
    """What code cannot repair in a draft and its schema cannot say: state ids that repeat or are missing."""
    problems = []
    ids: dict[str, int] = {}
    for k, s in enumerate(draft.states):
        if s.id in ids:
            problems.append(f"states[{k}].id: {s.id!r} repeats states[{ids[s.id]}]")
        ids.setdefault(s.id, k)
    if draft.initial not in ids:
        problems.append(f"initial: {draft.initial!r} is not a state id")
    problems += [f"finals[{k}]: {f!r} is not a state id" for k, f in enumerate(draft.finals) if f not in ids]
    for k, t in enumerate(draft.transitions):
        problems += [f"transitions[{k}].{end}: {sid!r} is not a state id"
                     for end, sid in (("from", t.source), ("to", t.target)) if sid not in ids]
    return problems


def _possible(tag: Tag, role: ToolRole, arg: str, initial: bool, stated: frozenset[str]) -> bool:
    """Whether `tag` can source `arg` of `role` on an edge (out of the initial state when `initial`)."""
    if tag == Tag.prev_output:
        return not initial and bool(role.producers[arg])
    if tag == Tag.prev_user_msg:
        return not initial and arg in stated
    if tag == Tag.initial_state:
        return arg in role.from_config
    return not role.producers[arg]


def repaired_fsm(draft: FSMDraft, roles: dict[str, ToolRole], stated: frozenset[str]) -> tuple[FSM, list[str]]:
    """The draft (its tools the toolset's, as its schema says) as an FSM: edges no tag can source on the first turn
    dropped, missing or impossible tags set from the rule classification; uniform probabilities per state; notes
    on each repair."""
    notes: list[str] = []
    edges: list[Transition] = []
    for k, t in enumerate(draft.transitions):
        action = t.action
        initial = t.source == draft.initial
        rule = {a: role_tags(roles[a], initial, stated) for a in action}
        if any(r is None for r in rule.values()):
            notes.append(f"transitions[{k}]: dropped (an argument can only come from an earlier result, on the "
                         "first turn)")
            continue
        tags: dict[str, dict[str, Tag]] = {}
        for a in action:
            given = t.tags.get(a, {})
            tags[a] = {}
            for arg in roles[a].spec.required:
                tag = Tag(given[arg]) if arg in given else None
                if tag is None or not _possible(tag, roles[a], arg, initial, stated):
                    notes.append(f"transitions[{k}]: {a}.{arg} tagged {rule[a][arg].value}"
                                 + (f" (not {tag.value})" if tag else ""))
                    tag = rule[a][arg]
                tags[a][arg] = tag
        dependent = sum(tag == Tag.prev_output for ts in tags.values() for tag in ts.values())
        edges.append(Transition(**{"from": t.source, "to": t.target}, action=action,
                                weight=1.0 + dependent,
                                is_critical=critical([roles[a] for a in action]),
                                provenance_tag=tags))
    RuleFSMBuilder._normalize(edges)
    producers = {r.spec.name: {a: sorted(ps) for a, ps in r.producers.items() if ps} for r in roles.values()}
    fsm = FSM(states=[FSMState(id=s.id, type=s.type, description=s.description) for s in draft.states],
              initial=draft.initial, finals=list(dict.fromkeys(draft.finals)), transitions=edges,
              producers={t: ps for t, ps in producers.items() if ps}, writes=action_tools(roles))
    return fsm, notes


def draft_schema(roles: dict[str, ToolRole], stated: frozenset[str]) -> dict[str, Any]:
    """The exact schema of an FSM draft for this toolset: state types and tool names as enums, and per tool its
    required arguments as required keys of its tags, each with the tags possible for it on some turn. Which tool
    a transition tags is optional (code fills missing tags), so the schema is not strict-mode ready."""
    state_id = {"type": "string", "minLength": 1}
    tool_tags = {}
    for name, role in roles.items():
        possible = {a: [t for t in get_args(DraftTag) if any(_possible(Tag(t), role, a, first, stated)
                                                                  for first in (True, False))]
                    for a in role.spec.required}
        tool_tags[name] = closed({a: {"enum": tags} for a, tags in possible.items() if tags})
    transition = closed({
        "from": state_id, "to": state_id,
        "action": {"type": "array", "items": {"enum": list(roles)}, "minItems": 1, "maxItems": 2},
        "tags": closed(tool_tags, required=[])})
    return closed({
        "states": {"type": "array", "minItems": 2, "items": closed({
            "id": state_id, "type": {"enum": [t.value for t in StateType]}, "description": {"type": "string"}})},
        "initial": state_id,
        "finals": {"type": "array", "items": state_id, "minItems": 1},
        "transitions": {"type": "array", "items": transition, "minItems": 1}})


def tool_lines(roles: dict[str, ToolRole], stated: frozenset[str]) -> str:
    """Each tool as the prompt shows it: kind, login need, first description sentence, and per required argument
    the tag the rule classification gives on the first turn and later (with the tools whose results feed it)."""
    lines = []
    for name, r in roles.items():
        first, later = role_tags(r, True, stated), role_tags(r, False, stated) or {}
        summary = (r.spec.description or "").split("\n")[0].split(". ")[0].strip()
        lines.append(f"- {name} ({r.kind}{'; needs login' if r.gated else ''}): {summary}")
        for arg in r.spec.required:
            feeds = f" (from results of {', '.join(sorted(r.producers[arg]))})" if r.producers[arg] else ""
            lines.append(f"    {arg}: first turn {first[arg].value if first else 'not possible'}; "
                         f"later {later[arg].value}{feeds}")
    return "\n".join(lines)


class LLMFSMBuilder:
    """Drafts the FSM with the model; `fallback="rule"` lets `graphs.fsm_graph.verified_fsm` use the rule FSM at the cap."""

    def __init__(self, llm: LLMRole, rule: RuleFSMBuilder | None = None, fallback: Fallback = "rule") -> None:
        self.llm, self.rule, self.fallback = llm, rule or RuleFSMBuilder(), fallback
        self._classified: dict[str, tuple[dict[str, ToolRole], frozenset[str], dict[str, Any], list[Precondition]]] = {}
        self._previous: dict[str, str] = {}  # toolset -> the last draft and its repairs, shown on a regenerate

    def cache_key(self) -> str:
        """The model, temperature, prompt, fallback and the rule builder behind the classification."""
        m = self.llm.model
        return (f"llm:{m.model}:t{m.temperature}:{prompt('fsm_draft').sha}:fallback={self.fallback or 'none'}:"
                f"{self.rule.cache_key()}")

    def _classify(self, toolset: Toolset) -> tuple[dict[str, ToolRole], frozenset[str], dict[str, Any],
                                                    list[Precondition]]:
        """The rule classification of the toolset's tools (probed once per builder), a probed c0 and the learned
        preconditions."""
        if toolset.name not in self._classified:
            roles, learned, report = probed_roles(toolset, self.rule.probe_seeds)
            self._classified[toolset.name] = (roles, stated_params(roles), report.configs[0] if report.configs else {},
                                              learned)
        return self._classified[toolset.name]

    def build(self, toolset: Toolset, feedback: list[str] | None = None) -> FSM:
        """The model's draft, repaired by code; `feedback` (V_spec violations) goes back with the previous draft."""
        roles, stated, c0, learned = self._classify(toolset)
        previous = self._previous.get(toolset.name) if feedback else None
        answer = self.llm.ask(
            "fsm_draft", FSMDraft, draft_schema(roles, stated), check=lambda d: _raise(draft_problems(d)),
            toolset=toolset.name, description=toolset.description or "(none)",
            docs=toolset.extra.get("docs") or "(none)", tools=tool_lines(roles, stated),
            state=fit(c0, STATE_CHARS),
            feedback=(f"Your previous draft: {previous}\nIts V_spec violations:\n" + "\n".join(feedback)
                      if feedback and previous else "(first draft)"))
        fsm, notes = repaired_fsm(answer, roles, stated)
        fsm.requires, fsm.preconditions = requires_of(learned), learned  # learned by trying, not drafted
        self._previous[toolset.name] = compact(answer.model_dump(mode="json", by_alias=True), 3000) + (
            "\nCode repaired: " + "; ".join(notes[:20]) if notes else "")
        return fsm


def _raise(problems: list[str]) -> None:
    if problems:
        raise ValueError("; ".join(problems))
