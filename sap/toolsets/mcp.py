"""MCP toolsets: a JSON config in the shape MCP clients use (`{"mcpServers": {...}}`) plus sap's own `"sap"` key
for state, read into tools (from each server's `tools/list`) and an MCP executor factory."""
from __future__ import annotations

import functools
import json
import random
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from sap.errors import StoreError
from sap.executors.mcp import BUILDERS, GIT_ENV, STATE_IGNORED, STATE_VIEWS, McpExecutor, McpSetup
from sap.executors.mcp_client import ProtocolViolation, ServerFailure, ServerParams
from sap.model import Executor, Toolset, ToolSpec
from sap.provenance.phrasebook import use_phrase_file
from sap.toolsets.errors import UnknownToolset
from sap.toolsets.mcp_values import with_state_values
from sap.toolsets.modules import module_from_path

SAP_KEYS = {"name", "description", "state", "build", "sample_config", "root", "timeout", "start_timeout", "masks",
            "error_patterns", "state_ignored", "reset", "exclude_tools", "record", "phrases"}
RECORD_KEYS = {"cache", "db"}
DB_SCHEMES = ("sqlite:///", "postgresql://", "postgres://")
SERVER_KEYS = {"command", "args", "env", "cwd", "url", "type", "transport", "disabled"}
WORDS = ("alpha", "budget", "draft", "notes", "report", "summary", "todo", "ideas", "plan", "review", "meeting",
         "release")
BRANCHES = ("develop", "feature-search", "fix-typos", "release-1.0", "experiment")


class McpConfigError(UnknownToolset):
    """An MCP config file that cannot be used: the message names the file, the field and the value."""


def sample_tree(seed: int, root: str = "/workspace", repository: bool = False) -> dict[str, Any]:
    """A small directory tree of text files (deterministic in `seed`), as c0 for the `files` and `git` states:
    `root`, `repo_path` (= root), `directories` and `files` ({"path", "content"} under root); with `repository`
    (the `git` state) also two `branches` beside `main` ({"name"}) and uncommitted `changes`: one file edited (staged
    in half the seeds), one new."""
    rng = random.Random(f"mcp-tree:{seed}")
    dirs = sorted(rng.sample(["docs", "notes", "src", "data"], 2))
    files = []
    for directory in dirs:
        for name in sorted(rng.sample(WORDS, 2)):
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9)))
            files.append({"path": f"{root}/{directory}/{name}.txt", "content": f"{name}: {words}\n"})
    c0: dict[str, Any] = {"root": root, "repo_path": root, "directories": [{"path": f"{root}/{d}"} for d in dirs],
                          "files": files}
    if repository:
        edited = rng.choice(files)
        fresh = f"{root}/{rng.choice(dirs)}/{rng.choice([w for w in WORDS if w not in edited['path']])}-new.txt"
        c0["branches"] = [{"name": "main"}] + [{"name": b} for b in sorted(rng.sample(BRANCHES, 2))]
        c0["changes"] = [{"path": edited["path"], "content": edited["content"] + f"{rng.choice(WORDS)} added\n"},
                         {"path": fresh, "content": f"{rng.choice(WORDS)}: new\n"}]
        if rng.random() < 0.5:  # half the repositories have the edit staged already (something to unstage)
            c0["changes"][0]["staged"] = True
    return c0


SAMPLERS: dict[str, Callable[..., dict[str, Any]]] = {"tree": sample_tree, "none": lambda seed, root: {}}


def _compiles(pattern: str) -> bool:
    """Whether `pattern` is a valid regular expression."""
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def _fail(path: Path, field: str, value: Any, why: str) -> McpConfigError:
    """The error of one bad field of the config file."""
    return McpConfigError(f"{path}: {field} {json.dumps(value)[:120]}: {why}")


def _user_function(path: Path, field: str, ref: str) -> Callable[..., Any]:
    """`module.py:function` (relative to the config file) imported and looked up."""
    file, _, name = ref.rpartition(":")
    if not file.endswith(".py") or not name:
        raise _fail(path, field, ref, "expected PATH.py:FUNCTION")
    module = module_from_path((path.parent / file).resolve())
    fn = getattr(module, name, None)
    if not callable(fn):
        raise _fail(path, field, ref, f"{file} defines no function {name}")
    return fn


def _record_target(path: Path, record: Any) -> tuple[str, str]:
    """The `record` field read: (the cache's name, the URL of its database). `db` is a SQLite file (relative to the
    config file; default `<config stem>.cache.db` beside it) or a database URL."""
    if not isinstance(record, dict):
        raise _fail(path, "sap.record", record, 'expected an object {"cache": NAME, "db": PATH or URL}')
    unknown = sorted(set(record) - RECORD_KEYS)
    if unknown:
        raise _fail(path, f"sap.record.{unknown[0]}", record[unknown[0]], f"unknown key; known: {sorted(RECORD_KEYS)}")
    cache, db = record.get("cache"), record.get("db", f"{path.stem}.cache.db")
    if not (isinstance(cache, str) and cache.strip() and len(cache) <= 200):
        raise _fail(path, "sap.record.cache", cache, "expected the name of a cache (a non-empty string, at most 200 "
                                                     "characters)")
    if not (isinstance(db, str) and db.strip()):
        raise _fail(path, "sap.record.db", db, "expected a SQLite file path or a database URL")
    if "://" in db:
        if not db.startswith(DB_SCHEMES):
            raise _fail(path, "sap.record.db", db, f"expected a file path or a URL starting {' or '.join(DB_SCHEMES)}")
        return cache, db
    file = (path.parent / db).resolve()
    if not file.parent.is_dir():
        raise _fail(path, "sap.record.db", db, f"no directory {file.parent}")
    return cache, f"sqlite:///{file}"


def _server(path: Path, name: str, entry: Any) -> ServerParams:
    """One `mcpServers` entry checked and read."""
    where = f"mcpServers.{name}"
    if not isinstance(entry, dict):
        raise _fail(path, where, entry, "expected an object with command/args/env or url")
    unknown = sorted(set(entry) - SERVER_KEYS)
    if unknown:
        raise _fail(path, f"{where}.{unknown[0]}", entry[unknown[0]], f"unknown key; known: {sorted(SERVER_KEYS)}")
    if ("command" in entry) == ("url" in entry):
        raise _fail(path, where, entry, "give exactly one of command (stdio) or url (streamable HTTP)")
    args, env = entry.get("args", []), entry.get("env", {})
    if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
        raise _fail(path, f"{where}.args", args, "expected a list of strings")
    if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
        raise _fail(path, f"{where}.env", env, "expected an object of strings")
    return ServerParams(name=name, command=entry.get("command"), args=tuple(args), env=dict(env),
                        cwd=entry.get("cwd"), url=entry.get("url"))


def _tool_spec(server: str, raw: Any, index: int, where: str) -> tuple[str, ToolSpec]:
    """The server's tool name and sap's spec of one `tools/list` entry; a malformed entry raises naming the
    server and the tool."""
    from mcp.types import Tool
    from pydantic import ValidationError
    label = raw.get("name", f"#{index}") if isinstance(raw, dict) else f"#{index}"
    try:
        tool = Tool.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "entry"
        raise McpConfigError(f"{where}: MCP server {server!r}: tools/list: tool {label!r}: {field}: {first['msg']}")
    schema = tool.input_schema
    if schema.get("type", "object") != "object" or not isinstance(schema.get("properties", {}), dict):
        raise McpConfigError(f"{where}: MCP server {server!r}: tools/list: tool {label!r}: inputSchema is not an "
                             f"object schema")
    notes = tool.annotations
    read_only = None if notes is None else (True if notes.read_only_hint else
                                             False if notes.read_only_hint is False or notes.destructive_hint else None)
    params = {k: v for k, v in schema.items() if k not in ("$schema", "title")}
    params.setdefault("properties", {})
    params.setdefault("required", [])
    return tool.name, ToolSpec(name=tool.name, description=tool.description or tool.title or "", parameters=params,
                               response=tool.output_schema, read_only=read_only, owner=server)


async def _raw_tool_list(session: Any) -> list[Any]:
    """Every entry of the server's `tools/list` (all pages); an entry off the protocol is a ProtocolViolation
    naming the tool."""
    from mcp.types import ListToolsRequest, PaginatedRequestParams
    from pydantic import BaseModel, ConfigDict, ValidationError

    class RawPage(BaseModel):
        """One page of tools/list, its entries left as sent."""
        model_config = ConfigDict(extra="allow")
        tools: list[Any]
        nextCursor: str | None = None

    entries: list[Any] = []
    cursor = None
    while True:
        try:
            page = await session.send_request(ListToolsRequest(params=PaginatedRequestParams(cursor=cursor)
                                                               if cursor else None), RawPage)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = list(first["loc"])
            if len(loc) < 2 or loc[0] != "tools":
                raise ProtocolViolation(f"{'.'.join(map(str, loc))}: {first['msg']}") from None
            given = first.get("input")
            label = given.get("name", f"#{loc[1]}") if isinstance(given, dict) else f"#{loc[1]}"
            field = ".".join(map(str, loc[2:])) or "entry"
            raise ProtocolViolation(f"tool {label!r} (entry {loc[1]}): {field}: {first['msg']}") from None
        entries += page.tools
        cursor = page.nextCursor
        if not cursor:
            return entries


def _list_tools(setup: McpSetup, c0: dict[str, Any], where: str) -> dict[str, list[tuple[str, ToolSpec]]]:
    """Each server's tools, listed by servers started over a working directory built from `c0`."""
    executor = McpExecutor(setup)
    try:
        executor.reset(c0)
        listed = {}
        for params in setup.servers:
            raw = executor.connection(params.name).request(_raw_tool_list, setup.start_timeout, "tools/list")
            listed[params.name] = [_tool_spec(params.name, entry, i, where) for i, entry in enumerate(raw)]
        return listed
    except ServerFailure as exc:
        raise McpConfigError(f"{where}: {exc}") from None
    finally:
        executor.close()


def load_mcp_toolset(name: str, timeout: float = 5.0) -> Toolset:
    """The toolset of `mcp:CONFIG`: servers started once to list their tools (over a directory built from the
    c0 of seed 0); a tool name two servers share is prefixed with the server's name (`server_tool`)."""
    path = Path(name.split(":", 1)[1])
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise McpConfigError(f"{path}: cannot read MCP config: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise McpConfigError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
    servers_raw = config.get("mcpServers") if isinstance(config, dict) else None
    if not isinstance(servers_raw, dict) or not servers_raw:
        raise _fail(path, "mcpServers", servers_raw, "expected an object naming at least one server")
    servers = tuple(_server(path, n, e) for n, e in servers_raw.items() if not (isinstance(e, dict)
                                                                                and e.get("disabled")))
    own = config.get("sap", {})
    if not isinstance(own, dict):
        raise _fail(path, "sap", own, "expected an object")
    unknown = sorted(set(own) - SAP_KEYS)
    if unknown:
        raise _fail(path, f"sap.{unknown[0]}", own[unknown[0]], f"unknown key; known: {sorted(SAP_KEYS)}")
    root = str(own.get("root", "/workspace"))
    state = str(own.get("state", "none"))
    if state in BUILDERS:
        build = functools.partial(BUILDERS[state], root=root) if state != "none" else BUILDERS[state]
    elif ":" in state:
        build = _user_function(path, "sap.state", state)
    else:
        raise _fail(path, "sap.state", state, f"expected one of {sorted(BUILDERS)} or PATH.py:FUNCTION(c0, workdir)")
    sampler_ref = str(own.get("sample_config", "tree" if state in ("files", "git") else "none"))
    if sampler_ref == "tree":
        sample = functools.partial(sample_tree, root=root, repository=state == "git")
    elif sampler_ref in SAMPLERS:
        sample = functools.partial(SAMPLERS[sampler_ref], root=root)
    elif ":" in sampler_ref:
        sample = _user_function(path, "sap.sample_config", sampler_ref)
    else:
        raise _fail(path, "sap.sample_config", sampler_ref, f"expected one of {sorted(SAMPLERS)} or PATH.py:FUNCTION")
    reset = own.get("reset", "directory")
    if reset not in ("restart", "directory"):
        raise _fail(path, "sap.reset", reset, "expected restart or directory")
    masks, error_patterns = own.get("masks", []), own.get("error_patterns", [])
    for key, patterns in (("masks", masks), ("error_patterns", error_patterns)):
        if not (isinstance(patterns, list) and all(isinstance(m, str) and _compiles(m) for m in patterns)):
            raise _fail(path, f"sap.{key}", patterns, "expected a list of regular expressions")
    record = _record_target(path, own["record"]) if "record" in own else None
    if state == "git":  # the servers' commits get sap's fixed identity and dates too, so their hashes replay
        servers = tuple(replace(s, env={**GIT_ENV, **s.env}) for s in servers)
    setup = McpSetup(servers=servers, routes={}, build=build, root=root,
                     call_timeout=float(own.get("timeout", timeout)),
                     start_timeout=float(own.get("start_timeout", 60.0)), masks=tuple(masks),
                     error_patterns=tuple(error_patterns),
                     state_ignored=tuple(own.get("state_ignored", STATE_IGNORED.get(state, ()))),
                     views=STATE_VIEWS.get(state, ()), reset=reset)
    c0 = sample(0)
    listed = _list_tools(setup, c0, str(path))
    excluded = set(own.get("exclude_tools", []))
    counts: dict[str, int] = {}
    for tools in listed.values():
        for tool_name, _ in tools:
            counts[tool_name] = counts.get(tool_name, 0) + 1
    specs, routes = [], {}
    for server, tools in listed.items():
        for tool_name, spec in tools:
            sap_name = tool_name if counts[tool_name] == 1 else f"{server}_{tool_name}"
            if tool_name in excluded or sap_name in excluded:
                continue
            specs.append(spec.model_copy(update={"name": sap_name}))
            routes[sap_name] = (server, tool_name)
    setup = replace(setup, routes=routes)
    specs, samplers = with_state_values(specs, c0)
    if "phrases" in own:  # the user's phrase file, relative to the config; its errors name file, tool and field
        if not isinstance(own["phrases"], str) or not (path.parent / own["phrases"]).is_file():
            raise _fail(path, "sap.phrases", own["phrases"], "expected the path of a phrase file (TOML, "
                        "docs/phrasebook.md), relative to the config")
        use_phrase_file(path.parent / own["phrases"], {s.name: s for s in specs})
    factory: Callable[[], Executor] = lambda: McpExecutor(setup)
    if record is not None:
        factory = _recorded(path, factory, record, specs)
    return Toolset(name=str(own.get("name", name)),
                   description=str(own.get("description", f"MCP servers {', '.join(s.name for s in servers)}")),
                   tools=specs, executor_factory=factory, sample_config=sample,
                   extra={"samplers": samplers} if samplers else {})


def _recorded(path: Path, factory: Callable[[], Executor], record: tuple[str, str],
              specs: list[ToolSpec]) -> Callable[[], Executor]:
    """Recorded mode: `factory`'s executors behind the cache `record` names (its database opened now, its tools
    saved); a database that cannot be opened fails naming the field."""
    from sap.cache.readthrough import recording  # here: sqlalchemy only for configs that record

    try:
        return recording(factory, record[1], record[0], specs)
    except StoreError as exc:
        raise _fail(path, "sap.record.db", record[1], str(exc)) from None
