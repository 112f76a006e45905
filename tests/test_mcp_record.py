"""Recorded mode of MCP toolsets (`"sap": {"record": {"cache": NAME, "db": ...}}`): calls recorded into the cache
environment and answered from it afterwards, against the fake catalog server (which logs every call it gets), the
time server and the reference filesystem server."""
from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from cli_fixtures import sap
from helpers import call
from sap.cache.index import Entry
from sap.cache.store import CacheStore
from sap.store import RunStore
from sap.toolsets import UnknownToolset, load_toolset
from test_mcp import FAKE, FS_SERVER, config, no_orphans  # noqa: F401 (no_orphans: autouse here too)

pytest.importorskip("mcp")


def catalog(where: Path, **record: Any) -> str:
    """An `mcp:` config of the fake catalog server, logging its calls to where/calls.log, recording into the cache
    `shop` (of `record`'s db, by default servers.cache.db beside the config)."""
    server = {"command": sys.executable, "args": [str(FAKE), "catalog"],
              "env": {"FAKE_CALL_LOG": str(where / "calls.log")}}
    return config(where, {"shop": server}, record={"cache": "shop", **record})


def logged(where: Path) -> list[dict[str, Any]]:
    """The tools/call requests that reached the fake server (their params)."""
    log = where / "calls.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def live_calls(where: Path) -> int:
    """How many tools/call requests reached the fake server."""
    return len(logged(where))


def refused(params: dict[str, Any]) -> bool:
    """Whether the catalog answers this call with an error (a product id it does not know)."""
    return params["name"] == "get_item" and not params["arguments"]["item_id"].startswith("item-")


def records(path: Path) -> list[dict[str, Any]]:
    """The records of a JSONL file."""
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory where `sap synthesize -n 5` ran over the catalog in recorded mode (out.jsonl, run1.db, the cache
    in servers.cache.db, calls.log)."""
    where = tmp_path_factory.mktemp("recorded")
    name = catalog(where)
    sap("synthesize", "--toolset", name, "-n", "5", "-o", "out.jsonl", "--db", f"sqlite:///{where}/run1.db",
        cwd=where, timeout=600)
    return where


def test_a_second_synthesis_and_validate_make_no_live_call(recorded: Path) -> None:
    name = f"mcp:{recorded / 'servers.json'}"
    first = live_calls(recorded)
    assert first > 0 and len(records(recorded / "out.jsonl")) == 5
    again = sap("synthesize", "--toolset", name, "-n", "5", "-o", "again.jsonl", "--db",
                f"sqlite:///{recorded}/run2.db", cwd=recorded, timeout=600)
    # every successful call of the same seed was recorded: only the failed attempts (never recorded) went live
    assert not [c for c in logged(recorded)[first:] if not refused(c)]
    assert records(recorded / "again.jsonl") == records(recorded / "out.jsonl")  # same seed, same records
    assert f"{live_calls(recorded) - first} made live" in again.stderr
    before = live_calls(recorded)
    done = sap("validate", "out.jsonl", "--toolset", name, cwd=recorded, timeout=600)
    assert "5 records, 0 failed" in done.stdout + done.stderr
    assert live_calls(recorded) == before and "0 made live" in done.stderr  # a replay is answered from the cache


def test_the_recorded_cache_derives_templates_and_synthesizes(recorded: Path) -> None:
    db = f"sqlite:///{recorded}/servers.cache.db"
    loaded = CacheStore(RunStore(db)).load("shop")
    assert {s.name for s in loaded.specs} == {"search", "get_item"}
    assert len(loaded.index) == len({json.dumps(c, sort_keys=True) for c in logged(recorded) if not refused(c)})
    assert all(e.state is None for e in loaded.index.entries.values())  # a stateless server: stateless entries
    derived = sap("templates", "derive", "--cache", "shop", "--db", db, "-o", "templates.json", cwd=recorded)
    assert "1 feeding edges" in derived.stdout  # search's item_id feeds get_item
    sap("cache", "synthesize", "--cache", "shop", "--templates", "templates.json", "-n", "3", "-o", "cache.jsonl",
        "--db", db, cwd=recorded, timeout=600)
    assert len(records(recorded / "cache.jsonl")) == 3
    done = sap("validate", "cache.jsonl", "--db", db, cwd=recorded)
    assert "3 records, 0 failed" in done.stdout + done.stderr


def test_calls_recorded_by_one_load_answer_in_the_next(tmp_path: Path) -> None:
    name = catalog(tmp_path, db="nested.db")
    search, missing = call("search", {"query": "lamp"}), call("get_item", {"item_id": "lamp"})
    for live in (2, 3):  # each load opens the database afresh, as a new process would
        ex = load_toolset(name).executor_factory()
        try:
            ex.reset({})
            assert ex.execute(search).value["results"][0]["name"] == "lamp deluxe"  # live the first time only
            assert ex.execute(search).ok  # from the cache
            assert not ex.execute(missing).ok  # an error: made live every time, never recorded
        finally:
            ex.close()
        assert live_calls(tmp_path) == live
    loaded = CacheStore(RunStore(f"sqlite:///{tmp_path}/nested.db")).load("shop")
    assert [(e.function, e.args) for e in loaded.index.entries.values()] == [("search", {"query": "lamp"})]


def test_time_server_answers_a_recorded_conversion_from_the_cache(tmp_path: Path) -> None:
    pytest.importorskip("mcp_server_time")
    name = config(tmp_path, {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time",
                                                                      "--local-timezone", "UTC"]}},
                  masks=[r"\d{4}-\d{2}-\d{2}"], timeout=30, record={"cache": "time"})
    convert = call("convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})
    counts = []
    for _ in range(2):  # the second load reads the conversion the first recorded
        ex = load_toolset(name).executor_factory()
        try:
            ex.reset({})
            assert ex.execute(convert).value["target"]["datetime"].endswith("T21:00:00+09:00")
            counts.append((ex.cache.answered, ex.cache.live))
        finally:
            ex.close()
    assert counts == [(0, 1), (1, 0)]


@pytest.mark.parametrize(("record", "field", "value"), [
    ("shop", "sap.record", '"shop"'),
    ({"cache": "shop", "file": "x.db"}, "sap.record.file", '"x.db"'),
    ({"db": "x.db"}, "sap.record.cache", "null"),
    ({"cache": ""}, "sap.record.cache", '""'),
    ({"cache": "shop", "db": "no/such/dir/x.db"}, "sap.record.db", '"no/such/dir/x.db"'),
    ({"cache": "shop", "db": "mysql://host/db"}, "sap.record.db", '"mysql://host/db"'),
    ({"cache": "shop", "db": 3}, "sap.record.db", "3"),
])
def test_a_bad_record_field_is_refused_naming_file_field_and_value(tmp_path: Path, record: Any, field: str,
                                                                   value: str) -> None:
    name = config(tmp_path, {"shop": {"command": sys.executable, "args": [str(FAKE), "catalog"]}}, record=record)
    with pytest.raises(UnknownToolset) as caught:
        load_toolset(name)
    assert str(caught.value).startswith(f"{tmp_path / 'servers.json'}: {field} {value}: ")
    assert not list(tmp_path.glob("*.db"))  # refused before anything was opened


def test_concurrent_writers_store_one_entry_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cache.db"
    stores = [CacheStore(RunStore(url)) for _ in range(6)]  # one engine each, as separate processes have
    entry = Entry(0, "search", {"query": "lamp"}, {"results": []})
    start, added, failed = threading.Barrier(len(stores)), [], []

    def write(store: CacheStore) -> None:
        start.wait()
        try:
            added.append(store.save_index("shop", [entry]))
        except Exception as exc:  # noqa: BLE001 (any failure is the finding)
            failed.append(exc)

    threads = [threading.Thread(target=write, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failed and sorted(added) == [0] * (len(stores) - 1) + [1]
    assert stores[0].caches() == {"shop": 1}


def files_config(where: Path) -> str:
    """The filesystem server over files sap builds from c0, recording into the cache `files`."""
    if not FS_SERVER.is_file():
        pytest.skip("the filesystem server is not installed: npm install --prefix tests/.mcp "
                    "@modelcontextprotocol/server-filesystem (.ci/run does)")
    return config(where, {"fs": {"command": "node", "args": [str(FS_SERVER), "{workdir}"]}}, state="files",
                  timeout=30, exclude_tools=["get_file_info", "read_media_file"], record={"cache": "files"})


def test_files_reads_answer_from_the_cache_in_their_state_and_writes_go_live(tmp_path: Path) -> None:
    toolset = load_toolset(files_config(tmp_path))
    c0 = toolset.sample_config(2)
    first = c0["files"][0]
    read = call("read_text_file", {"path": first["path"]})
    write = call("write_file", {"path": first["path"], "content": "changed\n"})
    ex = toolset.executor_factory()
    try:
        ex.reset(c0)
        assert ex.execute(read).value == {"content": first["content"]}  # live, recorded in c0's state
        assert ex.execute(read).value == {"content": first["content"]}  # the same state: from the cache
        assert (ex.cache.answered, ex.cache.live) == (1, 1)
        assert ex.execute(write).ok
        assert ex.execute(read).value == {"content": "changed\n"}  # another state: not the recorded answer
        assert (ex.cache.answered, ex.cache.live) == (1, 3)
        ex.reset(c0)
        on_disk = ex.live.workdir / first["path"].removeprefix(c0["root"] + "/")
        assert on_disk.read_text() == first["content"]
        assert ex.execute(write).ok  # a recorded write still runs on the server: the file changed
        assert on_disk.read_text() == "changed\n" and ex.cache.live == 4
        assert ex.execute(read).value == {"content": "changed\n"}  # recorded in this state: from the cache
        assert (ex.cache.answered, ex.cache.live) == (2, 4)
    finally:
        ex.close()
    loaded = CacheStore(RunStore(f"sqlite:///{tmp_path}/servers.cache.db")).load("files")
    kept = sorted((e.function, e.state == e.after) for e in loaded.index.entries.values())
    assert kept == [("read_text_file", True), ("read_text_file", True), ("write_file", False)]


def test_records_over_a_recorded_files_server_validate_and_repeat(tmp_path: Path) -> None:
    name = files_config(tmp_path)
    sap("synthesize", "--toolset", name, "-n", "3", "-o", "out.jsonl", "--db", f"sqlite:///{tmp_path}/run1.db",
        cwd=tmp_path, timeout=900)
    again = sap("synthesize", "--toolset", name, "-n", "3", "-o", "again.jsonl", "--db",
                f"sqlite:///{tmp_path}/run2.db", cwd=tmp_path, timeout=900)
    assert records(tmp_path / "again.jsonl") == records(tmp_path / "out.jsonl")  # same seed, same records
    answered = int(again.stderr.split("recorded mode, cache files")[1].split(": ")[1].split(" calls answered")[0])
    assert answered > 0
    done = sap("validate", "out.jsonl", "--toolset", name, cwd=tmp_path, timeout=600)
    assert "3 records, 0 failed" in done.stdout + done.stderr
