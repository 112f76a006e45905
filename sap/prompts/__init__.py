"""Prompt files, one per role and purpose: loaded by name, rendered with $placeholders, hashed for record meta."""
from __future__ import annotations

import functools
import hashlib
import string
from dataclasses import dataclass
from importlib import resources
from typing import Any

_USER_MARK = "=== user ==="


@dataclass(frozen=True)
class Prompt:
    """A system text and a user template (string.Template syntax) read from `sap/prompts/<name>.md`."""

    name: str
    system: str
    user: str

    @property
    def sha(self) -> str:
        """Short sha256 of the prompt file's content, stored in each record's meta."""
        return hashlib.sha256(f"{self.system}\n{_USER_MARK}\n{self.user}".encode()).hexdigest()[:12]

    def messages(self, **values: Any) -> list[dict[str, str]]:
        """Chat messages with every $placeholder filled (a missing one raises KeyError naming it)."""
        return [{"role": "system", "content": self.system},
                {"role": "user", "content": string.Template(self.user).substitute(values)}]


@functools.cache
def prompt(name: str) -> Prompt:
    """The prompt called `name`; the file must hold a system part, a `=== user ===` line and a user part."""
    text = resources.files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8")
    if _USER_MARK not in text:
        raise ValueError(f"sap/prompts/{name}.md: no '{_USER_MARK}' line between the system and user parts")
    system, user = text.split(_USER_MARK, 1)
    return Prompt(name, system.strip(), user.strip())
