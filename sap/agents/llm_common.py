"""What every LLM role shares: its client and model, prompt rendering within the model's budget, and compact text
views of the data that stay valid JSON however short."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from sap.llm import LLMClient, LLMRoleError, ModelConfig, ResponseSchema
from sap.llm.budget import prompt_budget, prompt_tokens
from sap.model import ToolCall
from sap.prompts import prompt

ResponseT = TypeVar("ResponseT", bound=BaseModel)
STATE_CHARS = 1500  # c0 summaries start at this size, and shrink further when a prompt is over the model's budget
RESULT_CHARS = 400
MIN_FIT_CHARS = 40  # the least a summarised prompt value is shrunk to
_SHRINK_STEPS = ((8, 200), (4, 80), (2, 40), (1, 16))  # (list items, string characters) kept, coarser and coarser


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _shrunk(value: Any, items: int, chars: int) -> Any:
    """`value` with every list cut to its first `items` entries (a marker string says how many more), every object
    to its first 4 x `items` keys likewise, and every string to `chars` characters."""
    if isinstance(value, str):
        return value if len(value) <= chars else value[:chars] + "..."
    if isinstance(value, list):
        kept = [_shrunk(v, items, chars) for v in value[:items]]
        return kept + ([f"...({len(value) - items} more)"] if len(value) > items else [])
    if isinstance(value, dict):
        keys = list(value)[:4 * items]
        out = {k: _shrunk(value[k], items, chars) for k in keys}
        if len(value) > len(keys):
            out["..."] = f"{len(value) - len(keys)} more keys"
        return out
    return value


def compact(value: Any, limit: int) -> str:
    """`value` as compact JSON within `limit` characters: whole when it fits, else summarised (lists and objects
    cut to their first entries with a count of the rest, long strings cut), always valid JSON, never cut midway."""
    text = _dump(value)
    for items, chars in _SHRINK_STEPS:
        if len(text) <= limit:
            return text
        text = _dump(_shrunk(value, items, chars))
    if len(text) <= limit:
        return text
    size = f"{len(value)} entries" if isinstance(value, (list, dict)) else f"{len(_dump(value))} characters"
    marker = _dump(f"({type(value).__name__} of {size}, left out)")
    return marker if len(marker) <= limit else _dump("...")


def call_line(turn: int, index: int, call: ToolCall, limit: int = RESULT_CHARS) -> str:
    """One executed call as a line: position, name, arguments and (summarised) result."""
    shown = compact(call.result, limit) if call.ok else f"error: {call.error}"
    return f"turn {turn} call {index}: {call.name}({compact(call.args_exec, 300)}) -> {shown}"


@dataclass(frozen=True)
class Fit:
    """A prompt value that may be shown smaller: `render(n)` gives it in about `n` characters (a summary of c0, the
    newest calls of a history); the prompt starts at `limit` and halves it while the prompt is over the budget."""

    render: Callable[[int], str]
    limit: int


def fit(value: Any, limit: int) -> Fit:
    """A JSON value as a Fit: `compact` at the size asked."""
    return Fit(lambda n: compact(value, n), limit)


def newest_lines(lines: list[str]) -> Callable[[int], str]:
    """A Fit renderer of lines in order: as many of the newest as fit in the size asked (at least the newest)."""
    def render(n: int) -> str:
        kept: list[str] = []
        for line in reversed(lines):
            if kept and sum(map(len, kept)) + len(line) > n:
                break
            kept.insert(0, line)
        return "\n".join(kept) or "(none)"
    return render


@dataclass
class LLMRole:
    """One role's LLM access: the shared client, this role's model config, and its name in the ledger."""

    client: LLMClient
    model: ModelConfig
    role: str

    def ask(self, prompt_name: str, response_model: type[ResponseT], response_schema: dict[str, Any],
            check: Callable[[ResponseT], None] | None = None, **values: Any) -> ResponseT:
        """Render prompt `prompt_name` with `values` within the model's prompt budget and return the model's answer,
        validated against this request's exact `response_schema` (sent to the model under the prompt's name) and
        then by `check`. `Fit` values are shown smaller, halving each, until the prompt fits; a prompt that does not
        fit even so fails the role (kind `rejected`), naming its size and the budget."""
        messages = self.messages(prompt_name, response_schema, values)
        return self.client.complete(self.role, self.model, messages, response_model,
                                    check=check, schema=ResponseSchema(prompt_name, response_schema))

    def messages(self, prompt_name: str, response_schema: dict[str, Any],
                 values: dict[str, Any]) -> list[dict[str, str]]:
        """The prompt's messages with every Fit value as large as the model's budget allows."""
        budget = prompt_budget(self.model)
        sizes = {k: v.limit for k, v in values.items() if isinstance(v, Fit)}
        while True:
            messages = prompt(prompt_name).messages(**{k: v.render(sizes[k]) if isinstance(v, Fit) else v
                                                       for k, v in values.items()})
            tokens = prompt_tokens(self.model, messages, response_schema, budget)
            if tokens <= budget:
                return messages
            if not sizes or all(n <= MIN_FIT_CHARS for n in sizes.values()):
                raise LLMRoleError(self.role, self.model.model, "rejected", (
                    f"the {prompt_name} prompt holds {tokens} tokens, over the model's budget of {budget} (its context "
                    f"less max_tokens {self.model.max_tokens}) even with the state and history summarised; raise "
                    f"context_tokens if the model takes more"))
            sizes = {k: max(MIN_FIT_CHARS, n // 2) for k, n in sizes.items()}
