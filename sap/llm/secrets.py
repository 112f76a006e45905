"""Secrets kept out of text: every key sap or LiteLLM may send, redacted from messages before they are stored."""
from __future__ import annotations

import os
import re

# environment variables that hold credentials: LiteLLM reads its providers' keys from names like these
SECRET_NAME = re.compile(r"(API_KEY|_KEY|_TOKEN|_SECRET|PASSWORD|API_BASE_KEY)$", re.I)
MIN_SECRET_LENGTH = 8  # shorter values (flags like "1") would redact ordinary words


def secret_values(extra: str | None = None) -> list[str]:
    """The values of credential-named environment variables (whatever source LiteLLM takes a key from), and
    `extra` (a key sap read itself), longest first so a key that contains another is replaced whole."""
    found = {value for name, value in os.environ.items()
             if SECRET_NAME.search(name) and len(value) >= MIN_SECRET_LENGTH}
    if extra and len(extra) >= MIN_SECRET_LENGTH:
        found.add(extra)
    return sorted(found, key=len, reverse=True)


def redact(text: str, extra: str | None = None) -> str:
    """`text` with every secret of `secret_values(extra)` replaced by ***."""
    for secret in secret_values(extra):
        text = text.replace(secret, "***")
    return text


def holds_secret(text: str, extra: str | None = None) -> bool:
    """Whether `text` contains any secret of `secret_values(extra)`."""
    return any(secret in text for secret in secret_values(extra))
