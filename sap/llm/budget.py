"""Prompt budgets: how many tokens a role's prompt may hold (the model's context less its answer), and the prompt's
own count, with the model's tokenizer where LiteLLM knows it."""
from __future__ import annotations

import functools
import json
from typing import Any

from sap.llm.config import ModelConfig, load_litellm

DEFAULT_CONTEXT_TOKENS = 8192  # a model LiteLLM does not know: the context a small local model serves


@functools.lru_cache(maxsize=256)
def known_context(model: str) -> int | None:
    """The input context LiteLLM's model map gives `model`, if it knows the model."""
    try:
        info = load_litellm().get_model_info(model)
    except Exception:  # LiteLLM raises ModelNotMappedError, and others for odd names
        return None
    tokens = info.get("max_input_tokens") or info.get("max_tokens")
    return int(tokens) if tokens else None


def prompt_budget(cfg: ModelConfig) -> int:
    """The tokens a prompt to `cfg`'s model may hold: its context (the config's `context_tokens`, else LiteLLM's
    model map, else DEFAULT_CONTEXT_TOKENS) less the answer's `max_tokens`."""
    context = cfg.context_tokens or known_context(cfg.model) or DEFAULT_CONTEXT_TOKENS
    return context - cfg.max_tokens


def prompt_tokens(cfg: ModelConfig, messages: list[dict[str, Any]], schema: dict[str, Any], limit: int) -> int:
    """The tokens of `messages` and the answer schema (which json_object and prompt modes put in the prompt). A
    prompt whose UTF-8 size is within `limit` is within it in tokens too (a byte-level tokenizer's token is at
    least one byte), so only a longer one is counted, with LiteLLM's token counter for the model."""
    text = json.dumps(schema)
    size = len(text.encode()) + sum(len(str(m.get("content") or "").encode()) for m in messages)
    if size <= limit:
        return size
    litellm = load_litellm()
    return litellm.token_counter(model=cfg.model, messages=messages) + litellm.token_counter(model=cfg.model,
                                                                                             text=text)
