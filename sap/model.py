"""Pydantic types shared by every part of sap: tools, provenance, calls, turns, trajectories, FSMs."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field


class ToolSpec(BaseModel):
    """One tool as the model sees it: name, description, JSON-schema parameters, optional response schema."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}, "required": []})
    response: dict[str, Any] | None = None
    read_only: bool | None = None
    owner: str | None = None
    value_fields: dict[str, list[str]] = Field(default_factory=dict)  # param -> other field names that can fill it

    @property
    def properties(self) -> dict[str, dict[str, Any]]:
        """The parameter schemas by name."""
        return self.parameters.get("properties", {})

    @property
    def required(self) -> list[str]:
        """Names of the required parameters."""
        return list(self.parameters.get("required", []))

    def aliases(self, param: str) -> tuple[str, ...]:
        """The other names of result and config fields whose values can fill `param` (`value_fields`)."""
        return tuple(self.value_fields.get(param, ()))

    def to_openai(self) -> dict[str, Any]:
        """The tool as an OpenAI `tools` entry."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@dataclass
class Toolset:
    """Tools plus the means to run them: an executor factory and a sampler of initial configurations c0."""

    name: str
    description: str
    tools: list[ToolSpec]
    executor_factory: Callable[[], Executor]
    sample_config: Callable[[int], dict[str, Any]]
    extra: dict[str, Any] = field(default_factory=dict)
    source: str | None = None  # what `--toolset` loads it from when that is a file (domain module, MCP config)

    def tool(self, name: str) -> ToolSpec:
        """The spec of the tool called `name`."""
        for spec in self.tools:
            if spec.name == name:
                return spec
        raise KeyError(f"toolset {self.name!r} has no tool {name!r}")


class Tag(str, Enum):
    """Where an argument value comes from (SAP provenance tags)."""

    initial_state = "initial_state"  # P_i: read from the initial configuration c0
    prev_output = "prev_output"  # P_o: a field of an earlier tool result
    self_create = "self_create"  # P_c: introduced by the user in this turn
    prev_user_msg = "prev_user_msg"  # P_u: stated by the user in an earlier turn
    fallback = "fallback"  # P_f: declared source unusable at run time


class Selector(BaseModel):
    """How a reference singles out its value among several of the same kind: by a field value no sibling shares,
    by position in its listing, by naming it, and/or as the most recent of several results or statements."""

    model_config = ConfigDict(extra="forbid")

    noun: str = "entry"  # what the elements are, in words ("order", "file name")
    field: str | None = None  # a field of the element whose value no sibling shares
    value: Any = None  # that field's value
    position: int | None = None  # 1-based place of the element (or statement) among its siblings
    named: bool = False  # the user names the value itself (a listing the user has not seen yet)
    latest: bool = False  # the most recent of several results of the same tool (or statements of the value)


class ArgProvenance(BaseModel):
    """The declared and verified source of one argument value."""

    tag: Tag
    turn: int | None = None  # producing turn (P_o) or anchor turn (P_u)
    call: int | None = None  # call index within the producing turn (P_o)
    path: str | None = None  # JSON path inside the result (P_o) or inside c0 (P_i)
    fallback_from: Tag | None = None  # the tag that could not be honoured (P_f)
    selector: Selector | None = None  # how the reference singles out its value when it is one among several

    def effective_tag(self) -> Tag:
        """The tag of the source actually used: for a fallback, what its located source amounts to."""
        if self.tag != Tag.fallback:
            return self.tag
        if self.path and self.turn is not None:
            return Tag.prev_output
        if self.turn is not None:
            return Tag.prev_user_msg
        return Tag.initial_state if self.path else Tag.self_create

    def source(self) -> dict[str, Any] | None:
        """The locating part as exported: turn/call/path for P_o, path for P_i, anchor turn for P_u."""
        chosen = {"selector": self.selector.model_dump(mode="json", exclude_defaults=True)} if self.selector else {}
        if self.tag == Tag.prev_output:
            return {"turn": self.turn, "call": self.call, "path": self.path, **chosen}
        if self.tag == Tag.initial_state:
            return {"path": self.path}
        if self.tag == Tag.prev_user_msg:
            return {"turn": self.turn, **chosen}
        return None


_ITEM_KEY = re.compile(r"^([^\[\].]+)\[(\d+)\]\.([^\[\].]+)$")


def item_key(param: str, index: int, field_name: str) -> str:
    """The provenance key of one field of one item of an array-of-objects argument: `flights[0].flight_number`."""
    return f"{param}[{index}].{field_name}"


def split_item_key(key: str) -> tuple[str, int, str] | None:
    """(param, item index, field) of an item key (`item_key`), or None for a plain argument name."""
    m = _ITEM_KEY.match(key)
    return (m.group(1), int(m.group(2)), m.group(3)) if m else None


def key_param(key: str) -> str:
    """The argument a provenance key belongs to: the argument itself, or the array an item key indexes."""
    parts = split_item_key(key)
    return parts[0] if parts else key


def key_field(key: str) -> str:
    """The parameter or item-field name a provenance key is about (`flights[0].date` -> `date`)."""
    parts = split_item_key(key)
    return parts[2] if parts else key


class ToolCall(BaseModel):
    """One executed tool call with its arguments, their provenance and the result. An array-of-objects argument
    may carry its provenance field by field (`item_key`: `flights[0].flight_number`) instead of as a whole."""

    call_id: str
    name: str
    args_exec: dict[str, Any]
    args_prov: dict[str, ArgProvenance]
    result: Any = None
    ok: bool = True
    error: str | None = None
    group: int = 0
    attempts: int = 1

    def arg_value(self, key: str) -> Any:
        """The value a provenance key names: an argument, or one field of one item of an array argument."""
        parts = split_item_key(key)
        if parts is None:
            return self.args_exec.get(key)
        items = self.args_exec.get(parts[0])
        if isinstance(items, list) and parts[1] < len(items) and isinstance(items[parts[1]], dict):
            return items[parts[1]].get(parts[2])
        return None

    def coverage_problems(self) -> list[str]:
        """Arguments without provenance or provenance without argument; an argument given field by field must have
        exactly one entry per field of each of its items (and be a list of objects)."""
        problems = []
        roots = {key_param(k) for k in self.args_prov}
        if roots != set(self.args_exec):
            problems.append(f"arguments without provenance: {sorted(roots ^ set(self.args_exec))}")
        for param in sorted(roots & set(self.args_exec)):
            keys = {k for k in self.args_prov if split_item_key(k) and key_param(k) == param}
            if not keys:
                continue
            if param in self.args_prov:
                problems.append(f"argument {param} has provenance both whole and field by field")
            items = self.args_exec[param]
            if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
                problems.append(f"argument {param} has field-by-field provenance but is not a list of objects")
                continue
            wanted = {item_key(param, i, f) for i, item in enumerate(items) for f in item}
            if keys != wanted:
                problems.append(f"argument {param}: item fields without provenance {sorted(wanted - keys)}, "
                                f"provenance without item field {sorted(keys - wanted)}")
        return problems


class Turn(BaseModel):
    """One user turn: the message, the calls it triggers and the assistant's reply."""

    index: int
    state: str  # FSM state reached after this turn
    transition: int  # index of the FSM transition this turn follows
    calls: list[ToolCall] = Field(default_factory=list)
    user_message: str = ""
    assistant_message: str = ""
    prerequisites: list[int] = Field(default_factory=list)  # goal style: indexes of the calls the assistant works
    # out itself (sap.provenance.goals); the user asks for the others


RewriteKind = Literal["base", "miss_param", "miss_func"]


class Trajectory(BaseModel):
    """A synthesized dialogue with its initial configuration, turns and checks."""

    id: str
    toolset: str
    seed: int
    c0: dict[str, Any]
    turns: list[Turn]
    virtual_history: list[dict[str, Any]] = Field(default_factory=list)
    rewrite_kind: RewriteKind = "base"
    missed_function: dict[int, list[str]] = Field(default_factory=dict)  # MissFunc: turn -> tools hidden at that turn
    checks: dict[str, Any] = Field(default_factory=dict)
    judge: dict[str, Any] | None = None
    stats: dict[str, Any] = Field(default_factory=dict)

    def calls(self) -> list[tuple[int, int, ToolCall]]:
        """Every call as (turn index, call index, call), in dialogue order."""
        return [(t.index, i, c) for t in self.turns for i, c in enumerate(t.calls)]


class StateType(str, Enum):
    """The 13 dialogue-phase types of SAP's FSM taxonomy."""

    INITIAL = "INITIAL"
    AUTH_REQUIRED = "AUTH_REQUIRED"
    AUTH_COMPLETED = "AUTH_COMPLETED"
    INFO_GATHERING = "INFO_GATHERING"
    SEARCHING = "SEARCHING"
    FOUND = "FOUND"
    UNAVAILABLE = "UNAVAILABLE"
    ACTION_REQUIRED = "ACTION_REQUIRED"
    ACTION_COMPLETED = "ACTION_COMPLETED"
    ERROR = "ERROR"
    REJECTION = "REJECTION"
    COMPLETED = "COMPLETED"
    NORMAL = "NORMAL"


class FSMState(BaseModel):
    """One dialogue phase."""

    id: str
    type: StateType
    description: str = ""


class Transition(BaseModel):
    """An FSM edge: one user turn calling `action`, with a provenance tag per tool argument."""

    model_config = ConfigDict(populate_by_name=True)

    source: str = Field(alias="from")
    target: str = Field(alias="to")
    action: list[str]
    condition: str = ""
    probability: float = 1.0
    weight: float = 1.0
    is_critical: bool = False
    provenance_tag: dict[str, dict[str, Tag]] = Field(default_factory=dict)


class Scope(Protocol):
    """Where a toolset's names resolve (a file system's current folder): a name from c0's tree or from a listing is
    usable only in the folder it is in; a toolset declares one as `extra["scope"]`."""

    def folder_of(self, path: str) -> tuple[str, ...] | None:
        """The folder a c0 path names an entry of (None: a path the scope says nothing about)."""

    def current(self, calls: list[ToolCall]) -> tuple[str, ...]:
        """The current folder after `calls` (the successful calls so far, in order)."""

    def listed_in(self, tool: str) -> bool:
        """Whether `tool`'s result lists the entries of the folder current when it ran (`ls`)."""

    def moves(self, tool: str) -> bool:
        """Whether `tool` changes the current folder (`cd`)."""

    @property
    def up(self) -> str:
        """The value a moving tool takes to go one folder up (`..`)."""

    def where(self, c0: dict[str, Any], name: str) -> tuple[str, ...] | None:
        """The folder of c0's tree that holds an entry called `name`, or None."""


class Precondition(BaseModel):
    """A learned prerequisite: `tool` failed with `error` until `needs` ran first (with `args`: the argument values
    that made it work and that the planner's own binding may not hit, such as a boolean, an enum or a bound)."""

    tool: str
    needs: str
    error: str
    args: dict[str, Any] = Field(default_factory=dict)


class FSM(BaseModel):
    """States, initial state, final states and provenance-tagged transitions."""

    states: list[FSMState]
    initial: str
    finals: list[str]
    transitions: list[Transition]
    producers: dict[str, dict[str, list[str]]] = Field(default_factory=dict)  # tool -> arg -> tools whose results feed it
    writes: list[str] = Field(default_factory=list)  # action tools: a call of one that leaves the state as it was is a no-op
    requires: dict[str, list[str]] = Field(default_factory=dict)  # tool -> tools that must run first when the state needs them
    preconditions: list[Precondition] = Field(default_factory=list)  # how each requires entry was learned

    def out_edges(self, state: str) -> list[int]:
        """Indices of the transitions leaving `state`."""
        return [i for i, t in enumerate(self.transitions) if t.source == state]

    def state(self, state_id: str) -> FSMState:
        """The state with id `state_id`."""
        for s in self.states:
            if s.id == state_id:
                return s
        raise KeyError(state_id)


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one call: ok with a JSON value, or an error text."""

    ok: bool
    value: Any = None
    error: str | None = None


@runtime_checkable
class Executor(Protocol):
    """A stateful tool environment that can be reset, rolled back and compared."""

    def reset(self, c0: dict[str, Any]) -> None:
        """Load the initial configuration c0, discarding all state."""

    def execute(self, call: ToolCall) -> ExecResult:
        """Run one call; never raises for tool failures, and a failed call leaves the state as it was."""

    def snapshot(self) -> Any:
        """An opaque copy of the current state."""

    def restore(self, snap: Any) -> None:
        """Return to a state taken by `snapshot`."""

    def state(self) -> dict[str, Any]:
        """A comparable JSON view of the current state."""
