"""Values for MCP tool parameters that name things in the servers' state: existing paths and git refs taken from c0's
fields (aliases), enums read from a parameter's description, and new paths under c0's directories (samplers)."""
from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any, Literal

from sap.model import ToolSpec
from sap.provenance.fields import iter_fields, produces

ParamKind = Literal["path", "new_path", "ref", "old_text"]
PATH_WORDS = {"path", "paths", "file", "files", "filename", "source", "src", "dir", "directory", "folder"}
NEW_WORDS = {"destination", "dest", "target", "new", "output"}  # a path a call creates, not one it reads
REF_WORDS = {"revision", "rev", "ref", "commit", "sha", "branch", "target", "base"}
DIRECTORY_WORDS = {"repo", "repository", "root", "dir", "directory", "folder", "workdir"}  # a path to no file
ABOUT_FILES = {"file", "files", "directory", "directories", "path", "paths", "folder", "folders"}
ABOUT_REFS = {"branch", "branches", "commit", "commits", "revision", "revisions", "ref", "refs"}
OLD_WORDS = {"old"}  # with a text word: the text an edit replaces, which must be found in a file
TEXT_WORDS = {"text", "str", "string", "content"}
ALIASES: dict[ParamKind, list[str]] = {"path": ["path"], "ref": ["branch_name"], "old_text": ["content", "text"],
                                       "new_path": []}
_EXAMPLES = re.compile(r"\be\.g\.|\bfor example\b|\bsuch as\b|\blike\b|\baccepts?\b", re.I)
_QUOTED_WORD = re.compile(r"""['"]([A-Za-z_][\w-]{0,30})['"]""")
NEW_NAME_WORDS = ("draft", "notes", "plan", "summary", "archive", "ideas", "backlog", "review")
REF_KINDS = ("feature", "fix", "docs", "chore")
CREATE_WORDS = {"create", "creates", "write", "writes"}  # a tool that makes the thing its own parameter names
BASE_WORDS = {"base", "from", "source", "src"}  # ...but not the thing it starts from


def words(text: str) -> set[str]:
    """The lower-case words of an identifier or a text (`branch_type`, `oldText` and prose alike)."""
    return set(re.findall(r"[a-z]+", re.sub(r"([a-z])([A-Z])", r"\1 \2", text).lower()))


def _stringish(schema: dict[str, Any]) -> bool:
    """Whether a parameter takes a string or an array of strings (a JSON-schema `anyOf` with null counts)."""
    kinds = [schema] + [s for s in schema.get("anyOf", []) if isinstance(s, dict)]
    for s in kinds:
        if s.get("type") == "string" or (s.get("type") == "array" and s.get("items", {}).get("type") == "string"):
            return True
    return False


def param_kind(tool: ToolSpec, name: str, schema: dict[str, Any]) -> ParamKind | None:
    """What a string parameter names, judged from its name and the words of its and its tool's descriptions: a git
    ref (`revision`, `target` of a tool about branches or commits), an existing path (`source`, `files` of a tool
    about files), a path the call creates (`destination`), the old text of an edit (`oldText`), or nothing known."""
    if not _stringish(schema) or "enum" in schema:
        return None
    own = words(name)
    about = words(f"{tool.name} {tool.description} {schema.get('description', '')}")
    if own & OLD_WORDS and own & TEXT_WORDS:
        return "old_text"
    if own & TEXT_WORDS:  # a text to write (`newText`, `content`) names nothing in the state
        return None
    if own & REF_WORDS and about & ABOUT_REFS and not own & {"path", "paths"}:
        return "ref"
    if own & (PATH_WORDS | NEW_WORDS) and about & ABOUT_FILES:
        return "new_path" if own & NEW_WORDS else "path" if own & PATH_WORDS else None
    return None


def description_enum(schema: dict[str, Any]) -> list[str] | None:
    """The closed set of values a string parameter's description lists ("Whether to list local branches ('local'),
    remote branches ('remote') or all branches('all')"): two or more quoted words, in a description that gives no
    examples (`e.g.`, `such as`, `accepts`), for a parameter with no enum of its own."""
    text = schema.get("description", "")
    if schema.get("type") != "string" or "enum" in schema or not text or _EXAMPLES.search(text):
        return None
    found = list(dict.fromkeys(_QUOTED_WORD.findall(text)))
    return found if len(found) >= 2 else None


def _new_path(rng: random.Random, c0: dict[str, Any], suffix: str) -> str:
    """A path no file of c0 has, in one of c0's directories (else its root), ending in `suffix`."""
    root = str(c0.get("root", "/workspace")).rstrip("/")
    dirs = [str(d["path"]) for d in c0.get("directories", []) if isinstance(d, dict) and "path" in d] or [root]
    taken = set(_c0_values(c0, "path"))
    while True:
        path = f"{rng.choice(dirs)}/{rng.choice(NEW_NAME_WORDS)}-{rng.randint(2, 9)}{suffix}"
        if path not in taken:
            return path


def new_file(rng: random.Random, c0: dict[str, Any]) -> str:
    """A new text file's path in one of c0's directories: where a moved file goes, a file written."""
    return _new_path(rng, c0, ".txt")


def new_directory(rng: random.Random, c0: dict[str, Any]) -> str:
    """A new directory's path in one of c0's directories."""
    return _new_path(rng, c0, "")


def new_ref(rng: random.Random, c0: dict[str, Any]) -> str:
    """A branch name no branch of c0 has, the way people name them (`feature/budget-notes`): a kind, then words of
    c0's file names joined by hyphens."""
    stems = sorted({p.rpartition("/")[2].partition(".")[0] for p in _c0_values(c0, "path")} - {""})
    taken = set(_c0_values(c0, "branch_name"))
    while True:
        name = f"{rng.choice(REF_KINDS)}/{rng.choice(stems or NEW_NAME_WORDS)}-{rng.choice(NEW_NAME_WORDS)}"
        if name not in taken:
            return name


def _c0_values(c0: dict[str, Any], name: str) -> list[str]:
    """The string values of c0's fields that answer to `name` (`path`, `branch_name`), in document order."""
    return [f.value for f in iter_fields(c0) if name in f.names and isinstance(f.value, str)]


def existing_path(rng: random.Random, c0: dict[str, Any]) -> str:
    """A path c0 holds (a file or directory the user has), else a new file's: what a user names for a tool that
    reads or changes what is there."""
    return rng.choice(_c0_values(c0, "path") or [new_file(rng, c0)])


def existing_ref(rng: random.Random, c0: dict[str, Any]) -> str:
    """A branch c0 has, else a new branch name."""
    return rng.choice(_c0_values(c0, "branch_name") or [new_ref(rng, c0)])


def _listed(sampler: Callable[[random.Random, dict[str, Any]], str]) -> Callable[[random.Random, dict[str, Any]],
                                                                                    list[str]]:
    """`sampler`'s value as a list of one, for a parameter that takes several."""
    return lambda rng, c0: [sampler(rng, c0)]


def sampler_for(tool: ToolSpec, name: str, schema: dict[str, Any], kind: ParamKind | None) -> Callable[..., Any] | None:
    """How a user picks a new value of a path or ref parameter: a thing of c0 when the tool reads or changes what
    exists, a new name when the parameter is one a call creates (`destination`, a write's or a creating tool's
    own `path` or `branch_name`; not its `base_branch`); none for other kinds and for a path to a directory
    the state has one of (`repo_path`)."""
    own = words(name)
    about = words(f"{tool.name} {tool.description}")
    creates = bool(about & CREATE_WORDS) and not own & BASE_WORDS
    if kind == "ref":
        sampler = new_ref if creates else existing_ref
    elif kind == "new_path" or (kind == "path" and creates):
        sampler = new_file if about & {"file", "files"} else new_directory
    elif kind == "path" and not own & DIRECTORY_WORDS:
        sampler = existing_path
    else:
        return None
    return _listed(sampler) if schema.get("type") == "array" else sampler


def with_state_values(tools: list[ToolSpec], c0: dict[str, Any]) -> tuple[list[ToolSpec],
                                                                          dict[str, Callable[..., Any]]]:
    """`tools` with enums read from descriptions and `value_fields` for their path, ref and old-text parameters that
    no field of `c0` answers to by name (an item field of an array of objects as `array.field`), and the samplers
    of new values of their path and ref parameters (`sampler_for`) by `tool.parameter`."""
    out, samplers = [], {}
    for tool in tools:
        params = dict(tool.parameters)
        props = {name: dict(schema) for name, schema in tool.properties.items()}
        aliases = dict(tool.value_fields)
        for name, schema in props.items():
            listed = description_enum(schema)
            if listed:
                schema["enum"] = listed
            sampler = sampler_for(tool, name, schema, param_kind(tool, name, schema))
            if sampler is not None:
                samplers[f"{tool.name}.{name}"] = sampler
            fields = [(name, schema)]
            items = schema.get("items", {}) if schema.get("type") == "array" else {}
            fields += [(f"{name}.{k}", v) for k, v in items.get("properties", {}).items() if isinstance(v, dict)]
            for key, field_schema in fields:
                kind = param_kind(tool, key.rpartition(".")[2], field_schema)
                if kind not in (None, "new_path") and not produces(key.rpartition(".")[2], field_schema, c0):
                    aliases[key] = [*aliases.get(key, []), *ALIASES[kind]]
        params["properties"] = props
        out.append(tool.model_copy(update={"parameters": params, "value_fields": aliases}))
    return out, samplers
