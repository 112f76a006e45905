"""Rule FSM builder: derives a provenance-tagged dialogue FSM from tool docs and a probe of the executor."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from sap.fsm.conditions import after, join, not_after
from sap.fsm.prerequisites import learn_preconditions
from sap.fsm.probe import LOGOUT_NAME, ProbeReport, is_auth_name, probe
from sap.model import FSM, FSMState, Precondition, StateType, Tag, Toolset, ToolSpec, Transition
from sap.provenance.fields import produces
from sap.provenance.generate import announceable, described_choices
from sap.provenance.places import address_part
from sap.provenance.policy import Policy, policy_of
from sap.text import words_of

READ_VERBS = ("get", "list", "search", "find", "show", "view", "check", "lookup", "describe", "query", "fetch",
              "read", "ls", "pwd", "cat", "grep", "head", "tail", "wc", "du", "diff", "count", "calculate",
              "convert", "estimate", "sort", "retrieve", "compute", "display", "contact")


UPDATE_VERBS = ("modify", "update", "change", "set", "edit", "rename")

# verbs of changes no later call takes back as they were: what is deleted, cancelled, paid or sent stays so
IRREVERSIBLE_VERBS = ("delete", "remove", "rm", "cancel", "drop", "purge", "pay", "purchase", "checkout", "send",
                      "transfer", "post", "refund", "return", "exchange")


def named_update(spec: ToolSpec) -> bool:
    """Meant to change something: declared not read-only, else an update verb leading its name (`modify_...`);
    such a call that leaves the state as it was did nothing (a pure function, such as MathAPI's, never does)."""
    if spec.read_only is not None:
        return not spec.read_only
    return words_of(spec.name).lower().split()[0] in UPDATE_VERBS  # `setCruiseControl` opens with "set" too


def named_read(spec: ToolSpec) -> bool:
    """Read-only by the doc's flag, else when a word of its name is a read verb (`posting_get_login_status`)."""
    if spec.read_only is not None:
        return spec.read_only
    return any(w in READ_VERBS for w in words_of(spec.name).lower().split())


class FSMBuilder(Protocol):
    """Builds a provenance-tagged FSM for a toolset (rule or LLM)."""

    def build(self, toolset: Toolset, feedback: list[str] | None = None) -> FSM:
        """Draft an FSM; `feedback` lists V_spec violations of the previous draft."""

    def cache_key(self) -> str:
        """What, besides the tool docs, determines the FSM this builder makes."""


@dataclass
class ToolRole:
    """How the builder classified one tool."""

    spec: ToolSpec
    kind: str  # "auth", "logout", "terminal", "read", "action"
    gated: bool  # needs an authenticated session
    producers: dict[str, set[str]]  # required param -> tools whose results can fill it
    from_config: set[str]  # required params that c0 can fill
    gate: str = ""  # the condition every edge calling the tool carries (the policy's must-precede rules)
    confirmed: bool = False  # the policy has the user confirm each call in a turn of its own


def _is_read_only(spec: ToolSpec, report: ProbeReport) -> bool:
    """Read-only by the doc's flag, else by probing (never changed state), else by the name's verb."""
    if spec.read_only is not None:
        return spec.read_only
    prof = report.profiles[spec.name]
    if prof.successes:
        return not prof.changed_state
    return words_of(spec.name).split()[0] in READ_VERBS


def classify(toolset: Toolset, report: ProbeReport) -> dict[str, ToolRole]:
    """Classify every tool and find which results feed which required parameters."""
    roles: dict[str, ToolRole] = {}
    for spec in toolset.tools:
        prof = report.profiles[spec.name]
        if is_auth_name(spec.name):
            kind = "auth"
        elif LOGOUT_NAME.search(spec.name):
            kind = "logout"
        else:
            kind = "read" if _is_read_only(spec, report) else "action"
        producers: dict[str, set[str]] = {}
        from_config: set[str] = set()
        for name in spec.required:
            schema = spec.properties.get(name, {})
            producers[name] = set() if prof.prefers_new(name) else {
                other for other, p in report.profiles.items()
                if other != spec.name and any(produces(name, schema, out, spec.aliases(name)) for out in p.outputs)
            }
            if any(produces(name, schema, c0, spec.aliases(name)) for c0 in report.configs):
                from_config.add(name)
        for name in producers:  # a replacement comes from where alternatives are listed (a product's variants),
            # not from the results about the thing being changed (the order and its own items)
            if name.startswith("new_") and name[4:] in producers:
                about = set().union(*(ps for p, ps in producers.items() if p not in (name, name[4:])))
                producers[name] = producers[name] - about or producers[name]
        roles[spec.name] = ToolRole(spec, kind, prof.auth_errors > 0, producers, from_config)
    auth = {name for name, r in roles.items() if r.kind == "auth"}
    for r in roles.values():  # a tool fed by a login's result (an access token) needs the session too
        r.gated = r.gated or any(ps & auth for ps in r.producers.values())
    apply_policy(roles, policy_of(toolset))
    return roles


def apply_policy(roles: dict[str, ToolRole], policy: Policy | None) -> None:
    """Set (in place) what the toolset's policy makes of its tools. A must-precede rule guarding every action is an
    authentication rule: its `first` tools are auth tools and the tools it guards are gated. Every must-precede rule
    gives the tools it guards an `after:` condition (and a `once` rule its first tools a `not after:` one);
    confirmed tools are marked; terminal tools close the dialogue."""
    if policy is None:
        return
    actions = {name for name, r in roles.items() if r.kind == "action"}
    for rule in policy.must_precede:
        if actions and actions <= set(rule.before):
            for name in rule.first:
                roles[name].kind = "auth"
            for name in rule.before:
                roles[name].gated = True
        for name in rule.before:
            roles[name].gate = join(roles[name].gate, after(rule.first))
        if rule.once:
            for name in rule.first:
                roles[name].gate = join(roles[name].gate, not_after(rule.first))
    for name in policy.confirmed():
        roles[name].confirmed = roles[name].kind == "action"
    for name in policy.terminal.tools if policy.terminal else ():
        roles[name].kind = "terminal"


def irreversible(spec: ToolSpec) -> bool:
    """Whether a word of the tool's name is a verb of a change no later call takes back (`cancel_order`)."""
    return any(w in IRREVERSIBLE_VERBS for w in spec.name.lower().split("_"))


def critical(tools: list[ToolRole]) -> bool:
    """A critical transition: it opens the authenticated phase, or it commits a change that cannot be taken back
    (a write the policy has the user confirm first, else an action whose name says it deletes, cancels, pays,
    sends...). Reads, reversible updates and wrap-ups are not critical."""
    return any(r.kind == "auth" or (r.kind == "action" and (r.confirmed or irreversible(r.spec))) for r in tools)


def role_tags(role: ToolRole, initial: bool, stated: frozenset[str] = frozenset(),
              restate: bool = True) -> dict[str, Tag] | None:
    """Per-argument tags for `role` on an edge; None if an argument cannot be sourced there.

    Off the initial state: results feed arguments (prev_output); a value users state elsewhere in the toolset
    (`stated`) is referred back to (prev_user_msg) when `restate`; otherwise config (initial_state) or a new value
    (self_create). A restated value may be a fresh one the user announced earlier (virtual history).
    """
    tags: dict[str, Tag] = {}
    for name in role.spec.required:
        has_upstream = bool(role.producers[name])
        if role.kind == "auth" and name in role.from_config:  # credentials live in the configuration
            tags[name] = Tag.initial_state
        elif role.kind == "action" and (address_part(name) or _a_setting(role.spec, name)):
            tags[name] = Tag.self_create  # the user's new value: the current one (read back, or c0's) is what the
            # write replaces, and setting it again is a no-op (an address, a flow rate, a switch position)
        elif role.kind == "action" and (_new_of_its_kind(role, name) or _described_new(role.spec, name)):
            tags[name] = Tag.self_create  # a new card's number, a new ticket's title, a booking's new dates: copied
            # from an existing one, the write would register that one again or change nothing
        elif not initial and has_upstream:
            tags[name] = Tag.prev_output
        elif not initial and restate and name in stated:
            tags[name] = Tag.prev_user_msg
        elif name in role.from_config:
            tags[name] = Tag.initial_state
        elif has_upstream:
            return None  # needs a result that cannot exist yet
        else:
            tags[name] = Tag.self_create
    return tags


TERMINAL_SHARE = 0.1  # of the walk's weight out of a state after a change: a hand-off to a human there
_IDENTIFIER = re.compile(r"(?:^|_)ids?$", re.I)
_CREATES = re.compile(r"^(?:register|create|add|new|post|make|open)_([a-z]+(?:_[a-z]+)*)$")


def _new_of_its_kind(role: ToolRole, name: str) -> bool:
    """Whether an argument of a creating write (register_credit_card, create_ticket, post_tweet) describes the new
    thing itself: only results about things of the same kind (the credit card list, a ticket) could feed it, so a
    value read there belongs to one that exists already; ids, tokens and secrets of other things are not such."""
    match = _CREATES.match(role.spec.name)
    producers = role.producers.get(name, [])
    if match is None or not producers or _IDENTIFIER.search(name) or re.search(r"token|secret|password", name):
        return False
    kind = match.group(1).rstrip("s")
    return all(kind in p for p in producers)


_NEW_VALUE = re.compile(r"^(?:the\s+)?new\b", re.I)


def _described_new(spec: ToolSpec, name: str) -> bool:
    """Whether a write's parameter is documented as the new value it sets ("The new arrival date"), not a name of
    something that exists (ids are never such)."""
    description = str(spec.properties.get(name, {}).get("description", ""))
    return bool(_NEW_VALUE.match(description.strip())) and not _IDENTIFIER.search(name)


def _a_setting(spec: ToolSpec, name: str) -> bool:
    """Whether a parameter is a setting the user chooses (a number, a flag, or one of a closed set of words: an
    order's "Buy" or "Sell", a travel class), not a thing it names (an integer `order_id` names an order)."""
    schema = spec.properties.get(name, {})
    chosen = schema.get("type") in ("number", "integer", "boolean") or bool(schema.get("enum")) or bool(
        described_choices(schema))
    return chosen and not _IDENTIFIER.search(name)


def action_tools(roles: dict[str, ToolRole]) -> list[str]:
    """The tools classified as actions (they change the state: a call of one that does not is a no-op)."""
    return sorted(name for name, r in roles.items() if r.kind == "action")


def stated_params(roles: dict[str, ToolRole]) -> frozenset[str]:
    """Parameters that some tool takes straight from the user (no tool result feeds them) and that a user would
    refer back to by name (`announceable`: a file or a contact, not a flag or a number)."""
    return frozenset(name for r in roles.values() for name in r.spec.required
                     if not r.producers[name] and announceable(name, r.spec.properties.get(name, {})))


def probed_roles(toolset: Toolset, seeds: int) -> tuple[dict[str, ToolRole], list[Precondition], ProbeReport]:
    """Probe the toolset, learn its tools' prerequisites (whose successes join the probe's profiles) and classify
    its tools; the roles, the learned preconditions and the probe's report."""
    report = probe(toolset, seeds=seeds)
    learned = learn_preconditions(toolset, report)
    return classify(toolset, report), learned, report


def requires_of(learned: list[Precondition]) -> dict[str, list[str]]:
    """FSM.requires from learned preconditions: per tool, its prerequisite tools in the order learned."""
    out: dict[str, list[str]] = {}
    for p in learned:
        out.setdefault(p.tool, []).append(p.needs)
    return out


def _prune_dead(edges: list[Transition], producers: dict[str, dict[str, list[str]]]) -> list[Transition]:
    """Drop edges whose prev_output arguments no path can feed: no producer can have run before the edge."""
    while True:
        before: dict[str, set[str]] = {"start": set()}  # tools that can have run on some path into each state
        changed = True
        while changed:
            changed = False
            for e in edges:
                if e.source in before:
                    seen = before[e.source] | set(e.action)
                    if not seen <= before.setdefault(e.target, set()):
                        before[e.target] |= seen
                        changed = True

        def viable(e: Transition) -> bool:
            seen = set(before.get(e.source, ()))
            for tool in e.action:
                for arg, tag in e.provenance_tag.get(tool, {}).items():
                    if tag == Tag.prev_output and not seen.intersection(producers.get(tool, {}).get(arg, [])):
                        return False
                seen.add(tool)
            return e.source in before

        kept = [e for e in edges if viable(e)]
        if len(kept) == len(edges):
            return kept
        edges = kept


class RuleFSMBuilder:
    """Builds the FSM by code: phase states of the 13-type taxonomy, one or two tools per transition."""

    def __init__(self, probe_seeds: int = 3) -> None:
        self.probe_seeds = probe_seeds

    def cache_key(self) -> str:
        """The builder kind, its probe size and the version of what it learns (`pre`: preconditions)."""
        return (f"rule:{self.probe_seeds}:named-restated:pre-where:new-of-kind:described-new:replacements:hand-off"
                ":chosen-words")

    def build(self, toolset: Toolset, feedback: list[str] | None = None) -> FSM:
        """Probe the toolset, learn preconditions, classify its tools and lay out states and tagged transitions."""
        roles, learned, _ = probed_roles(toolset, self.probe_seeds)
        stated = stated_params(roles)
        states = [FSMState(id="start", type=StateType.INITIAL, description="before the first request")]
        edges: list[Transition] = []
        auth = [r for r in roles.values() if r.kind == "auth"]
        gated_exists = any(r.gated for r in roles.values())
        work = [r for r in roles.values() if r.kind in ("read", "action")]
        hub = "start"
        if auth and gated_exists:
            states.append(FSMState(id="authed", type=StateType.AUTH_COMPLETED, description="user authenticated"))
            public = [r for r in work if not r.gated and role_tags(r, True) is not None]
            if public:
                states.append(FSMState(id="needs_auth", type=StateType.AUTH_REQUIRED,
                                       description="browsing; account actions need authentication"))
                for r in public:
                    edges.append(self._edge("start", "needs_auth", [r], roles, True))
                    edges += self._variants("needs_auth", "needs_auth", [r], roles, False, stated, weight=0.5)
            for r in auth:
                edges.append(self._edge("start", "authed", [r], roles, True))
                if public:
                    edges += self._variants("needs_auth", "authed", [r], roles, False, stated, weight=2.0)
            hub = "authed"
        states += [
            FSMState(id="found", type=StateType.FOUND, description="results of a lookup are on the table"),
            FSMState(id="details", type=StateType.INFO_GATHERING, description="details of a found item gathered"),
            FSMState(id="done", type=StateType.ACTION_COMPLETED, description="a change was carried out"),
            FSMState(id="end", type=StateType.COMPLETED, description="the user's goal is wrapped up"),
        ]
        for r in work:
            if r.confirmed:
                states.append(FSMState(id=f"confirm_{r.spec.name}", type=StateType.ACTION_REQUIRED,
                                       description=f"{r.spec.name} requested and recapped; the user's yes is awaited"))
                edges += self._confirmed_write(r, roles, stated)
        for src in (hub, "found", "details", "done"):
            initial = src == "start"
            for r in work:
                tags = role_tags(r, initial, stated)
                if tags is None:
                    continue
                consumes = Tag.prev_output in tags.values()
                if r.confirmed:
                    edges.append(self._request(src, r, roles, stated))
                    continue
                target = "done" if r.kind == "action" else ("details" if consumes else "found")
                edges += self._variants(src, target, [r], roles, initial, stated)
                if r.kind == "read" and consumes and src in ("details", "done"):
                    edges.append(self._edge(src, "end", [r], roles, initial, weight=0.3, stated=stated))
            if not initial:
                edges += self._pair_edges(src, work, roles, stated)
            for r in roles.values():
                if r.kind == "logout" and src != "start":
                    edges.append(self._edge(src, "end", [r], roles, False, weight=0.2))
                elif r.kind == "terminal" and src == "done":  # a hand-off follows a change (weighed below)
                    edges.append(self._edge(src, "end", [r], roles, False))
        producers = {r.spec.name: {a: sorted(ps) for a, ps in r.producers.items() if ps} for r in roles.values()}
        producers = {t: ps for t, ps in producers.items() if ps}
        edges = _prune_dead([e for e in edges if e is not None], producers)
        _weigh_terminals(edges, {r.spec.name for r in roles.values() if r.kind == "terminal"})
        if hub == "authed" and not any(is_auth_name(r.spec.name) for r in auth):
            # identification the policy declares (a user lookup, not a login): a lookup no path feeds right after
            # it reads from c0, as a first turn would
            reached = {t for e in edges if e.source == hub for t in e.action}
            edges += [self._edge(hub, "found", [r], roles, True, stated=stated) for r in work
                      if r.kind == "read" and r.spec.name not in reached and role_tags(r, True, stated) is not None]
        used = {e.source for e in edges} | {e.target for e in edges}
        states = [s for s in states if s.id in used or s.id == "start"]
        finals = [s for s in ("done", "end") if s in used]
        self._normalize(edges)
        return FSM(states=states, initial="start", finals=finals, transitions=edges, producers=producers,
                   writes=action_tools(roles), requires=requires_of(learned), preconditions=learned)

    def _pair_edges(self, src: str, work: list[ToolRole], roles: dict[str, ToolRole],
                    stated: frozenset[str]) -> list[Transition]:
        """Turns with two calls: a lookup whose result feeds an action in the same turn, or the same
        lookup on two different earlier values (independent calls: one parallel group)."""
        out = []
        lookups = [r for r in work if r.kind == "read" and any(r.producers.values())]
        for i, r in enumerate(lookups):
            out += self._variants(src, "details", [r, r], roles, False, stated, weight=0.5)
            other = lookups[(i + 1) % len(lookups)]
            if other is not r and r.spec.name not in {p for ps in other.producers.values() for p in ps}:
                out += self._variants(src, "details", [r, other], roles, False, stated, weight=0.5)
        for act in (r for r in work if r.kind == "action" and not r.confirmed):  # a confirmed write: a turn of its own
            feeders = sorted({p for ps in act.producers.values() for p in ps if roles[p].kind == "read"})
            for feeder in feeders[:2]:
                out += self._variants(src, "done", [roles[feeder], act], roles, False, stated, weight=0.5)
        return out

    def _confirmed_write(self, write: ToolRole, roles: dict[str, ToolRole],
                         stated: frozenset[str]) -> list[Transition]:
        """The turns that carry out a confirmed write: out of its ACTION_REQUIRED state, opened by the user's yes
        (`confirmed`), tagged as the write would be anywhere after the first turn."""
        out = self._variants(f"confirm_{write.spec.name}", "done", [write], roles, False, stated)
        for e in out:
            e.condition = join("confirmed", e.condition)
        return out

    def _request(self, src: str, write: ToolRole, roles: dict[str, ToolRole], stated: frozenset[str]) -> Transition:
        """The turn that asks for a confirmed write: no call, the assistant recaps the write and asks for a yes. It
        carries the write's gate and weighs what the write's own edge weighs (the walk prefers it once the write's
        prev_output arguments can be fed)."""
        edge = self._edge(src, "done", [write], roles, False, stated=stated)
        return Transition(**{"from": src, "to": f"confirm_{write.spec.name}"}, action=[], condition=write.gate,
                          weight=edge.weight)

    def _variants(self, src: str, dst: str, tools: list[ToolRole], roles: dict[str, ToolRole], initial: bool,
                  stated: frozenset[str], weight: float = 1.0) -> list[Transition]:
        """The edge, and when it restates earlier user values (prev_user_msg), also a variant that does not."""
        edge = self._edge(src, dst, tools, roles, initial, weight=weight, stated=stated)
        if edge is None:
            return []
        if not any(t == Tag.prev_user_msg for tags in edge.provenance_tag.values() for t in tags.values()):
            return [edge]
        plain = self._edge(src, dst, tools, roles, initial, weight=weight * 0.5, stated=stated, restate=False)
        return [edge] + ([plain] if plain is not None else [])

    @staticmethod
    def _edge(src: str, dst: str, tools: list[ToolRole], roles: dict[str, ToolRole], initial: bool,
              weight: float = 1.0, stated: frozenset[str] = frozenset(), restate: bool = True) -> Transition | None:
        """A transition calling `tools` in order, with per-argument tags; None if some argument has no source."""
        tag_map: dict[str, dict[str, Tag]] = {}
        for r in tools:
            tags = role_tags(r, initial, stated, restate)
            if tags is None:
                return None
            tag_map[r.spec.name] = tags
        dependent = sum(t == Tag.prev_output for tags in tag_map.values() for t in tags.values())
        return Transition(**{"from": src, "to": dst}, action=[r.spec.name for r in tools],
                          condition=join(*(r.gate for r in tools)), weight=weight * (1.0 + dependent),
                          is_critical=critical(tools), provenance_tag=tag_map)

    @staticmethod
    def _normalize(edges: list[Transition]) -> None:
        """Give each state's out-edges equal probabilities summing to one."""
        by_src: dict[str, list[Transition]] = {}
        for e in edges:
            by_src.setdefault(e.source, []).append(e)
        for group in by_src.values():
            for e in group:
                e.probability = 1.0 / len(group)


def _weigh_terminals(edges: list[Transition], terminal: set[str]) -> None:
    """Give each hand-off edge TERMINAL_SHARE of its state's out-weight, however many other tools leave the state
    (a fixed weight drowned among airline's many tools: 2 walks in 114 held the hand-off, retail's 10 times
    as many)."""
    rest: dict[str, float] = {}  # per state, the weight of its other out-edges
    for e in edges:
        if not terminal.intersection(e.action):
            rest[e.source] = rest.get(e.source, 0.0) + e.weight
    for edge in edges:
        if terminal.intersection(edge.action) and rest.get(edge.source):
            edge.weight = TERMINAL_SHARE / (1 - TERMINAL_SHARE) * rest[edge.source]


class FlatFSMBuilder(RuleFSMBuilder):
    """Ablation "no FSM": free turn-by-turn planning, one phase where any tool may follow any other.

    Tools and tags are classified exactly as by the rule builder; the phase structure and the producer graph are
    gone, so the walk, like the paper's free planner, may reach a call whose declared earlier result no call has
    made yet (its argument falls back).
    """

    def cache_key(self) -> str:
        """The builder kind, its probe size and the version of what it learns (`pre`: preconditions)."""
        return f"flat:{self.probe_seeds}:named-restated:pre-where:unfed"

    def build(self, toolset: Toolset, feedback: list[str] | None = None) -> FSM:
        """A start state, one working state looping on every tool, and a final state reached by any tool."""
        roles, learned, _ = probed_roles(toolset, self.probe_seeds)
        stated = stated_params(roles)
        states = [FSMState(id="start", type=StateType.INITIAL, description="before the first request"),
                  FSMState(id="work", type=StateType.NORMAL, description="any request"),
                  FSMState(id="end", type=StateType.COMPLETED, description="done")]
        edges: list[Transition] = []
        for r in roles.values():
            edges += self._variants("start", "work", [r], roles, True, stated)
            edges += self._variants("work", "work", [r], roles, False, stated)
            edges += self._variants("work", "end", [r], roles, False, stated, weight=0.2)
        self._normalize(edges)
        # no producer graph: nothing steers the walk to calls whose declared results exist (the paper's free
        # planner declares dependencies where no producer has run; such arguments fall back, P_f)
        return FSM(states=states, initial="start", finals=["end"], transitions=edges, writes=action_tools(roles),
                   requires=requires_of(learned), preconditions=learned)
