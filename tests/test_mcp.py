"""MCP toolsets and executors against real servers (time, git, the reference filesystem server) and fake ones that
hang, die, flood or list malformed tools; no server process outlives a test, a Ctrl-C or a killed parent."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cli_fixtures import sap, sap_env
from helpers import call
from sap.executors.base import same_result
from sap.toolsets import UnknownToolset, load_toolset

pytest.importorskip("mcp")
FAKE = Path(__file__).resolve().parent / "mcp_servers" / "fake_server.py"
FS_SERVER = (Path(__file__).resolve().parent / ".mcp" / "node_modules" / "@modelcontextprotocol" / "server-filesystem"
             / "dist" / "index.js")


def server_pids() -> set[int]:
    """Live processes started by sap for MCP (their command lines carry a sap-mcp- working directory or the fake
    server) that are this test process's own (below it) or orphans (adopted by init): not those another pytest
    worker or another sap run on the machine has alive at the time."""
    found, parents = set(), {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            status = (entry / "status").read_text().splitlines()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status if ":" in line)
        parents[int(entry.name)] = int(fields.get("PPid", "0").strip() or 0)
        if ("sap-mcp-" in cmdline or str(FAKE) in cmdline) and "zombie" not in fields.get("State", "") \
                and entry.name != str(os.getpid()):
            found.add(int(entry.name))
    return {pid for pid in found if parents.get(pid) == 1 or _below(pid, os.getpid(), parents)}


def _below(pid: int, ancestor: int, parents: dict[int, int]) -> bool:
    """Whether `ancestor` is among pid's parents."""
    seen = set()
    while pid in parents and pid not in seen:
        seen.add(pid)
        pid = parents[pid]
        if pid == ancestor:
            return True
    return False


@pytest.fixture(autouse=True)
def no_orphans():
    """Every test leaves no MCP server process behind."""
    before = server_pids()
    yield
    deadline = time.monotonic() + 10
    while server_pids() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not server_pids() - before


def config(tmp_path: Path, servers: dict[str, Any], **own: Any) -> str:
    """An `mcp:` toolset name for a config file written in tmp_path."""
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": servers, "sap": own}))
    return f"mcp:{path}"


def fake(mode: str) -> dict[str, Any]:
    """The config entry of the fake server in `mode`."""
    return {"command": sys.executable, "args": [str(FAKE), mode]}


def test_fake_server_tools_and_results(tmp_path: Path) -> None:
    toolset = load_toolset(config(tmp_path, {"fake": fake("ok")}, timeout=5))
    echo = toolset.tool("echo")
    assert echo.read_only is True and echo.owner == "fake" and echo.required == ["text"]
    ex = toolset.executor_factory()
    try:
        ex.reset({})
        assert ex.execute(call("echo", {"text": '{"a": 1}'})).value == {"a": 1}  # JSON text is parsed
        failed = ex.execute(call("echo", {"text": "fail"}))  # isError
        assert not failed.ok and failed.error == "fail"
        assert not ex.execute(call("nope", {})).ok
    finally:
        ex.close()


def test_error_texts_are_failed_calls(tmp_path: Path) -> None:
    toolset = load_toolset(config(tmp_path, {"fake": fake("ok")}, error_patterns=[r"\S+: Error - "]))
    ex = toolset.executor_factory()
    try:
        ex.reset({})
        said = {text: ex.execute(call("echo", {"text": text})) for text in
                ("Error: no such thing", "a.txt: Error - ENOENT: no such file", "Errors are rare: a.txt is fine")}
        assert [r.ok for r in said.values()] == [False, False, True]
        assert said["a.txt: Error - ENOENT: no such file"].error == "a.txt: Error - ENOENT: no such file"
    finally:
        ex.close()
    with pytest.raises(UnknownToolset, match="sap.error_patterns"):
        load_toolset(config(tmp_path, {"fake": fake("ok")}, error_patterns=["("]))


def test_name_collisions_are_prefixed_with_the_server(tmp_path: Path) -> None:
    toolset = load_toolset(config(tmp_path, {"one": fake("ok"), "two": fake("ok")}))
    assert sorted(t.name for t in toolset.tools) == ["one_echo", "two_echo"]


@pytest.mark.parametrize(("mode", "reason"), [("hang", "timed out after 1 s"),
                                              ("flood", "line(s) that are not JSON-RPC"),
                                              ("exit", "tools/call echo")])
def test_misbehaving_server_is_a_failed_call(tmp_path: Path, mode: str, reason: str) -> None:
    ex = load_toolset(config(tmp_path, {"fake": fake(mode)}, timeout=1)).executor_factory()
    try:
        ex.reset({})
        first = ex.connection("fake").pid
        res = ex.execute(call("echo", {"text": "hi"}))
        assert not res.ok and "MCP server 'fake'" in res.error and reason in res.error
        # restarted, though the default reset keeps servers running: the run goes on
        assert ex.connection("fake").session is not None and ex.connection("fake").pid != first
    finally:
        ex.close()


def test_malformed_tool_list_names_server_and_tool(tmp_path: Path) -> None:
    with pytest.raises(UnknownToolset, match=r"MCP server 'fake': tools/list: tool 'broken' .*inputSchema"):
        load_toolset(config(tmp_path, {"fake": fake("malformed")}))


@pytest.mark.parametrize(("servers", "own", "message"), [
    ({"a": {"args": []}}, {}, "mcpServers.a"),
    ({"a": fake("ok")}, {"state": "tape"}, "sap.state"),
    ({"a": fake("ok")}, {"colour": 1}, "sap.colour"),
])
def test_bad_config_names_the_field(tmp_path: Path, servers: dict, own: dict, message: str) -> None:
    with pytest.raises(UnknownToolset, match=message):
        load_toolset(config(tmp_path, servers, **own))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_no_server_outlives_its_parent(tmp_path: Path, sig: signal.Signals) -> None:
    name = config(tmp_path, {"fake": fake("ok")})
    script = ("import sys, time\nfrom sap.toolsets import load_toolset\n"
              f"ex = load_toolset({name!r}).executor_factory(); ex.reset({{}})\n"
              "print(ex.connection('fake').pid, flush=True)\ntime.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], env=sap_env(), stdout=subprocess.PIPE, text=True)
    pid = int(parent.stdout.readline())
    assert pid in server_pids()
    parent.send_signal(sig)
    parent.wait(timeout=60)
    parent.stdout.close()


def test_time_server_stateless(tmp_path: Path) -> None:
    pytest.importorskip("mcp_server_time")
    toolset = load_toolset(config(tmp_path, {"time": {"command": sys.executable,
                                                      "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}},
                                  masks=[r"\d{4}-\d{2}-\d{2}"], timeout=30))
    assert {t.name for t in toolset.tools} == {"get_current_time", "convert_time"}
    ex = toolset.executor_factory()
    try:
        ex.reset(toolset.sample_config(0))
        res = ex.execute(call("convert_time", {"source_timezone": "UTC", "time": "12:00",
                                               "target_timezone": "Asia/Tokyo"}))
        day = res.value["target"]["datetime"]  # kept as the server gave it; compared masked on replay
        assert res.ok and re.fullmatch(r"\d{4}-\d{2}-\d{2}T21:00:00\+09:00", day)
        other_day = {**res.value, "target": {**res.value["target"], "datetime": "1999-01-01T21:00:00+09:00"}}
        assert same_result(ex, other_day, res.value) and not same_result(ex, {**other_day, "x": 1}, res.value)
        assert not ex.execute(call("convert_time", {"source_timezone": "Nowhere", "time": "12:00",
                                                    "target_timezone": "UTC"})).ok
        assert ex.state() == {}
    finally:
        ex.close()


FILE_TIMES = r"(?m)^(?:created|modified|accessed): .*$"  # get_file_info's clock times


def fs_git_config(tmp_path: Path, **own: Any) -> str:
    """The filesystem and git servers over one git repository sap builds from c0."""
    if not FS_SERVER.is_file():
        pytest.skip("the filesystem server is not installed: npm install --prefix tests/.mcp "
                    "@modelcontextprotocol/server-filesystem (.ci/run does)")
    if importlib.util.find_spec("mcp_server_git") is None:
        pytest.skip("mcp-server-git is not installed")
    return config(tmp_path, {"fs": {"command": "node", "args": [str(FS_SERVER), "{workdir}"]},
                             "git": {"command": sys.executable, "args": ["-m", "mcp_server_git", "--repository",
                                                                         "{workdir}"]}},
                  **{"state": "git", "timeout": 30, "exclude_tools": ["get_file_info", "read_media_file"], **own})


def test_filesystem_and_git_servers_over_a_repository_from_c0(tmp_path: Path) -> None:
    toolset = load_toolset(fs_git_config(tmp_path))
    c0 = toolset.sample_config(3)
    ex = toolset.executor_factory()
    try:
        ex.reset(c0)
        first = c0["files"][0]
        assert ex.execute(call("read_text_file", {"path": first["path"]})).value == {"content": first["content"]}
        assert ex.execute(call("write_file", {"path": "/workspace/new.txt", "content": "x"})).ok
        assert ex.execute(call("git_add", {"repo_path": "/workspace", "files": ["new.txt"]})).ok
        commit = ex.execute(call("git_commit", {"repo_path": "/workspace", "message": "add"}))
        assert commit.ok and "/workspace" not in str(ex.workdir)
        denied = ex.execute(call("read_text_file", {"path": "/etc/hostname"}))
        assert not denied.ok and str(ex.workdir) not in denied.error
        end = ex.state()
        assert "new.txt" in end
        ex.reset(c0)  # a fresh directory and fresh servers: the same commit hash again
        for step in (("write_file", {"path": "/workspace/new.txt", "content": "x"}),
                     ("git_add", {"repo_path": "/workspace", "files": ["new.txt"]})):
            ex.execute(call(*step))
        assert ex.execute(call("git_commit", {"repo_path": "/workspace", "message": "add"})).value == commit.value
        assert ex.state() == end
    finally:
        ex.close()


def test_a_clock_time_a_server_reports_is_kept_as_given_and_compared_masked(tmp_path: Path) -> None:
    from sap.executors.base import ReplayMismatch, replay

    toolset = load_toolset(fs_git_config(tmp_path, exclude_tools=[], masks=[FILE_TIMES]))
    c0 = toolset.sample_config(2)
    ex = toolset.executor_factory()
    try:
        ex.reset(c0)
        info = ex.execute(call("get_file_info", {"path": c0["files"][0]["path"]}))
        assert info.ok and re.search(r"modified: \w{3} \w{3} \d", info.value["content"])  # a real time, no mask
        time.sleep(1.1)  # a fresh directory a second later: other file times
        recorded = call("get_file_info", {"path": c0["files"][0]["path"]}).model_copy(update={"result": info.value})
        replay(ex, c0, [recorded])  # compared with the times masked: no mismatch
        assert ex.execute(recorded).value != info.value  # though the times differ
        other = recorded.model_copy(update={"result": {"content": info.value["content"].replace("size:", "size: 9")}})
        with pytest.raises(ReplayMismatch):
            replay(ex, c0, [other])  # what the masks leave is still compared
    finally:
        ex.close()


def test_a_written_path_hashes_alike_in_every_working_directory(tmp_path: Path) -> None:
    toolset = load_toolset(fs_git_config(tmp_path))
    c0, states = toolset.sample_config(1), []
    for _ in range(2):
        ex = toolset.executor_factory()
        try:
            ex.reset(c0)  # a new temporary directory each time; the text names a path under it
            assert ex.execute(call("write_file", {"path": "/workspace/p.txt", "content": "/workspace/docs: see"})).ok
            states.append(ex.state())
        finally:
            ex.close()
    assert states[0] == states[1]


def test_synthesize_and_validate_over_real_servers(tmp_path: Path) -> None:
    name = fs_git_config(tmp_path)
    sap("synthesize", "--toolset", name, "-n", "3", "-o", "out.jsonl", "--db", f"sqlite:///{tmp_path}/sap.db",
        cwd=tmp_path, timeout=900)
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(records) == 3
    done = sap("validate", "out.jsonl", "--toolset", name, cwd=tmp_path, timeout=600)
    assert "3 records, 0 failed" in done.stdout + done.stderr


def test_a_phrase_file_in_the_config_words_the_servers_tools(tmp_path: Path) -> None:
    from sap.provenance.phrasebook import phrase_book

    (tmp_path / "fake.phrases.toml").write_text('[tools.echo]\nrequests = ["say {text} back to me", '
                                               '"repeat {text} for me"]\n', encoding="utf-8")
    toolset = load_toolset(config(tmp_path, {"fake": fake("ok")}, phrases="fake.phrases.toml"))
    book = phrase_book({t.name: t for t in toolset.tools})
    assert book is not None and book.tools["echo"].requests == ("say {text} back to me", "repeat {text} for me")
    with pytest.raises(UnknownToolset, match="sap.phrases"):
        load_toolset(config(tmp_path, {"fake": fake("ok")}, phrases="missing.toml"))
