"""What every LLM role shares: its client and model, prompt rendering, and compact text views of the data."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from pydantic import BaseModel

from sap.llm import LLMClient, ModelConfig, ResponseSchema
from sap.model import ToolCall
from sap.prompts import prompt

ResponseT = TypeVar("ResponseT", bound=BaseModel)
STATE_CHARS = 1500  # c0 summaries are cut here: small local models have short contexts
RESULT_CHARS = 400


def compact(value: Any, limit: int) -> str:
    """`value` as compact JSON, cut to `limit` characters with a marker when longer."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[:limit] + " ...(cut)"


def call_line(turn: int, index: int, call: ToolCall) -> str:
    """One executed call as a line: position, name, arguments and (cut) result."""
    shown = compact(call.result, RESULT_CHARS) if call.ok else f"error: {call.error}"
    return f"turn {turn} call {index}: {call.name}({compact(call.args_exec, 300)}) -> {shown}"


@dataclass
class LLMRole:
    """One role's LLM access: the shared client, this role's model config, and its name in the ledger."""

    client: LLMClient
    model: ModelConfig
    role: str

    def ask(self, prompt_name: str, response_model: type[ResponseT], response_schema: dict[str, Any],
            check: Callable[[ResponseT], None] | None = None, **values: Any) -> ResponseT:
        """Render prompt `prompt_name` with `values` and return the model's answer, validated against this
        request's exact `response_schema` (sent to the model under the prompt's name) and then by `check`."""
        return self.client.complete(self.role, self.model, prompt(prompt_name).messages(**values), response_model,
                                    check=check, schema=ResponseSchema(prompt_name, response_schema))
