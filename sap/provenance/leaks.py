"""Internals leaked into dialogue text: tool names, raw parameter names, JSON paths, provenance tags and call
positions, which no user or assistant would write.

Rules (each finding names its kind and the offending text):
- tool name: an identifier-like name (with "_", a digit or camelCase: `get_user_details`, `lockDoors`) anywhere as
  a whole token, and its words when they are three or more, connectives such as "to" or "by" not counted ("modify
  pending order address": two-word forms such as "search flights", "book hotel" or "gallon to liter" are ordinary
  requests). A one-word lower-case name is an English word or a
  shell command: a name of at most two letters or without a vowel (`ls`, `cd`, `mv`, `wc`, `pwd`) is flagged as a
  lower-case whole word; any other (`find`, `sort`, `cat`, `mkdir`) only where it is used as a command: in
  backticks or quotes, before "(" or a command-line flag, or beside "command", "tool" or "function".
- raw parameter: a parameter name of the toolset with "_", a digit or camelCase (`address1`, `pedalPosition`) as a
  whole token.
Names count only as tokens of their own: inside a path, a file name, an e-mail or hyphenated text
("notes/cd", "ls.txt", "value-address1") they are part of a value.
- JSON path: "$." or "$[", an index such as "[0]", a quoted key in brackets ("["id"]"), or a `.field` chain whose
  field is a raw name (`orders.order_id`).
- provenance tag: a tag name (`self_create`, `prev_output`, `initial_state`, `prev_user_msg`), a must-mention
  label ([NEW], [FROM_HISTORY], [FROM_CONFIG]) or the fallback tag ("[FALLBACK", "FALLBACK from", `fallback_from`).
- call position: "turn N call M" or a call id (`call_2_0`).
Data is not a leak: text inside quotes that is part of a value the dialogue carries (an argument or a result, as
`data_values` collects them, "…" marking a cut), and such a value written out whole, are left out before the rules
apply (a file that reads "du -h / ls -la" names no tool).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from sap.model import ToolSpec

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ALONE = r"(?<![\w./@-]){n}(?![\w/@-]|\.\w)"  # a name as a token of its own, not part of a value (a path, a file
# name, an e-mail or hyphenated text such as "value-address1")
RAW = re.compile(r"_|\d|[a-z][A-Z]")
COMMAND_CONTEXT = r"(?:[`'\"]{n}[`'\"]|(?<![A-Za-z0-9_]){n}\s*\(|(?<![A-Za-z0-9_]){n}\s+--?[A-Za-z]|" \
                  r"\b(?:command|tool|function)\s+{n}\b|(?<![A-Za-z0-9_]){n}\s+(?:command|tool|function)\b)"
JSON_PATH = re.compile(r"\$[.\[]|\[\d+\]|\[[\"'][^\"'\]]+[\"']\]|"
                       r"(?:\]|[A-Za-z0-9_])\.(?:[a-z]+(?:_[a-z0-9]+)+|[a-z]+[A-Z]\w*)\b(?![@.-])")
TAGS = re.compile(r"\b(?:self_create|prev_output|initial_state|prev_user_msg|fallback_from)\b|"
                  r"\[(?:NEW|FROM_HISTORY|FROM_CONFIG|FALLBACK)\b|\bFALLBACK\b|\bfallback from (?:prev_output|"
                  r"initial_state|self_create|prev_user_msg)\b|\bFROM_(?:HISTORY|CONFIG)\b")
CONNECTIVES = {"to", "by", "of", "on", "in", "for", "from", "and", "with", "at"}  # not counted among a name's words
POSITION = re.compile(r"\bturn\s+\d+,?\s+call\s+\d+\b|\bcall_\d+_\d+\b", re.I)
QUOTED = re.compile(r'"([^"\n]+)"|“([^”\n]+)”')
MIN_VALUE = 3  # shorter values are not masked: "ls" as a whole value is no evidence of data


def data_values(*docs: Any) -> set[str]:
    """The string leaves (of MIN_VALUE characters or more) of JSON-like documents: a dialogue's arguments and results."""
    return {leaf for doc in docs for leaf in _strings(doc) if len(leaf.strip()) >= MIN_VALUE}


def _strings(doc: Any) -> Iterator[str]:
    if isinstance(doc, str):
        yield doc
    elif isinstance(doc, dict):
        for value in doc.values():
            yield from _strings(value)
    elif isinstance(doc, (list, tuple)):
        for value in doc:
            yield from _strings(value)


def _flat(text: str) -> str:
    """Text with runs of white space and " / " (how a reply writes a text's line breaks) as one space."""
    return re.sub(r"(?:\s/\s|\s)+", " ", text).strip(" /")


def _without_data(text: str, values: set[str]) -> str:
    """`text` with quoted parts of the dialogue's values, and those values written out whole, blanked."""
    if not values:
        return text

    flat = [_flat(v) for v in values]

    def blank(m: re.Match[str]) -> str:
        inner = _flat((m.group(1) or m.group(2) or "").rstrip().rstrip("…"))
        return '""' if len(inner) >= MIN_VALUE and any(inner in v for v in flat) else m.group(0)

    text = QUOTED.sub(blank, text)
    for value in sorted(values, key=len, reverse=True):
        if value in text:
            text = text.replace(value, " ")
    return text


def names_of(specs: dict[str, ToolSpec] | Iterable[ToolSpec]) -> tuple[set[str], set[str]]:
    """(tool names, parameter names) of a toolset's specs."""
    tools = list(specs.values()) if isinstance(specs, dict) else list(specs)
    return {t.name for t in tools}, {p for t in tools for p in (t.parameters or {}).get("properties", {})}


def find_leaks(text: str, tools: Iterable[str], params: Iterable[str] = (), values: set[str] = frozenset()) -> list[str]:
    """Every leak in `text`, each as "<kind>: <offending text>" (empty when the text is clean); `values` (from
    `data_values`) are the dialogue's data, which is no leak where the text quotes or restates it."""
    found: list[str] = []
    text = _without_data(text, values)
    tokens = set(IDENTIFIER.findall(text))
    for name in sorted(set(tools)):
        hit = _tool_hit(text, tokens, name)
        if hit:
            found.append(f"tool name: {hit!r}")
    for name in sorted(set(params) - set(tools)):
        if RAW.search(name) and name in tokens and re.search(ALONE.format(n=re.escape(name)), text):
            found.append(f"raw parameter: {name!r}")
    for kind, pattern in (("JSON path", JSON_PATH), ("provenance tag", TAGS), ("call position", POSITION)):
        if m := pattern.search(text):
            found.append(f"{kind}: {m.group(0)!r}")
    return found


def _tool_hit(text: str, tokens: set[str], name: str) -> str | None:
    """The text by which `text` names the tool `name`, per the module's rules, or None."""
    if RAW.search(name):
        if name in tokens and re.search(ALONE.format(n=re.escape(name)), text):
            return name
        words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|_+", " ", name).lower().split()
        if len(set(words) - CONNECTIVES) >= 3 and (m := re.search(r"(?<![A-Za-z0-9])" + r"\s+".join(map(re.escape, words))
                                               + r"(?![A-Za-z0-9])", text, re.I)):
            return m.group(0)
        return None
    if len(name) <= 2 or not re.search(r"[aeiouy]", name, re.I):
        return name if re.search(ALONE.format(n=re.escape(name)), text) else None
    m = re.search(COMMAND_CONTEXT.replace("{n}", re.escape(name)), text)
    return m.group(0) if m else None
