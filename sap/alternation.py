"""Alternations in wording: "[log|sign] me in [with|using] {email}" reads four ways; groups nest, an empty
option makes a part optional ("[just |]check"), and every expansion is listed so each can be checked."""
from __future__ import annotations

import re
from collections.abc import Iterable

from sap.errors import SapError

MAX_EXPANSIONS = 512  # per written phrase: more is a typo'd group, not variety


class AlternationError(SapError, ValueError):
    """A phrase whose brackets do not pair up or that expands to too many phrases."""


def _options(text: str, start: int) -> tuple[list[list[str]], int]:
    """The options of the group opening at text[start] ('['), each as its expansions, and the index after ']'."""
    options: list[list[str]] = []
    pos = start + 1
    while True:
        expansions, pos = _sequence(text, pos)
        options.append(expansions)
        if pos >= len(text):
            raise AlternationError(f"unclosed '[' at character {start} in {text!r}")
        if text[pos] == "]":
            return options, pos + 1
        pos += 1  # '|'


def _sequence(text: str, pos: int) -> tuple[list[str], int]:
    """The expansions of the text from `pos` up to the next '|' or ']' of this level (or the end)."""
    out = [""]
    while pos < len(text) and text[pos] not in "|]":
        if text[pos] == "[":
            options, pos = _options(text, pos)
            choices = [e for option in options for e in option]
            out = [a + b for a in out for b in choices]
        else:
            literal = re.match(r"[^\[\]|]+", text[pos:])
            assert literal is not None
            out = [a + literal.group() for a in out]
            pos += literal.end()
        if len(out) > MAX_EXPANSIONS:
            raise AlternationError(f"{text!r} expands to more than {MAX_EXPANSIONS} phrases")
    return out, pos


def expansions(text: str) -> list[str]:
    """Every phrase a text with [a|b] groups reads as, spaces tidied inside ("[just |]check  it" -> "just check
    it", "check it"; a leading or trailing space is kept: ", then {y}" and " and {y}" are both pieces), duplicates
    and blank readings dropped, in order."""
    found, pos = _sequence(text, 0)
    if pos < len(text):
        raise AlternationError(f"'{text[pos]}' outside a group at character {pos} in {text!r}")
    tidy = (re.sub(r"(?<=\S)\s+([,.;:!?])", r"\1", re.sub(r"\s{2,}", " ", e)) for e in found)
    return list(dict.fromkeys(t for t in tidy if t.strip()))


def expand_all(texts: Iterable[str]) -> list[str]:
    """The expansions of every text, in order, duplicates dropped."""
    return list(dict.fromkeys(e for t in texts for e in expansions(t)))
