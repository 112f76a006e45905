"""Wording shared by the roles, the rewrite operators and the checks: values, tool and parameter names in words."""
from __future__ import annotations

import json
import re
from typing import Any

from sap.model import ToolSpec

LEAD_VERBS = {"get", "list", "search", "find", "show", "view", "check", "lookup", "fetch", "read", "query", "describe"}
QUOTED = re.compile(r"'([^']{1,80})'|\"([^\"]{1,80})\"")  # a value an error message quotes
FILE_LIKE = r"(?<![\w.])\w[\w-]*\.\w+(?![\w.])"  # a file-like word of an error ("grep: a.csv: No such file")
QUOTED_SPAN = re.compile(r"'[^']*'|\"[^\"]*\"")  # a quoted span of an error, quotes and all


def error_quotes(error: str | None) -> set[str]:
    """Values an error message quotes (the culprits it names)."""
    return {a or b for a, b in QUOTED.findall(error or "")}


def error_names(error: str | None) -> set[str]:
    """The names an error is about: the values it quotes and its file-like words ("grep: a.csv: No such file")."""
    return error_quotes(error) | set(re.findall(FILE_LIKE, error or ""))


def loose_pattern(text: str) -> str:
    """A regex for `text` in which any run of whitespace matches any run of whitespace."""
    return r"\s+".join(re.escape(part) for part in text.split())


def names_tool(text: str, tools: list[str]) -> bool:
    """Whether `text` names any tool as a whole word (`cat`, `get_user_details`, `get user details`)."""
    for name in tools:
        for form in {name, humanize(name)}:
            if re.search(r"(?<![A-Za-z0-9_])" + loose_pattern(form) + r"(?![A-Za-z0-9_])", text, re.I):
                return True
    return False


def join_words(items: list[str]) -> str:
    """Items as a list in prose: "a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def describe_value(value: Any) -> str:
    """A value as it must appear verbatim in text; an object as its fields in words (`first name "Noah", dob
    "1990-04-05"`), never raw JSON."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return ", ".join(describe_value(v) for v in value)
    if isinstance(value, dict) and value:  # `title "x", priority 3`: words, not raw JSON
        return ", ".join(f"{humanize(str(k))} {describe_value(v)}" for k, v in value.items())
    return json.dumps(value)


ABBREVIATIONS = {"id": "ID", "ids": "IDs", "dob": "date of birth", "iata": "airport code", "est": "(EST)",
                 "c": "(°C)", "num": "number", "qty": "quantity", "msg": "message", "dir": "folder"}


def field_words(key: str) -> str:
    """A field, parameter or tool name in words, as a user reads it, abbreviations spelled out: `user_id` ->
    "user ID", `dob` -> "date of birth", `frontLeftTirePressure` -> "front left tire pressure"."""
    return " ".join(ABBREVIATIONS.get(w.lower(), w) for w in humanize(key).split())


def humanize(param: str) -> str:
    """A name in plain words, never a raw identifier: `check_in` -> "check in", `pedalPosition` -> "pedal position",
    `address1` -> "address 1", `currentACTemperature` -> "current AC temperature"."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|_+|(?<=[a-z])(?=\d)", " ", param.strip("_"))
    return " ".join(w if w.isupper() and len(w) > 1 else w.lower() for w in spaced.split())


def task_phrase(spec: ToolSpec) -> str:
    """The tool's first description sentence, as a lower-case imperative phrase ("Checks the tire pressure" ->
    "check the tire pressure")."""
    return imperative(first_sentence(spec.description) or words_of(spec.name))


def first_sentence(text: str) -> str:
    """The first sentence of a description (up to ". ", ";" or a line break), without asides in parentheses and
    without its final stop."""
    sentence = text.strip().split("\n")[0].split(". ")[0].split(";")[0]
    return re.sub(r"\s*\([^()]*\)", "", sentence).strip().rstrip(".")


_SUBJECT = re.compile(r"^(?:this (?:tool|function|method|api|endpoint) |it )", re.I)
_NOT_VERBS = {"this", "status", "details", "news", "series", "address", "access", "process", "class", "bus", "gas",
              "alias", "canvas", "is", "has", "does", "was"}
_IRREGULAR = {"is": "be", "has": "have", "does": "do", "goes": "go", "returns": "get"}  # "returns" describes output


def imperative(sentence: str) -> str:
    """A description sentence as a lower-case imperative phrase: a leading "This tool"/"It" dropped and a
    third-person verb made imperative ("Retrieves" -> "retrieve", "Applies" -> "apply", "Presses" -> "press")."""
    text = _SUBJECT.sub("", sentence.strip())
    first, _, rest = text.partition(" ")
    low = first.lower()
    if low in _IRREGULAR and rest:
        first = _IRREGULAR[low]
    elif low not in _NOT_VERBS and rest and low.isalpha() and first[1:].islower():
        if low.endswith("ies") and len(low) > 4:
            first = low[:-3] + "y"
        elif re.search(r"(?:ss|sh|ch|x|z|o)es$", low):
            first = low[:-2]
        elif low.endswith("s") and not low.endswith(("ss", "us", "is")):
            first = low[:-1]
    if first[1:2].isupper():  # an acronym keeps its case
        return f"{first} {rest}".strip()
    return f"{first[:1].lower()}{first[1:]} {rest}".strip()


def words_of(name: str) -> str:
    """An identifier in plain words: `pedalPosition` -> "pedal position", `file_name1` -> "file name 1"."""
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|_+|(?<=[A-Za-z])(?=\d)", " ", name)
    return re.sub(r"\s+", " ", text).strip().lower()


def result_noun(tool: str) -> str:
    """A plain-words name for a tool's result: get_user_details -> "user details", ls -> "ls output"."""
    words = tool.split("_")
    if len(words) > 1 and words[0] in LEAD_VERBS:
        words = words[1:]
    return " ".join(words) if len(words) > 1 else f"{words[0]} output"


def plural(noun: str) -> str:
    """A naive plural: file -> files, address -> addresses, entry -> entries; a plural stays (guests)."""
    if re.search(r"[^su]s$", noun) and not re.search(r"(?:ss|us|is)$", noun):
        return noun
    if re.search(r"(?:s|sh|ch|x|z)$", noun):
        return noun + "es"
    if re.search(r"[^aeiou]y$", noun):
        return noun[:-1] + "ies"
    return noun + "s"


def article(noun: str) -> str:
    """The noun with "a" or "an"."""
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun
