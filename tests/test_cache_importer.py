"""Importing recorded conversations: ComplexFuncBench JSONL and sap records, with clear errors on bad lines."""
from __future__ import annotations

import json
import random

import pytest

from sap.cache import CacheIndex
from sap.cache.importer import ImportFormatError, import_file
from sap.cli import main
from sap.export.records import to_record
from sap.model import ArgProvenance, Tag, ToolCall, Toolset, ToolSpec, Trajectory, Turn

FUNCTIONS = [
    {"name": "Search_Hotel_Destination", "description": "Find a destination id.",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
    {"name": "Get_Room_List", "description": "Rooms of a hotel.",
     "parameters": {"type": "object", "properties": {"hotel_id": {"type": "integer"},
                                                     "arrival_date": {"type": "string"}},
                    "required": ["hotel_id", "arrival_date"]}},
]
CFB_LINE = {
    "id": "Hotels-1", "functions": FUNCTIONS,
    "conversations": [
        {"role": "user", "content": "Rooms at the Ritz in Lisbon on 2024-11-02 and at the Tivoli?"},
        {"role": "assistant", "function_call": [{"name": "Search_Hotel_Destination", "arguments": {"query": "Ritz Lisbon"}},
                                                {"name": "Search_Hotel_Destination", "arguments": {"query": "Tivoli"}}]},
        {"role": "observation", "content": [{"status": True, "data": [{"dest_id": 77, "hotel_id": 11}]},
                                            {"status": True, "data": [{"dest_id": 78, "hotel_id": 12}]}]},
        {"role": "assistant", "function_call": [{"name": "Get_Room_List",
                                                 "arguments": json.dumps({"hotel_id": 11, "arrival_date": "2024-11-02"})}]},
        {"role": "observation", "content": ['{"status": true, "data": {"rooms": ["R1"]}}']},
        {"role": "assistant", "content": "The Ritz has room R1."},
    ],
}


def test_complexfuncbench_calls_are_paired_with_their_observations(tmp_path):
    path = tmp_path / "cfb.jsonl"
    path.write_text(json.dumps(CFB_LINE) + "\n\n")
    found = import_file(path)
    assert found.formats == {"complexfuncbench": 1}
    assert sorted(found.specs) == ["Get_Room_List", "Search_Hotel_Destination"]
    index = CacheIndex()
    assert found.into(index) == 3
    assert index.get("Search_Hotel_Destination", {"query": "Tivoli"}).response["data"][0]["hotel_id"] == 12
    assert index.get("Get_Room_List", {"arrival_date": "2024-11-02", "hotel_id": 11}).response == {
        "status": True, "data": {"rooms": ["R1"]}}


def test_misaligned_observations_name_the_line_and_turn(tmp_path):
    bad = json.loads(json.dumps(CFB_LINE))
    bad["conversations"][2]["content"].pop()
    path = tmp_path / "cfb.jsonl"
    path.write_text(json.dumps(CFB_LINE) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(ImportFormatError, match=r"cfb.jsonl:2 conversations\[2\]: 1 observation\(s\) for 2 call\(s\)"):
        import_file(path)
    path.write_text('{"rows": []}\n')
    with pytest.raises(ImportFormatError, match=r"cfb.jsonl:1: neither a ComplexFuncBench line"):
        import_file(path)


def _sap_record() -> dict:
    spec = ToolSpec(name="lookup", parameters={"type": "object", "properties": {"key": {"type": "string"}},
                                               "required": ["key"]})
    toolset = Toolset(name="demo", description="", tools=[spec], executor_factory=lambda: None,
                      sample_config=lambda s: {})
    call = ToolCall(call_id="call_0_0", name="lookup", args_exec={"key": "k1"},
                    args_prov={"key": ArgProvenance(tag=Tag.self_create)}, result={"value": 42})
    traj = Trajectory(id="r1", toolset="demo", seed=1, c0={}, turns=[Turn(index=0, state="s", transition=0,
                                                                            calls=[call], user_message='key "k1"')])
    return to_record(traj, toolset, {})


def test_sap_records_import_and_cli_stores_them(tmp_path, capsys):
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(_sap_record()) + "\n" + json.dumps(CFB_LINE) + "\n")
    found = import_file(path)
    assert found.formats == {"complexfuncbench": 1, "sap": 1}
    assert ("lookup", {"key": "k1"}, {"value": 42}) in found.calls
    db = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["cache", "import", str(path), "--cache", "mixed", "--db", db]) == 0
    assert "4 calls read (complexfuncbench 1, sap 1 lines), 4 new entries" in capsys.readouterr().out
    assert main(["cache", "import", str(path), "--cache", "mixed", "--db", db]) == 0
    assert "0 new entries, 4 in all, 3 functions" in capsys.readouterr().out


def _booking_line(k: int) -> dict:
    """A ComplexFuncBench-style conversation: find a hotel, list its rooms, book one (ids made by the responses)."""
    hotel, room = 100 + k, f"RM-{k}-A"
    functions = FUNCTIONS + [{"name": "Book_Room", "description": "Book a room.", "parameters": {
        "type": "object", "properties": {"room_id": {"type": "string"}, "guest": {"type": "string"}},
        "required": ["room_id", "guest"]}}]
    return {"id": f"Hotels-{k}", "functions": functions, "conversations": [
        {"role": "user", "content": "..."},
        {"role": "assistant", "function_call": [{"name": "Search_Hotel_Destination", "arguments": {"query": f"town {k}"}}]},
        {"role": "observation", "content": [{"data": [{"dest_id": 900 + k, "hotel_id": hotel}]}]},
        {"role": "assistant", "function_call": [{"name": "Get_Room_List",
                                                 "arguments": {"hotel_id": hotel, "arrival_date": "2024-11-02"}}]},
        {"role": "observation", "content": [{"hotel_id": hotel, "arrival_date": "2024-11-02",
                                             "rooms": [{"room_id": room}, {"room_id": f"RM-{k}-B"}]}]},
        {"role": "assistant", "function_call": [{"name": "Book_Room", "arguments": {"room_id": room, "guest": "Ana Ruiz"}}]},
        {"role": "observation", "content": [{"booking_id": f"BK-{k}", "room_id": room}]},
    ]}


def test_templates_are_derived_from_an_imported_caches_own_calls(tmp_path, capsys):
    from sap.cache.sampling import Sampler
    from sap.cache.store import CacheStore
    from sap.cache.templates import load_templates
    from sap.store import RunStore

    path = tmp_path / "cfb.jsonl"
    path.write_text("".join(json.dumps(_booking_line(k)) + "\n" for k in range(4)))
    db = f"sqlite:///{tmp_path / 'c.db'}"
    assert main(["cache", "import", str(path), "--cache", "cfb", "--db", db]) == 0
    out = tmp_path / "t.yaml"
    assert main(["templates", "derive", "--cache", "cfb", "-o", str(out), "--db", db]) == 0
    assert "covering 3 of 3 tools and 2 feeding edges" in capsys.readouterr().out
    specs = {s.name: s for s in CacheStore(RunStore(db)).load("cfb").specs}
    loaded = {t.name: t for t in load_templates(out, specs)}
    chain = loaded["Search_Hotel_Destination->Get_Room_List->Book_Room"]
    assert {p: (b.step, b.path) for p, b in chain.steps[1].bind.items()} == {"hotel_id": (0, "$.data[*].hotel_id")}
    # the room comes from the listing, not from the booking's echo of the room it was asked for; the date the
    # user stated (echoed by Get_Room_List) and the guest name feed nothing
    assert {p: (b.step, b.path) for p, b in chain.steps[2].bind.items()} == {"room_id": (1, "$.rooms[*].room_id")}
    sample = Sampler(CacheStore(RunStore(db)).load("cfb").index).sample(chain, random.Random(0))
    hotel = sample.steps[0].response["data"][0]["hotel_id"]
    assert sample.steps[1].args["hotel_id"] == hotel and sample.steps[2].args["room_id"] == f"RM-{hotel - 100}-A"
