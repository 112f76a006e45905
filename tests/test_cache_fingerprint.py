"""The cache's content hash: kept running as entries are added (equal to a full rehash), and a cache run is refused
as changed settings when the cache's entries change at the same count (new command and `sap resume` alike)."""
from __future__ import annotations

import json

from sqlalchemy import delete

from sap.cache.store import CacheContentRow, CacheEntryRow, CacheStore
from sap.cache.templates import parse_templates
from sap.cli import main
from sap.runs.cache import cache_run_config, start_cache_run
from sap.store import RunStore
from test_cache_query import SPECS, TEMPLATES

ENTRIES = [("search_hotels", {"city": "Oslo", "nights": 3}, {"hotels": [{"id": "H1"}]}),
           ("get_hotel", {"hotel_id": "H1"}, {"hotel_id": "H1", "rooms": 4})]


def _store(path) -> CacheStore:
    store = CacheStore(RunStore(f"sqlite:///{path}"))
    store.save_tools("hotels", SPECS)
    return store


def test_running_hash_equals_a_full_rehash_and_follows_content_not_just_count(tmp_path):
    one, two = _store(tmp_path / "one.db"), _store(tmp_path / "two.db")
    assert one.add("hotels", ENTRIES[:1]) == 1 and one.add("hotels", ENTRIES) == 1  # in two adds
    assert two.add("hotels", ENTRIES) == 2  # in one
    loaded = one.load("hotels")
    assert loaded.content_hash == two.load("hotels").content_hash == one._rehash("hotels") != ""
    other = _store(tmp_path / "other.db")
    other.add("hotels", [ENTRIES[0], ("get_hotel", {"hotel_id": "H1"}, {"hotel_id": "H1", "rooms": 5})])
    assert len(other.load("hotels").index) == 2 and other.load("hotels").content_hash != loaded.content_hash


def test_a_cache_stored_before_content_hashes_is_hashed_at_its_first_load(tmp_path):
    store = _store(tmp_path / "c.db")
    store.add("hotels", ENTRIES)
    reference = store.load("hotels").content_hash
    with store.store.session.begin() as s:
        s.execute(delete(CacheContentRow))  # as an older sap left it
    store.add("hotels", [("get_hotel", {"hotel_id": "H2"}, {"hotel_id": "H2", "rooms": 1})])
    loaded = store.load("hotels")
    assert loaded.content_hash == store._rehash("hotels") != reference
    with store.store.session() as s:
        assert s.get(CacheContentRow, "hotels").entries == 3  # stored: the next load reads it


def test_run_is_refused_when_entries_change_at_the_same_count(tmp_path, capsys):
    db = tmp_path / "c.db"
    store = _store(db)
    store.add("hotels", ENTRIES)
    templates = tmp_path / "t.yaml"
    templates.write_text(TEMPLATES)
    cache = store.load("hotels")
    config = cache_run_config(2, 0, cache, parse_templates(TEMPLATES, {s.name: s for s in SPECS}))
    run_id = start_cache_run(store.store, cache, config)  # an unfinished run on the cache as it was
    with store.store.session.begin() as s:  # one entry swapped for another past sap: the count stays 2
        s.execute(delete(CacheEntryRow).where(CacheEntryRow.function == "get_hotel"))
    store.add("hotels", [("get_hotel", {"hotel_id": "H1"}, {"hotel_id": "H1", "rooms": 9})])
    assert json.loads(_cli(["cache", "list", "--json", "--db", f"sqlite:///{db}"], capsys)[1]) == {"hotels": 2}
    code, _, err = _cli(["cache", "synthesize", "--cache", "hotels", "--templates", str(templates), "-n", "2",
                         "-o", str(tmp_path / "o.jsonl"), "--db", f"sqlite:///{db}"], capsys)
    assert code == 2 and f"unfinished run {run_id} has other settings: cache_content: '{cache.content_hash}' ->" in err
    assert "cache_entries" not in err
    code, _, err = _cli(["resume", run_id, "-o", str(tmp_path / "r.jsonl"), "--db", f"sqlite:///{db}"], capsys)
    assert code == 2 and f"run {run_id} cannot be resumed: cache 'hotels' changed since the run started" in err
    assert not (tmp_path / "r.jsonl").exists() or not (tmp_path / "r.jsonl").read_text()


def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err
