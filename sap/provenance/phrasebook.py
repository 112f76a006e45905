"""Phrase books: per built-in toolset, how users ask for each tool in their own words (TOML files under
sap/toolsets/phrases/, format in docs/phrasebook.md); loaded and checked against the toolset's tool specs."""
from __future__ import annotations

import re
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from sap.alternation import AlternationError, expand_all, expansions
from sap.errors import ToolsetError
from sap.model import ToolSpec
from sap.provenance.paraphrase import synonym_spans, varied_pattern
from sap.text import loose_pattern

PHRASE_DIR = Path(__file__).resolve().parent.parent / "toolsets" / "phrases"
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
DETERMINER = r"(?:the|my|our|a|an|this|that)"  # a word before a noun that a reference may absorb


class PhraseBookError(ToolsetError, ValueError):
    """A malformed phrase file, located by file, tool and field."""

    def __init__(self, message: str, *, file: str, tool: str | None = None, field: str | None = None):
        self.message, self.file, self.tool, self.field = message, file, tool, field
        super().__init__(str(self))

    def __str__(self) -> str:
        """`file: tool 't' field 'f': message`, leaving out the parts that are unknown."""
        where = " ".join(p for p in (f"tool {self.tool!r}" if self.tool else "",
                                     f"field {self.field!r}" if self.field else "") if p)
        return f"{self.file}: {where}: {self.message}" if where else f"{self.file}: {self.message}"


@dataclass(frozen=True)
class Conditional:
    """Requests used only when the call's arguments equal `cond` (values the wording conveys)."""

    cond: Mapping[str, Any]
    requests: tuple[str, ...]


@dataclass(frozen=True)
class ToolPhrases:
    """How users ask for one tool: plain requests, conditional ones, goals, a noun per parameter, how a user
    names what the tool finds when the assistant runs it on its own (`found`: "the nearest tire shop") and how
    they state a value of their own that such a run takes (`stated`: "the files are in my {folder} folder")."""

    tool: str
    requests: tuple[str, ...]
    when: tuple[Conditional, ...]
    goals: tuple[str, ...]
    nouns: Mapping[str, str]
    written: bool = True  # written for the tool (a phrase book), not derived from its docstring
    found: str | None = None
    items: Mapping[str, str] = field(default_factory=dict)  # array-of-objects param -> how one item is said
    weights: Mapping[str, float] = field(default_factory=dict)  # reading -> 1 / its entry's readings
    stated: tuple[str, ...] = ()  # one placeholder each: a value of the user's own, said as a fact

    def weight(self, reading: str) -> float:
        """How much a reading weighs in a draw (its entry's share; 1 for a phrase not read from a file)."""
        return self.weights.get(reading, 1.0)

    def matching(self, args: Mapping[str, Any]) -> list[Conditional]:
        """The conditional entries whose condition the arguments meet."""
        return [c for c in self.when if all(k in args and args[k] == v for k, v in c.cond.items())]


@dataclass(frozen=True)
class PhraseBook:
    """The phrases of one or more files (a BFCL combination uses one file per class), by tool name, plus the
    context sentences users may open a dialogue with."""

    tools: Mapping[str, ToolPhrases]
    intros: tuple[str, ...]
    intro_weights: tuple[float, ...] = ()  # per intro reading: 1 / its entry's readings
    intro_tools: tuple[frozenset[str], ...] = ()  # per intro reading: the tools it is about (empty: any dialogue)

    def intros_for(self, called: Collection[str]) -> tuple[tuple[str, ...], tuple[float, ...]]:
        """The intros (and their weights) that may open a dialogue calling `called`: those about no tool in
        particular and those about one it calls ("I need to add a bag to my trip" only where bags are updated)."""
        about = self.intro_tools or (frozenset(),) * len(self.intros)
        keep = [i for i, tools in enumerate(about) if not tools or tools & set(called)]
        weights = self.intro_weights or (1.0,) * len(self.intros)
        return tuple(self.intros[i] for i in keep), tuple(weights[i] for i in keep)


def placeholders(text: str) -> list[str]:
    """The `{param}` names of a phrase, in order."""
    return PLACEHOLDER.findall(text)


def _strings(raw: Any, file: str, tool: str | None, field: str) -> tuple[str, ...]:
    """A list of non-empty strings, or a PhraseBookError naming the field."""
    if not isinstance(raw, list) or not all(isinstance(s, str) and s.strip() for s in raw):
        raise PhraseBookError("must be a list of non-empty strings", file=file, tool=tool, field=field)
    return tuple(s.strip() for s in raw)


def _readings(texts: tuple[str, ...], file: str, tool: str | None, field: str) -> tuple[tuple[str, ...],
                                                                                        dict[str, float]]:
    """Phrases with their [a|b] alternations expanded (every reading, so each is checked and drawn) and each
    reading's weight, 1 / its entry's number of readings, so a draw picks an entry first and then one of its
    readings (an entry with many readings is not picked more often); or a PhraseBookError naming the field."""
    weights: dict[str, float] = {}
    try:
        for text in texts:
            readings = list(dict.fromkeys(r.strip() for r in expansions(text)))
            for reading in readings:
                weights[reading] = weights.get(reading, 0.0) + 1.0 / len(readings)
    except AlternationError as exc:
        raise PhraseBookError(str(exc), file=file, tool=tool, field=field) from exc
    return tuple(weights), weights


def _check_placeholders(texts: tuple[str, ...], params: Mapping[str, Any], file: str, tool: str, field: str) -> None:
    """Every placeholder must name a parameter of the tool."""
    for i, text in enumerate(texts):
        for name in placeholders(text):
            if name not in params:
                raise PhraseBookError(f"placeholder {{{name}}} in {text!r} is not a parameter (parameters: "
                                      f"{', '.join(sorted(params)) or 'none'})", file=file, tool=tool,
                                      field=f"{field}[{i}]")


def _tool_phrases(name: str, raw: Any, spec: ToolSpec, file: str) -> ToolPhrases:
    """One tool's table, checked against its spec."""
    if not isinstance(raw, dict):
        raise PhraseBookError("must be a table", file=file, tool=name)
    unknown = set(raw) - {"requests", "when", "goals", "nouns", "found", "items", "stated"}
    if unknown:
        raise PhraseBookError(f"unknown keys {sorted(unknown)} (allowed: requests, when, goals, nouns, found, items, "
                              "stated)", file=file, tool=name)
    params = spec.properties
    requests = _strings(raw.get("requests", []), file, name, "requests")
    goals = _strings(raw.get("goals", []), file, name, "goals")
    _check_placeholders(requests, params, file, name, "requests")
    _check_placeholders(goals, params, file, name, "goals")
    (requests, weights), (goals, goal_weights) = (_readings(requests, file, name, "requests"),
                                                  _readings(goals, file, name, "goals"))
    weights = {**goal_weights, **weights}
    found = raw.get("found")
    if found is not None:
        found = _strings([found], file, name, "found")[0]
        _check_placeholders((found,), params, file, name, "found")
    stated, _ = _readings(_strings(raw.get("stated", []), file, name, "stated"), file, name, "stated")
    _check_placeholders(stated, params, file, name, "stated")
    for i, text in enumerate(stated):
        if len(placeholders(text)) != 1:
            raise PhraseBookError(f"{text!r} must hold exactly one placeholder", file=file, tool=name,
                                  field=f"stated[{i}]")
    when = []
    for i, entry in enumerate(raw.get("when", [])):
        field = f"when[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("if"), dict) or not entry["if"]:
            raise PhraseBookError("must be a table with a non-empty `if` table and `requests`", file=file, tool=name,
                                  field=field)
        for key in entry["if"]:
            if key not in params:
                raise PhraseBookError(f"`if` on {key!r}, which is not a parameter", file=file, tool=name,
                                      field=f"{field}.if")
        texts = _strings(entry.get("requests"), file, name, f"{field}.requests")
        _check_placeholders(texts, params, file, name, f"{field}.requests")
        readings, when_weights = _readings(texts, file, name, f"{field}.requests")
        when.append(Conditional(dict(entry["if"]), readings))
        weights = {**when_weights, **weights}
    if not requests and not when:
        raise PhraseBookError("needs `requests` or `when`", file=file, tool=name)
    nouns = raw.get("nouns", {})
    if not isinstance(nouns, dict):
        raise PhraseBookError("must be a table of parameter -> noun", file=file, tool=name, field="nouns")
    for key, noun in nouns.items():
        if key not in params:
            raise PhraseBookError(f"noun for {key!r}, which is not a parameter", file=file, tool=name, field="nouns")
        if not isinstance(noun, str) or not noun.strip():
            raise PhraseBookError("must be a non-empty string", file=file, tool=name, field=f"nouns.{key}")
    return ToolPhrases(name, requests, tuple(when), goals, {k: v.strip() for k, v in nouns.items()}, found=found,
                       items=_item_phrases(raw.get("items", {}), params, file, name), weights=weights,
                       stated=stated)


def _item_phrases(raw: Any, params: Mapping[str, Any], file: str, tool: str) -> dict[str, str]:
    """The `items` table: per array-of-objects parameter, how the user says one item ("flight {flight_number} on
    {date}"), its placeholders the item's fields."""
    if not isinstance(raw, dict):
        raise PhraseBookError("must be a table of parameter -> item phrase", file=file, tool=tool, field="items")
    for key, text in raw.items():
        item = params.get(key, {}).get("items", {}) if params.get(key, {}).get("type") == "array" else {}
        if not item.get("properties"):
            raise PhraseBookError(f"item phrase for {key!r}, which is not an array-of-objects parameter", file=file,
                                  tool=tool, field="items")
        if not isinstance(text, str) or not text.strip():
            raise PhraseBookError("must be a non-empty string", file=file, tool=tool, field=f"items.{key}")
        _check_placeholders((text,), item["properties"], file, tool, f"items.{key}")
    return {k: v.strip() for k, v in raw.items()}


def load_phrase_file(path: Path, specs: Mapping[str, ToolSpec]) -> PhraseBook:
    """A phrase file checked against the tool specs it is for: unknown tools, placeholders that are not
    parameters and `if` on unknown parameters are PhraseBookErrors naming file, tool and field."""
    file = str(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PhraseBookError(f"cannot read: {exc}", file=file) from exc
    unknown = set(raw) - {"tools", "intros"}
    if unknown:
        raise PhraseBookError(f"unknown top-level keys {sorted(unknown)} (allowed: tools, intros)", file=file)
    tables = raw.get("tools", {})
    tools = {}
    for name, table in tables.items():
        if name not in specs:
            raise PhraseBookError(f"unknown tool (the toolset has: {', '.join(sorted(specs))})", file=file, tool=name)
        tools[name] = _tool_phrases(name, table, specs[name], file)
    intros, weights, about = _intros(raw.get("intros", []), specs, file)
    return PhraseBook(tools, intros, tuple(weights[i] for i in intros), tuple(about[i] for i in intros))


def _intros(raw: Any, specs: Mapping[str, ToolSpec], file: str) -> tuple[tuple[str, ...], dict[str, float],
                                                                         dict[str, frozenset[str]]]:
    """The intro readings, their weights and the tools each is about: an entry is a sentence, or a table
    `{ text = "...", tools = [...] }` for an intro that only opens a dialogue calling one of those tools; a
    PhraseBookError names the entry and what is wrong with it."""
    if not isinstance(raw, list):
        raise PhraseBookError("must be a list of sentences or { text, tools } tables", file=file, field="intros")
    readings: list[str] = []
    weights: dict[str, float] = {}
    about: dict[str, frozenset[str]] = {}
    for i, entry in enumerate(raw):
        where = f"intros[{i}]"
        if isinstance(entry, dict):
            if set(entry) != {"text", "tools"}:
                raise PhraseBookError(f"an intro table has exactly the keys text and tools, not {sorted(entry)}",
                                      file=file, field=where)
            text, tools = entry["text"], entry["tools"]
            if not isinstance(tools, list) or not tools or not all(isinstance(t, str) for t in tools):
                raise PhraseBookError("tools must be a non-empty list of tool names", file=file, field=where + ".tools")
            unknown = sorted(set(tools) - set(specs))
            if unknown:
                raise PhraseBookError(f"unknown tools {unknown} (the toolset has: {', '.join(sorted(specs))})",
                                      file=file, field=where + ".tools")
        else:
            text, tools = entry, []
        (text,) = _strings([text], file, None, where)
        texts, entry_weights = _readings((text,), file, None, where)
        for reading in texts:
            if reading not in weights:
                readings.append(reading)
            weights[reading] = weights.get(reading, 0.0) + entry_weights[reading]
            prior = about.get(reading)  # a reading two entries share is about both, or about any dialogue
            about[reading] = frozenset(tools) if prior is None else prior | set(tools) if prior and tools else frozenset()
    return tuple(readings), weights, about


def phrase_file_names(toolset: str) -> list[str]:
    """The phrase files of a built-in toolset key: `filesystem` -> filesystem.toml, `bfcl/A+B` -> bfcl_A.toml and
    bfcl_B.toml, `tau2/retail` -> tau2_retail.toml."""
    if toolset.startswith("bfcl/"):
        return [f"bfcl_{cls}.toml" for cls in toolset.removeprefix("bfcl/").split("+")]
    return [toolset.replace("/", "_").replace("+", "_") + ".toml"]


def _fits(path: Path, specs: Mapping[str, ToolSpec]) -> bool:
    """Whether a phrase file is for these specs: every tool it names is among them (a BFCL class file also needs
    the specs' owner to be its class)."""
    names = set(re.findall(r"^\s*\[tools\.([^\].]+)", path.read_text(encoding="utf-8"), re.M))
    owner = path.stem.removeprefix("bfcl_") if path.stem.startswith("bfcl_") else None
    return bool(names) and all(n in specs and (owner is None or specs[n].owner == owner) for n in names)


@lru_cache(maxsize=64)
def _book_for(key: tuple[tuple[str, str], ...], specs_json: tuple[str, ...]) -> PhraseBook | None:
    """The merged phrase book of every built-in file that fits the specs (cached by the specs' identity)."""
    specs = {s.name: s for s in (ToolSpec.model_validate_json(j) for j in specs_json)}
    books = [load_phrase_file(p, specs) for p in sorted(PHRASE_DIR.glob("*.toml")) if _fits(p, specs)]
    if not books:
        return None
    return PhraseBook({n: t for b in books for n, t in b.tools.items()}, tuple(i for b in books for i in b.intros),
                      tuple(w for b in books for w in b.intro_weights), tuple(t for b in books for t in b.intro_tools))


_USER_BOOKS: list[tuple[frozenset[tuple[str, str]], PhraseBook]] = []  # a user's files, by the tools they were for


def use_phrase_file(path: Path, specs: Mapping[str, ToolSpec]) -> PhraseBook:
    """A user's phrase file for a toolset of their own (a domain module's `<module>.phrases.toml`, an MCP config's
    `phrases`), checked as a built-in one is (errors name file, tool and field) and from now on the book
    `phrase_book` gives for these specs or any subset of them, in this process."""
    book = load_phrase_file(path, specs)
    tools = frozenset((s.name, s.owner or "") for s in specs.values())
    _USER_BOOKS[:] = [(t, b) for t, b in _USER_BOOKS if t != tools] + [(tools, book)]
    return book


def phrase_book(specs: Mapping[str, ToolSpec]) -> PhraseBook | None:
    """The phrase book for a toolset's specs: a user's file registered for them (`use_phrase_file`), else the
    built-in files that fit, else None (the generic wording)."""
    tools = {(s.name, s.owner or "") for s in specs.values()}
    for registered, book in reversed(_USER_BOOKS):
        if tools and tools <= registered:
            return book
    ordered = sorted(specs.values(), key=lambda s: s.name)
    return _book_for(tuple((s.name, s.owner or "") for s in ordered), tuple(s.model_dump_json() for s in ordered))


@lru_cache(maxsize=1)
def _conditionals() -> dict[str, list[Conditional]]:
    """Every conditional entry of every built-in phrase file, by tool name (read without specs: the check uses it
    only to recognise wording, and each file is validated against its toolset by the tests)."""
    out: dict[str, list[Conditional]] = {}
    for path in sorted(PHRASE_DIR.glob("*.toml")):
        for name, table in tomllib.loads(path.read_text(encoding="utf-8")).get("tools", {}).items():
            for entry in table.get("when", []):
                out.setdefault(name, []).append(Conditional(dict(entry["if"]), tuple(expand_all(entry["requests"]))))
    return out


def _merge_split(part: str, first: bool) -> tuple[str, str]:
    """The words before a placeholder split into those always rendered and the last two (three with a determiner
    before them), which a reference may have absorbed ("the folder {x}" -> "that folder", "my pending order {x}" ->
    "the order you found"); the phrase's opening verb always stays, and a span the word variation may swap is not
    cut in two."""
    words = list(re.finditer(r"\S+", part))
    starts = [m.start() for m in words]
    floor = 1 if first else 0
    back = 3 if len(words) >= 3 and re.fullmatch(DETERMINER, words[-3].group()) else 2  # "my pending order {x}"
    cut = starts[max(len(starts) - back, floor)] if len(starts) > floor else len(part)
    for start, end, _ in synonym_spans(part):
        if start < cut < end:
            cut = start
    return part[:cut], part[cut:]


@lru_cache(maxsize=None)
def phrase_regex(text: str) -> re.Pattern[str]:
    """`phrase_pattern` compiled, case-insensitive (cached: a phrase book's conditional readings are many)."""
    return re.compile(phrase_pattern(text), re.I)


def phrase_pattern(text: str) -> str:
    """A regex matching a phrase as rendered: its words as written or as the word variation may have swapped them
    ("show" -> "display"), any text in place of each placeholder (the two words before a placeholder may have
    merged into a reference: "the folder {x}" -> "that folder"), starting at a word boundary ("lock" is not in
    "unlock"). Placeholders with only such optional words between them make one stretch of any text: lazy
    wildcards in a row, each beside an optional group, backtrack exponentially on a message that lacks the phrase
    (book_reservation's ten placeholders ran for minutes on one airline message)."""
    parts = PLACEHOLDER.split(text)
    out = [r"(?<![A-Za-z])"]
    for i, part in enumerate(parts):
        if i % 2:
            if out[-1] != ".+?":
                out.append(".+?")
            continue
        words = part.split()
        if i + 1 < len(parts) and words:
            keep, loose = _merge_split(part, first=i == 0)
            if not keep.strip() and out[-1] == ".+?":
                continue  # only optional words between two placeholders: one stretch of any text covers them
            out.append((varied_pattern(keep) if keep.strip() else "") + f"(?:{loose_pattern(loose)})?\\s*")
        elif words or out[-1] != ".+?":
            out.append(varied_pattern(part) if words else r"\s*")
    return "".join(out)


def conveyed(message: str, tool: str, param: str, value: Any) -> bool:
    """Whether `message` holds a conditional phrase of `tool` whose condition sets `param` to `value`: the
    wording conveys the value ("unlock the doors" for unlock = true) without writing it."""
    for entry in _conditionals().get(tool, []):
        if param in entry.cond and entry.cond[param] == value and \
                any(phrase_regex(r).search(message) for r in entry.requests):
            return True
    return False
