"""Executor over MCP servers: a working directory built from c0, servers started over it, calls through
`tools/call`, and the directory tree (file hashes) as the comparable state."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, Literal

from sap.executors.base import ReplayLog
from sap.executors.failures import failure_text
from sap.executors.mcp_client import McpConnection, ServerFailure, ServerParams
from sap.jsonutil import json_copy
from sap.model import ExecResult, ToolCall

WORKDIR = "{workdir}"  # placeholder in a server's args, env and cwd: the working directory sap built from c0
GIT_ENV = {"GIT_AUTHOR_NAME": "sap", "GIT_AUTHOR_EMAIL": "sap@example.com", "GIT_COMMITTER_NAME": "sap",
           "GIT_COMMITTER_EMAIL": "sap@example.com", "GIT_AUTHOR_DATE": "946684800 +0000",
           "GIT_COMMITTER_DATE": "946684800 +0000"}  # fixed identity and dates: commit hashes replay
GIT_STATE_IGNORED = (".git/index", ".git/logs/*", ".git/objects/*", ".git/hooks/*", ".git/description",
                     ".git/info/*", ".git/config", ".git/COMMIT_EDITMSG", ".git/ORIG_HEAD")
Builder = Callable[[dict[str, Any], Path], None]


def _relative(path: str, root: str, field: str) -> str:
    """A c0 file path as a path inside the working directory; a path leaving it is a ValueError naming it."""
    rel = path[len(root):] if path == root or path.startswith(root.rstrip("/") + "/") else path
    rel = rel.lstrip("/")
    if not rel or any(part == ".." for part in Path(rel).parts):
        raise ValueError(f"c0 {field}: path {path!r} is not a file inside {root}")
    return rel


def build_files(c0: dict[str, Any], workdir: Path, root: str = "/workspace") -> None:
    """Write c0's `files` ({"path", "content"} records, paths under `root` or relative) and make c0's
    `directories` ({"path"} records) in `workdir`."""
    for i, record in enumerate(c0.get("directories", [])):
        (workdir / _relative(str(record["path"]), root, f"directories[{i}].path")).mkdir(parents=True, exist_ok=True)
    for i, record in enumerate(c0.get("files", [])):
        target = workdir / _relative(str(record["path"]), root, f"files[{i}].path")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(str(record.get("content", "")), encoding="utf-8")


def git(workdir: Path, *args: str) -> None:
    """Run git in `workdir` with sap's fixed identity and dates; a failure raises naming the command."""
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(["git", *args], cwd=workdir, env=env, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {workdir} failed: {done.stderr.strip()}")


def build_git(c0: dict[str, Any], workdir: Path, root: str = "/workspace") -> None:
    """c0's files committed as the first commit of a git repository (branch `main`, checked out), c0's `branches`
    ({"name"} records) made at that commit, then c0's `changes` ({"path", "content"} records) written into the work
    tree uncommitted, those with `"staged": true` staged."""
    build_files(c0, workdir, root)
    git(workdir, "init", "-q", "-b", "main")
    git(workdir, "add", "-A")
    git(workdir, "commit", "-q", "--allow-empty", "-m", str(c0.get("commit_message", "initial commit")))
    for i, record in enumerate(c0.get("branches", [])):
        name = str(record.get("name", ""))
        if name != "main":
            if not name or name.startswith("-"):
                raise ValueError(f"c0 branches[{i}].name: {name!r} is not a branch name")
            git(workdir, "branch", name)
    changes = c0.get("changes", [])
    build_files({"files": changes}, workdir, root)
    staged = [_relative(str(r["path"]), root, f"changes[{i}].path") for i, r in enumerate(changes) if r.get("staged")]
    if staged:
        git(workdir, "add", "--", *staged)


def git_index_view(workdir: Path) -> dict[str, str]:
    """The staging area as one state entry (`.git/index`: the hash of `git ls-files --stage`, which names each
    staged blob by content, unlike the index file's own bytes with their timestamps); nothing outside a repository."""
    if not (workdir / ".git").is_dir():
        return {}
    done = subprocess.run(["git", "ls-files", "--stage"], cwd=workdir, capture_output=True, timeout=60)
    return {".git/index": hashlib.sha256(done.stdout).hexdigest()} if done.returncode == 0 else {}


BUILDERS: dict[str, Builder] = {"none": lambda c0, workdir: None, "files": build_files, "git": build_git}
STATE_IGNORED: dict[str, tuple[str, ...]] = {"git": GIT_STATE_IGNORED}
StateView = Callable[[Path], dict[str, str]]
STATE_VIEWS: dict[str, tuple[StateView, ...]] = {"git": (git_index_view,)}  # state entries beyond the files'


@dataclass(frozen=True)
class McpSetup:
    """Everything an MCP executor needs: the servers (args, env and cwd may hold `{workdir}`), which server runs
    each sap tool, how c0 becomes the working directory, the virtual `root` that stands for that directory in
    arguments and results, time limits, result masks and the reset strategy."""

    servers: tuple[ServerParams, ...]
    routes: dict[str, tuple[str, str]]  # sap tool name -> (server name, the server's tool name)
    build: Builder
    root: str = "/workspace"
    call_timeout: float = 10.0
    start_timeout: float = 60.0
    masks: tuple[str, ...] = ()  # regexes of what differs on every run (clock times): compared as "<masked>"
    error_patterns: tuple[str, ...] = ()  # regexes: a result text that one matches (at its start) is a failed call
    state_ignored: tuple[str, ...] = ()  # path globs the state view leaves out
    views: tuple[StateView, ...] = ()  # more state entries read from the directory (`git_index_view`)
    reset: Literal["restart", "directory"] = "directory"


def _placed(params: ServerParams, workdir: str) -> ServerParams:
    """`params` with `{workdir}` filled in."""
    def fill(text: str) -> str:
        return text.replace(WORKDIR, workdir)
    return replace(params, args=tuple(fill(a) for a in params.args),
                   env={k: fill(v) for k, v in params.env.items()},
                   cwd=fill(params.cwd) if params.cwd else (workdir if params.command else None))


def _stop(connections: dict[str, McpConnection], workdir: Path | None) -> None:
    """Stop servers and remove their working directory."""
    for conn in connections.values():
        conn.close()
    connections.clear()
    if workdir is not None:
        shutil.rmtree(workdir, ignore_errors=True)


def _map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """`value` with `change` applied to every string in it (keys left as they are)."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [_map_strings(v, change) for v in value]
    if isinstance(value, dict):
        return {k: _map_strings(v, change) for k, v in value.items()}
    return value


def _text_value(result: Any) -> Any:
    """A tool result's value: its structured content when given, else its text blocks joined (JSON-parsed when
    the text is JSON), other blocks as their JSON."""
    if result.structured_content is not None:
        return result.structured_content
    parts = []
    for block in result.content:
        parts.append(block.text if getattr(block, "type", "") == "text" else block.model_dump_json(exclude_none=True))
    text = "\n".join(parts)
    try:
        return json.loads(text)
    except ValueError:
        return text


class McpExecutor(ReplayLog):
    """Runs calls on MCP servers over a working directory that sap builds from c0.

    Reset builds a fresh directory and starts the servers over it (`reset="restart"`), or, for servers that keep
    no state of their own, rebuilds the directory under the running servers (`reset="directory"`). Paths under
    `root` in arguments reach the servers as paths in the directory, and the directory's path in results reads
    as `root`, so records do not depend on where the directory was made. A result with `isError` is a failed
    call; a server that times out, dies or writes what is not JSON-RPC gives a failed call naming it and is
    restarted. A failed call that changed the directory is rolled back by replay (snapshots are replay logs).
    `state()` is the directory tree with a hash per file.
    """

    def __init__(self, setup: McpSetup) -> None:
        self.setup = setup
        self._c0: dict[str, Any] = {}
        self._log: list[tuple[str, dict[str, Any]]] = []
        self._connections: dict[str, McpConnection] = {}
        self.workdir: Path | None = None
        self._finalizer = weakref.finalize(self, _stop, self._connections, None)

    def reset(self, c0: dict[str, Any]) -> None:
        """A fresh working directory from c0 under the running servers ("directory", the default), or fresh servers
        over a new directory ("restart", and always the first time)."""
        self._c0 = json_copy(c0)
        self._log = []
        self._fresh()

    def _fresh(self) -> None:
        """Build the working directory from c0 and have servers running over it."""
        if self.setup.reset == "directory" and self._connections and self.workdir is not None:
            for entry in self.workdir.iterdir():
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
            self.setup.build(json_copy(self._c0), self.workdir)
            return
        self.close()
        self.workdir = Path(tempfile.mkdtemp(prefix="sap-mcp-")).resolve()
        self._finalizer = weakref.finalize(self, _stop, self._connections, self.workdir)
        self.setup.build(json_copy(self._c0), self.workdir)
        for params in self.setup.servers:
            conn = McpConnection(_placed(params, str(self.workdir)), self.setup.start_timeout)
            conn.start()
            self._connections[params.name] = conn

    def connection(self, server: str) -> McpConnection:
        """The running connection to `server` (after `reset`)."""
        return self._connections[server]

    def _to_server(self, text: str) -> str:
        """A path under `root` as the path in the working directory."""
        root = self.setup.root
        if text == root or text.startswith(root.rstrip("/") + "/"):
            return str(self.workdir) + text[len(root.rstrip("/")):]
        return text

    def _from_server(self, text: str) -> str:
        """The working directory's path as `root`."""
        return text.replace(str(self.workdir), self.setup.root.rstrip("/") or "/")

    def comparable(self, value: Any) -> Any:
        """A result or error as replays compare it (`base.same_result`): the config's masks applied, so a clock
        time the server reports matches on replay while records keep the time as the server gave it."""
        def masked(text: str) -> str:
            for pattern in self.setup.masks:
                text = re.sub(pattern, "<masked>", text)
            return text
        return _map_strings(value, masked) if self.setup.masks else value

    def execute(self, call: ToolCall) -> ExecResult:
        """Run one call on the server that has the tool; failures are error results, never exceptions."""
        route = self.setup.routes.get(call.name)
        if route is None:
            return ExecResult(ok=False, error=f"unknown tool {call.name!r}")
        if not self._connections:
            return ExecResult(ok=False, error="executor not reset: no MCP server running")
        server, tool = route
        args = _map_strings(json_copy(call.args_exec), self._to_server)
        before = self.snapshot()
        before_state = self.state()
        try:
            result = self._connections[server].request(lambda s: s.call_tool(tool, args), self.setup.call_timeout,
                                                       f"tools/call {tool}")
        except ServerFailure as exc:
            self.close()  # a server that hung, died or flooded is restarted, whatever the reset strategy
            self.restore(before)
            return ExecResult(ok=False, error=str(exc))
        value = _map_strings(_text_value(result), self._from_server)
        if result.is_error or (problem := self._error_text(value)) is not None:
            if self.state() != before_state:
                self.restore(before)
            error = problem if not result.is_error else value if isinstance(value, str) else json.dumps(value,
                                                                                                        sort_keys=True)
            return ExecResult(ok=False, error=error)
        self._log.append((call.name, json_copy(call.args_exec)))
        return ExecResult(ok=True, value=value)

    def _error_text(self, value: Any) -> str | None:
        """Why a result without `isError` is a failed call all the same: error-shaped (`failure_text`), or a text
        matching one of the config's `error_patterns` (a server that reports errors as text)."""
        problem = failure_text("", value)
        if problem is None and isinstance(value, str) and any(re.match(p, value) for p in self.setup.error_patterns):
            problem = value.strip()
        return problem

    def _rebuild(self) -> None:
        """The working directory (and servers) from c0."""
        self._fresh()

    def _rerun(self, name: str, args: dict[str, Any]) -> None:
        """One logged call again, on the servers."""
        self.execute(ToolCall(call_id="restore", name=name, args_exec=args, args_prov={}))

    def state(self) -> dict[str, Any]:
        """The working directory as {relative path: sha256 of the file, or "dir" for an empty directory},
        leaving out the paths `state_ignored` names, plus the entries of the setup's `views`. A file is hashed as
        the dialogue sees it: the working directory's own path in it is `root` (a written text may hold a path, and
        the directory differs per run)."""
        if self.workdir is None:
            return {}
        out: dict[str, str] = {}
        own, root = str(self.workdir).encode(), (self.setup.root.rstrip("/") or "/").encode()
        for path in sorted(self.workdir.rglob("*")):
            rel = path.relative_to(self.workdir).as_posix()
            if any(fnmatch(rel, pattern) for pattern in self.setup.state_ignored):
                continue
            if path.is_file():
                out[rel] = hashlib.sha256(path.read_bytes().replace(own, root)).hexdigest()
            elif path.is_dir() and not any(path.iterdir()):
                out[rel] = "dir"
        for view in self.setup.views:
            out.update(view(self.workdir))
        return out

    def close(self) -> None:
        """Stop the servers and remove the working directory."""
        self._finalizer()
