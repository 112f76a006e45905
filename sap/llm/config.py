"""ModelConfig (one role's LiteLLM model and call policy) and the lazy, offline-safe LiteLLM import."""
from __future__ import annotations

import functools
import os
from types import ModuleType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sap.llm.defaults import DEFAULT_STRUCTURED, DEFAULT_TIMEOUT


class ModelConfig(BaseModel):
    """How one role calls its model. Holds the NAME of the API key's environment variable, never the key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(min_length=1, description="LiteLLM model string, e.g. openai/smollm2")
    api_base: str | None = None
    api_key_env: str | None = Field(default=None, description="environment variable holding the API key")
    temperature: float = Field(default=0.7, ge=0.0)
    max_tokens: int = Field(default=1024, gt=0)
    context_tokens: int | None = Field(default=None, gt=0, description=(
        "the model's context window in tokens; prompts are summarised to fit it less max_tokens (default: "
        "LiteLLM's model map, else 8192)"))
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0.0, description="seconds per request")
    max_retries: int = Field(default=5, ge=0, description="retries of transient errors per request")
    max_validation_retries: int = Field(default=2, ge=0, description="re-asks after an invalid answer")
    backoff_base: float = Field(default=0.5, gt=0.0, description="first transient backoff, seconds")
    backoff_max: float = Field(default=30.0, gt=0.0, description="longest wait between retries, Retry-After included")
    concurrency: int = Field(default=8, ge=1, description="requests in flight per (model, api_base)")
    rpm: int | None = Field(default=None, ge=1, description="requests per minute per (model, api_base)")
    tpm: int | None = Field(default=None, ge=1, description="tokens per minute per (model, api_base)")
    structured: Literal["auto", "json_schema", "json_object", "prompt"] = Field(default=DEFAULT_STRUCTURED, description=(
        "json_schema: OpenAI structured output; json_object: the schema in the prompt and as response_format "
        "{type: json_object, schema} (llama.cpp's server constrains decoding to it); prompt: the schema in the "
        "prompt only, the answer parsed and repaired; auto: json_schema if the server takes one tiny json_schema "
        "request (asked once per model and server in a process), else json_object"))
    input_cost_per_token: float | None = Field(default=None, ge=0.0)
    output_cost_per_token: float | None = Field(default=None, ge=0.0)

    @model_validator(mode="after")
    def _answer_fits_the_context(self) -> ModelConfig:
        if self.context_tokens is not None and self.context_tokens <= self.max_tokens:
            raise ValueError(f"context_tokens {self.context_tokens} leaves no room for a prompt beside max_tokens "
                             f"{self.max_tokens}")
        return self

    @model_validator(mode="after")
    def _prices_come_in_pairs(self) -> ModelConfig:
        if (self.input_cost_per_token is None) != (self.output_cost_per_token is None):
            raise ValueError("give both input_cost_per_token and output_cost_per_token, or neither")
        return self

    def public(self) -> dict[str, Any]:
        """A JSON-safe dict of the config for records and fingerprints (an unset context_tokens left out, as configs
        were before it existed)."""
        return self.model_dump(mode="json", exclude={"context_tokens"} if self.context_tokens is None else None)


@functools.cache
def load_litellm() -> ModuleType:
    """Import LiteLLM on first use, with the bundled cost map (no network fetch) and no debug banners."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    import litellm

    litellm.suppress_debug_info = True
    return litellm
