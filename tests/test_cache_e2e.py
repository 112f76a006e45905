"""End to end on the travel domain: derive templates, collect a cache, switch the live executor off, synthesize 100
records from the cache alone, validate them all; an interrupted cache run resumes to the uninterrupted bytes."""
from __future__ import annotations

import json
import shutil

import pytest

from sap.cache.query import RuleQueryWriter
from sap.cli import main
from helpers import replay_script, travel_cache
from sap.executors.python_object import PythonObjectExecutor


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    """A templates file and a database holding the travel cache."""
    return travel_cache(tmp_path_factory.mktemp("cache"), seeds=2)


def _live_off(monkeypatch):
    def refuse(self, call):
        raise AssertionError(f"the live executor ran {call.name} in cache mode")
    monkeypatch.setattr(PythonObjectExecutor, "execute", refuse)


def test_hundred_records_from_the_cache_alone_all_validate(collected, monkeypatch, capsys):
    root, templates, db = collected
    _live_off(monkeypatch)
    out = root / "out.jsonl"
    args = ["cache", "synthesize", "--cache", "travel", "--templates", str(templates), "-n", "100", "-o", str(out),
            "--db", f"sqlite:///{db}"]
    assert main(args) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 100 and len({r["id"] for r in records}) == 100
    assert all(r["meta"]["toolset"] == "cache:travel" and r["meta"]["mode"] == "cache" for r in records)
    tags = {a["tag"] for r in records for p in r["provenance"] for a in p["args"].values()}
    assert tags == {"prev_output", "self_create"}
    assert sum(len(r["provenance"]) >= 3 for r in records) > 10  # three-step chains are in the mix
    capsys.readouterr()
    assert main(["validate", str(out), "--db", f"sqlite:///{db}"]) == 0
    assert "100 records, 0 failed" in capsys.readouterr().out
    # the same command again continues the finished run and writes the same bytes
    before = out.read_bytes()
    assert main(args) == 0
    assert "continuing run" in capsys.readouterr().out and out.read_bytes() == before


def test_validate_catches_a_tampered_cache_record(collected, monkeypatch, capsys):
    root, templates, db = collected
    out = root / "small.jsonl"
    assert main(["cache", "synthesize", "--cache", "travel", "--templates", str(templates), "-n", "3", "-o", str(out),
                 "--db", f"sqlite:///{db}", "--seed", "9"]) == 0
    record = json.loads(out.read_text().splitlines()[0])
    call = next(m for m in record["messages"] if m.get("tool_calls"))["tool_calls"][0]["function"]
    args = json.loads(call["arguments"])
    key = next(iter(args))
    args[key] = f"{args[key]}-x" if isinstance(args[key], str) else args[key]
    call["arguments"] = json.dumps(args)
    out.write_text(json.dumps(record) + "\n")
    capsys.readouterr()
    assert main(["validate", str(out), "--db", f"sqlite:///{db}"]) == 1
    assert "1 records, 1 failed" in capsys.readouterr().out


def test_interrupted_cache_run_resumes_to_the_uninterrupted_bytes(collected, monkeypatch, capsys):
    root, templates, db = collected
    for name in ("a", "b"):  # the database with its WAL: the copies hold every committed transaction
        for suffix in ("", "-wal", "-shm"):
            if db.with_name(db.name + suffix).exists():
                shutil.copy(db.with_name(db.name + suffix), root / f"{name}.db{suffix}")

    def run(name: str) -> int:
        return main(["cache", "synthesize", "--cache", "travel", "--templates", str(templates), "-n", "15",
                     "-o", str(root / f"{name}.jsonl"), "--db", f"sqlite:///{root / name}.db", "--seed", "3"])

    calls = {"n": 0, "stop_at": None}
    write = RuleQueryWriter.write

    def counted(self, sample, specs, rng, feedback=()):
        calls["n"] += 1
        if calls["n"] == calls["stop_at"]:  # once: the resumed run writes on
            raise KeyboardInterrupt
        return write(self, sample, specs, rng, feedback)

    monkeypatch.setattr(RuleQueryWriter, "write", counted)
    assert run("a") == 0
    uninterrupted, calls["n"], calls["stop_at"] = calls["n"], 0, 8
    capsys.readouterr()
    assert run("b") == 130
    run_id = capsys.readouterr().out.split()[1]
    assert main(["resume", run_id, "-o", str(root / "b.jsonl"), "--db", f"sqlite:///{root / 'b.db'}"]) == 0
    assert (root / "b.jsonl").read_bytes() == (root / "a.jsonl").read_bytes()
    # only the interrupted call is made again: slots finished before the interruption were not written again
    assert calls["n"] == uninterrupted + 1


def test_derived_templates_bind_real_dependencies(collected):
    from sap.cache.templates import load_templates
    from sap.toolsets import load_toolset

    _, templates, _ = collected
    loaded = {t.name: t for t in load_templates(templates, {s.name: s for s in load_toolset("travel").tools})}
    hotel = loaded["search_hotels->get_hotel_details->book_hotel"].steps[1].bind["hotel_id"]
    assert (hotel.step, hotel.path) == (0, "$.hotels[*].hotel_id")
    assert any(len(t.steps) == 3 for t in loaded.values())
    # chosen by coverage: every travel tool is in some template but convert_currency, which feeds and is fed by
    # nothing (a lone read is rejected by the judge: nothing changes, nothing is consumed)
    assert {s.function for t in loaded.values() for s in t.steps} == {
        s.name for s in load_toolset("travel").tools} - {"convert_currency"}
    assert "search_locations->search_flights->get_weather" in loaded
    for t in loaded.values():
        for k, step in enumerate(t.steps[1:], 1):
            assert any(b.step == k - 1 for b in step.bind.values()), t.name  # each step consumes the one before
            fields = [(b.step, b.path) for b in step.bind.values()]
            assert len(fields) == len(set(fields)), t.name  # one field feeds one argument


def test_bad_rules_file_is_refused_naming_file_and_field(collected, tmp_path, capsys):
    _, templates, _ = collected
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"search_hotels": {"params": {"check_in": {"format": "calendar"}}}}))
    assert main(["cache", "collect", "--toolset", "travel", "--templates", str(templates), "--rules", str(rules),
                 "--db", f"sqlite:///{tmp_path / 'x.db'}"]) == 2
    err = capsys.readouterr().err
    assert "rules.json: search_hotels.params.check_in.format" in err and "'calendar'" in err


def _things(node, out):
    """(id key, id, scalar fields) of every object with a string id in a response (followed independently of
    sap.cache.coherence)."""
    if isinstance(node, dict):
        ids = [k for k, v in node.items() if (k == "id" or k.endswith("_id")) and isinstance(v, str)]
        if ids:
            out.append((ids[0], node[ids[0]], {k: v for k, v in node.items()
                                               if k != ids[0] and isinstance(v, (str, int, float, bool))}))
        for v in node.values():
            _things(v, out)
    elif isinstance(node, list):
        for v in node:
            _things(v, out)


def test_two_hundred_cache_records_tell_no_contradictory_story(collected, capsys):
    """Following every thing with an id across a record's responses: its fields stay as they were unless a write
    (a booking, a cancellation, a date change) came between, in 200 records joined from the cache."""
    root, templates, db = collected
    out = root / "coherent.jsonl"
    assert main(["cache", "synthesize", "--cache", "travel", "--templates", str(templates), "-n", "200", "-o",
                 str(out), "--db", f"sqlite:///{db}", "--seed", "3"]) == 0
    writes = {"book_hotel", "book_flight", "cancel_booking", "modify_booking_dates"}
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 200
    contradictions = []
    for record in records:
        known: dict = {}
        for m in record["messages"]:
            if m["role"] != "tool":
                continue
            if m["name"] in writes:
                known = {}
                continue
            found: list = []
            _things(json.loads(m["content"]), found)
            for key, ident, fields in found:
                before = known.setdefault((key, ident), {})
                contradictions += [(record["id"], key, ident, f) for f, v in fields.items() if before.get(f, v) != v]
                before.update(fields)
    assert contradictions == []


def test_a_thing_that_changes_with_no_write_between_is_a_contradiction():
    from sap.cache.coherence import entity_contradictions
    from sap.model import ArgProvenance, Tag, ToolCall, ToolSpec, Trajectory, Turn

    specs = {n: ToolSpec(name=n, description=d, read_only=r) for n, d, r in (
        ("list_bookings", "List bookings.", True), ("get_booking", "Get a booking.", True),
        ("cancel_booking", "Cancel a booking.", False))}

    def traj(*calls):
        made = [ToolCall(call_id=f"c{i}", name=n, args_exec={}, args_prov={}, result=r) for i, (n, r) in enumerate(calls)]
        return Trajectory(id="t", toolset="x", seed=0, c0={}, turns=[Turn(index=0, state="s", transition=0, calls=made)])

    hotel = {"bookings": [{"booking_id": "B1", "booking_type": "hotel", "status": "confirmed"}]}
    flight = {"booking_id": "B1", "booking_type": "flight", "status": "confirmed"}
    assert entity_contradictions(traj(("list_bookings", hotel), ("get_booking", flight)), specs) == [
        "call 1 (get_booking): booking_id B1 booking_type: 'hotel' -> 'flight'"]
    cancelled = {"booking_id": "B1", "booking_type": "hotel", "status": "cancelled"}
    assert entity_contradictions(traj(("list_bookings", hotel), ("cancel_booking", {}), ("get_booking", cancelled)),
                                 specs) == []  # a write between: the status may change


def test_sap_eval_plays_cache_records_on_their_cache(collected, tmp_path, capsys):
    """`sap eval --data <cache records> --db`: the tasks run on the cache, and a model replaying the records' own
    calls scores 1.0; a --db that does not exist is named."""
    from sap.testing import ScriptedLLMServer

    root, templates, db = collected
    out = tmp_path / "few.jsonl"
    assert main(["cache", "synthesize", "--cache", "travel", "--templates", str(templates), "-n", "3", "-o", str(out),
                 "--db", f"sqlite:///{db}", "--seed", "9"]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    capsys.readouterr()
    with ScriptedLLMServer(replay_script(records)) as server:
        assert main(["eval", "--data", str(out), "--assistant-model", "openai/scripted", "--api-base",
                     server.api_base, "--db", f"sqlite:///{db}", "-k", "1", "--concurrency", "1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["tasks"] == 3 and summary["reward"] == 1.0 and summary["progress"] == 1.0
    assert main(["eval", "--data", str(out), "--assistant-model", "openai/scripted", "--api-base", "http://127.0.0.1:9",
                 "--db", f"sqlite:///{tmp_path / 'empty.db'}"]) == 2
    assert f"no run database at {tmp_path / 'empty.db'}" in capsys.readouterr().err


def test_search_locations_is_collected_with_values_the_configuration_holds(collected):
    """The search tool is in the derived templates, and collection asks it for places c0 knows, so its cached
    responses list locations (not only empty searches)."""
    from sap.cache.store import CacheStore
    from sap.store import RunStore
    from sap.toolsets import load_toolset

    _, _, db = collected
    index = CacheStore(RunStore(f"sqlite:///{db}")).load("travel").index
    entries = [index.entries[i] for i in index.by_function["search_locations"]]
    travel = load_toolset("travel")
    known = {w.lower() for seed in (0, 1) for loc in travel.sample_config(seed)["locations"]
             for w in (loc["city"], loc["country"], loc["airport_code"]) for w in str(w).split()}
    assert len(entries) >= 10
    assert sum(e.args["query"].lower() in known for e in entries) >= 0.8 * len(entries)
    assert sum(bool(e.response["locations"]) for e in entries) >= 0.8 * len(entries)


def test_collect_keeps_the_templates_that_ran_to_their_last_step(tmp_path, capsys):
    """A cancelled booking cannot be modified, so that chain never completes; --keep-complete writes the others."""
    from sap.cache.templates import load_templates
    from sap.toolsets import load_toolset

    templates = tmp_path / "t.yaml"
    templates.write_text("""
templates:
  - name: search-details
    steps:
      - function: search_hotels
      - function: get_hotel_details
        bind: {hotel_id: {step: 0, path: "$.hotels[*].hotel_id"}}
  - name: cancel-modify
    steps:
      - function: list_bookings
      - function: cancel_booking
        bind: {booking_id: {step: 0, path: "$.bookings[*].booking_id"}}
      - function: modify_booking_dates
        bind: {booking_id: {step: 1, path: "$.booking_id"}}
""")
    kept = tmp_path / "kept.yaml"
    assert main(["cache", "collect", "--toolset", "travel", "--templates", str(templates), "--seeds", "1",
                 "--keep-complete", str(kept), "--db", f"sqlite:///{tmp_path / 'c.db'}"]) == 0
    assert f"1 templates that ran to their last step -> {kept}" in capsys.readouterr().out
    specs = {s.name: s for s in load_toolset("travel").tools}
    assert [t.name for t in load_templates(kept, specs)] == ["search-details"]
