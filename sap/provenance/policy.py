"""Declarative toolset policies (must-precede, confirm-before, terminal, one call at a time, value rules) and the
check that finds a trajectory's violations of them.

A toolset declares its policy as `extra["policy"]`: a domain module's `POLICY` (a `Policy` or a dict of the same
shape) or a `<module>.policy.toml` file beside it. Tool lists name the toolset's tools; "*" stands for every tool
a rule does not name otherwise and "writes" for every tool not declared read-only (`resolved` expands both)."""
from __future__ import annotations

import random
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sap.errors import ToolsetError
from sap.model import ToolCall, ToolSpec, Toolset, Trajectory
from sap.provenance.checks import CONFIRM_QUESTIONS, code_check, is_confirmation, mentions
from sap.provenance.jsonpath import PathError, resolve
from sap.provenance.places import ADDRESS_FIELDS, address_line
from sap.text import describe_value, field_words, join_words, task_phrase

ToolList = list[str] | Literal["*", "writes"]


class PolicyError(ToolsetError, ValueError):
    """A malformed policy, located by file, rule and field."""

    def __init__(self, message: str, *, file: str | None = None, rule: str | None = None, field: str | None = None):
        self.message, self.file, self.rule, self.field = message, file, rule, field
        super().__init__(str(self))

    def __str__(self) -> str:
        """`file: rule 'r' field 'f': message`, leaving out the parts that are unknown."""
        where = " ".join(p for p in (f"rule {self.rule!r}" if self.rule else "",
                                     f"field {self.field!r}" if self.field else "") if p)
        text = f"{where}: {self.message}" if where else self.message
        return f"{self.file}: {text}" if self.file else text


class _Rule(BaseModel):
    """A policy rule: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid")


class MustPrecede(_Rule):
    """A successful call of one of `first` must come before any call of a tool in `before`."""

    first: list[str] = Field(min_length=1)
    before: ToolList = "*"
    once: bool = False  # one call of `first` is enough: the walk leaves out later ones (authenticate once)


class ConfirmBefore(_Rule):
    """Each call of these tools opens a turn whose user message is an explicit yes, answering the assistant's
    recap of that call (its action and every argument value) at the end of the turn before."""

    tools: ToolList = "writes"


class Terminal(_Rule):
    """A call of one of `tools` is the dialogue's last call; the assistant's last message is `message` if given."""

    tools: list[str] = Field(min_length=1)
    message: str | None = None


class ValueRule(_Rule):
    """`tool`'s `param` equals one of `per_unit` times the length of the list at `unit_path` in an earlier result
    of `unit_tool` (an airline certificate: $100 or $50 per passenger of a looked-up reservation)."""

    tool: str
    param: str
    per_unit: list[float] = Field(min_length=1)
    unit_tool: str
    unit_path: str


class Policy(_Rule):
    """A toolset's rules; `source` names where they were declared (for error messages)."""

    must_precede: list[MustPrecede] = Field(default_factory=list)
    confirm_before: ConfirmBefore | None = None
    terminal: Terminal | None = None
    one_at_a_time: bool = False
    value_rules: list[ValueRule] = Field(default_factory=list)
    source: str | None = None

    def resolved(self, tools: list[ToolSpec]) -> Policy:
        """The policy with "*" and "writes" expanded to tool names; a rule naming a tool the toolset lacks is a
        PolicyError naming the rule and field."""
        names = [t.name for t in tools]
        writes = [t.name for t in tools if t.read_only is False]

        def expand(value: ToolList, rule: str, field: str, others: list[str]) -> list[str]:
            if value == "*":
                return [n for n in names if n not in others]
            if value == "writes":
                return writes
            for name in value:
                if name not in names:
                    raise PolicyError(f"unknown tool {name!r} (the toolset has {', '.join(names)})",
                                      file=self.source, rule=rule, field=field)
            return list(value)

        terminal = list(self.terminal.tools) if self.terminal else []
        precede = []
        for i, rule in enumerate(self.must_precede):
            first = expand(rule.first, f"must_precede[{i}]", "first", [])
            precede.append(rule.model_copy(update={"first": first, "before": expand(
                rule.before, f"must_precede[{i}]", "before", first + terminal)}))
        for i, rule in enumerate(self.value_rules):
            expand([rule.tool, rule.unit_tool], f"value_rules[{i}]", "tool", [])
        return self.model_copy(update={
            "must_precede": precede,
            "confirm_before": ConfirmBefore(tools=expand(self.confirm_before.tools, "confirm_before", "tools", []))
            if self.confirm_before else None,
            "terminal": self.terminal.model_copy(update={"tools": expand(terminal, "terminal", "tools", [])})
            if self.terminal else None})

    def confirmed(self) -> frozenset[str]:
        """The tools each call of which needs the user's explicit confirmation (after `resolved`)."""
        return frozenset(self.confirm_before.tools) if self.confirm_before else frozenset()


def policy_of(toolset: Toolset) -> Policy | None:
    """The toolset's declared policy (resolved to its tool names), if any."""
    return toolset.extra.get("policy")


def policy_from_data(data: Any, source: str) -> Policy:
    """A Policy from a dict (a module's POLICY or a parsed file); a malformed one is a PolicyError naming `source`,
    the rule and the field."""
    if isinstance(data, Policy):
        return data.model_copy(update={"source": data.source or source})
    if not isinstance(data, dict):
        raise PolicyError(f"a policy is a table of rules, not {type(data).__name__}", file=source)
    try:
        return Policy.model_validate({**data, "source": source})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(p) for p in err["loc"] if not str(p).startswith(("list[", "literal["))]
        rule = loc[0] + (f"[{loc[1]}]" if len(loc) > 1 and loc[1].isdigit() else "") if loc else None
        field = ".".join(p for p in loc[1:] if not p.isdigit()) or None
        raise PolicyError(f"{err['msg']} (got {err.get('input')!r})", file=source, rule=rule, field=field) from None


def load_policy_file(path: str | Path) -> Policy:
    """The policy in a TOML file; unreadable TOML or a malformed rule is a PolicyError naming the file."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PolicyError(f"cannot read policy: {exc}", file=str(path)) from None
    return policy_from_data(data, str(path))


def module_policy(module: Any) -> Policy | None:
    """A domain module's policy: its POLICY attribute, else a `<module>.policy.toml` beside its file, else None."""
    if getattr(module, "POLICY", None) is not None:
        return policy_from_data(module.POLICY, f"{getattr(module, '__file__', None) or module.__name__}:POLICY")
    file = getattr(module, "__file__", None)
    beside = Path(file).with_suffix(".policy.toml") if file else None
    return load_policy_file(beside) if beside is not None and beside.is_file() else None


RECAP_LEADS = ("Before I go ahead, let me check the details with you: I'll {task}{details}.",
               "Just to confirm, I'm about to {task}{details}.", "Here's what I'm going to do: {task}{details}.",
               "To make sure I have it right: I'll {task}{details}.")


def recap_details(args: dict[str, Any]) -> str:
    """A write's arguments as a person states them: a flat address as one address line ("2733 Hillcrest Way,
    Phoenix, AZ 85008, USA"), ids by what they name ("order #W1", "items 11 and 12"), other values with their names
    in words and free text in quotes; every value verbatim."""
    parts, address = [], [k for k in ADDRESS_FIELDS if k in args]
    for name, value in args.items():
        if name in address:
            if name == address[0] and len(address) >= 4:
                parts.append("address " + address_line(args))
            elif len(address) < 4:
                parts.append(f"{field_words(name)} {describe_value(value)}")
            continue
        words = field_words(name)
        if re.search(r" IDs?$", words) and (isinstance(value, (str, int)) or isinstance(value, list) and value and all(
                isinstance(v, (str, int)) for v in value)):
            noun = words.rsplit(" ", 1)[0]
            many = isinstance(value, list) and len(value) > 1
            said = join_words([str(v) for v in value] if isinstance(value, list) else [str(value)])
            parts.append(f"{noun}{'s' if many and not noun.endswith('s') else ''} {said}")
        else:
            parts.append(f"{words} {describe_value(value)}")
    return "; ".join(parts)


def recap(call: ToolCall, spec: ToolSpec, rng: random.Random) -> str:
    """The assistant's recap of a write before it runs, in words: the action and every argument value
    (`recap_details`), then a question from CONFIRM_QUESTIONS; wording drawn with `rng`."""
    details = recap_details(call.args_exec)
    task = task_phrase(spec).split(";")[0].rstrip(". ")
    lead = rng.choice(RECAP_LEADS).format(task=task, details=f", with {details}" if details else "")
    return f"{lead} {rng.choice(CONFIRM_QUESTIONS)}"


def policy_check(traj: Trajectory, policy: Policy | None, specs: dict[str, ToolSpec] | None = None,
                 leaks: bool = True) -> list[str]:
    """The code check's problems with `traj` (its leak check over `specs` when given, unless `leaks` is off), then
    its violations of `policy` (if there is one)."""
    return code_check(traj, specs, leaks) + (violations(traj, policy) if policy is not None else [])


def violations(traj: Trajectory, policy: Policy) -> list[str]:
    """Every violation of the (resolved) `policy` in `traj`, each naming its rule."""
    calls = traj.calls()
    return (_must_precede(calls, policy) + _confirm_before(traj, policy) + _terminal(traj, calls, policy)
            + _one_at_a_time(traj, policy) + _value_rules(calls, policy))


def _must_precede(calls: list[tuple[int, int, ToolCall]], policy: Policy) -> list[str]:
    """A guarded call with no successful call of a required tool before it."""
    out = []
    for rule in policy.must_precede:
        seen = False
        for turn, index, call in calls:
            if call.name in rule.before and not seen:
                out.append(f"policy must_precede: turn {turn} call {index} ({call.name}) comes before any call of "
                           f"{' / '.join(rule.first)}")
            seen = seen or (call.name in rule.first and call.ok)
    return out


def _confirm_before(traj: Trajectory, policy: Policy) -> list[str]:
    """A confirmed tool's call that does not open a turn answering yes to a recap of it."""
    out = []
    for turn, index, call in traj.calls():
        if call.name not in policy.confirmed():
            continue
        where = f"policy confirm_before: turn {turn} call {index} ({call.name})"
        asked = traj.turns[turn - 1].assistant_message if turn > 0 else ""
        if index != 0:
            out.append(f"{where} is not the first call of its turn: it follows other calls without a confirmation")
        elif not is_confirmation(traj.turns[turn].user_message):
            out.append(f"{where}: the user message {traj.turns[turn].user_message[:60]!r} is not an explicit yes")
        elif not asked.rstrip().endswith("?") or not all(mentions(asked, v) for v in call.args_exec.values()):
            out.append(f"{where}: the assistant did not recap the action and its details before the user's yes")
    return out


def _terminal(traj: Trajectory, calls: list[tuple[int, int, ToolCall]], policy: Policy) -> list[str]:
    """Calls or turns after a terminal call, or a last message other than the declared hand-off."""
    if policy.terminal is None:
        return []
    for n, (turn, index, call) in enumerate(calls):
        if call.name not in policy.terminal.tools:
            continue
        where = f"policy terminal: turn {turn} call {index} ({call.name})"
        if n + 1 < len(calls) or turn + 1 < len(traj.turns):
            return [f"{where} is followed by further calls or turns"]
        message = policy.terminal.message
        if message and traj.turns[turn].assistant_message.strip() != message:
            return [f"{where}: the assistant's last message is not {message!r}"]
        return []
    return []


def _one_at_a_time(traj: Trajectory, policy: Policy) -> list[str]:
    """Turns with two calls in one parallel group."""
    if not policy.one_at_a_time:
        return []
    out = []
    for turn in traj.turns:
        groups = [c.group for c in turn.calls]
        if len(set(groups)) < len(groups):
            out.append(f"policy one_at_a_time: turn {turn.index} makes {len(groups)} calls in "
                       f"{len(set(groups))} parallel groups")
    return out


def unit_amounts(rule: ValueRule, calls: list[ToolCall]) -> list[float]:
    """The values `rule` allows after `calls`: each rate times each earlier `unit_tool` result's unit count."""
    counts = set()
    for call in calls:
        if call.name == rule.unit_tool and call.ok:
            try:
                found = resolve(call.result, rule.unit_path)
            except PathError:
                continue
            if isinstance(found, list):
                counts.add(len(found))
    amounts = {rate * n for rate in rule.per_unit for n in counts}
    return sorted(int(a) if float(a).is_integer() else a for a in amounts)


def _value_rules(calls: list[tuple[int, int, ToolCall]], policy: Policy) -> list[str]:
    """A ruled argument whose value no rate times an earlier unit count gives."""
    out = []
    for rule in policy.value_rules:
        for n, (turn, index, call) in enumerate(calls):
            if call.name != rule.tool or rule.param not in call.args_exec:
                continue
            allowed = unit_amounts(rule, [c for _, _, c in calls[:n]])
            if call.args_exec[rule.param] not in allowed:
                out.append(f"policy value_rules: turn {turn} call {index} ({call.name}) {rule.param}="
                           f"{call.args_exec[rule.param]!r}, allowed {allowed or 'nothing (no ' + rule.unit_tool + ' result before it)'}")
    return out
