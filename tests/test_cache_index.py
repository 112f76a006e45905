"""The in-memory index (O(1) key lookup, three-level reverse index) and its storage in the run database."""
from __future__ import annotations

from sap.cache import CacheIndex, Recorder
from sap.cache.keys import args_key, canonical_json, value_key
from sap.cache.store import CacheStore
from sap.model import ArgProvenance, Tag, ToolCall, ToolSpec
from sap.store import RunStore


def test_reverse_index_maps_function_param_value_to_ids():
    index = CacheIndex()
    a, _ = index.add("get_hotel", {"hotel_id": "H1", "lang": "en"}, {"name": "A"})
    b, _ = index.add("get_hotel", {"hotel_id": "H1", "lang": "de"}, {"name": "A-de"})
    c, _ = index.add("get_hotel", {"hotel_id": "H2", "lang": "en"}, {"name": "B"})
    index.add("get_room", {"hotel_id": "H1"}, {"rooms": []})
    assert index.reverse["get_hotel"]["hotel_id"]["H1"] == {a, b}
    assert index.ids_with("get_hotel", "lang", "en") == {a, c}
    assert index.ids_with("get_hotel", "hotel_id", "H1") & index.ids_with("get_hotel", "lang", "de") == {b}
    assert index.ids_with("get_hotel", "hotel_id", "H9") == set()
    assert index.ids_with("nope", "hotel_id", "H1") == set()


def test_values_of_different_json_types_stay_apart():
    index = CacheIndex()
    ids = [index.add("f", {"x": v}, i)[0] for i, v in enumerate(["1", 1, 1.0, True, [1]])]
    assert len(set(ids)) == 5
    assert index.ids_with("f", "x", 1) == {ids[1]} and index.ids_with("f", "x", True) == {ids[3]}
    assert index.get("f", {"x": 1.0}).response == 2


def test_first_recorded_response_is_kept_and_keys_are_canonical():
    index = CacheIndex()
    first, new = index.add("f", {"a": 1, "b": [2, {"c": 3, "d": 4}]}, "first")
    again, new2 = index.add("f", {"b": [2, {"d": 4, "c": 3}], "a": 1}, "second")
    assert new and not new2 and first == again and index.get("f", {"b": [2, {"c": 3, "d": 4}], "a": 1}).response == "first"
    assert index.get_key("f", args_key({"a": 1, "b": [2, {"c": 3, "d": 4}]})).id == first


def test_argument_keys_are_equal_exactly_when_the_canonical_json_is():
    values = ["1", 1, 1.0, True, False, 0, None, "null", -0.0, 0.0, [1], [1.0], ["1"], {"x": 1}, {"x": True},
              {"a": [1, {"c": 3, "d": 4}], "b": None}, {"b": None, "a": [1, {"d": 4, "c": 3}]}, "", [], {}]
    for a in values:
        for b in values:
            same = canonical_json(a) == canonical_json(b)
            assert (value_key(a) == value_key(b)) == same, (a, b)
            assert (args_key({"p": a, "q": "x"}) == args_key({"q": "x", "p": b})) == same, (a, b)
            hash(args_key({"p": a}))  # usable as a dict key, lists and dicts included
    assert args_key({"a": 1, "b": "2"}) != args_key({"a": "1", "b": 2}) != args_key({"b": 1, "a": "2"})
    assert args_key({}) == args_key({}) != args_key({"a": None})


def test_lookups_find_entries_by_equal_arguments_in_any_key_order():
    index = CacheIndex()
    a, _ = index.add("f", {"x": [1, {"k": "v", "j": 2}], "y": "s", "z": 1.5}, "A")
    b, _ = index.add("f", {"x": 1}, "B")
    c, _ = index.add("f", {"x": True}, "C")
    assert index.get("f", {"z": 1.5, "y": "s", "x": [1, {"j": 2, "k": "v"}]}).id == a
    assert index.get("f", {"x": [{"k": "v", "j": 2}, 1], "y": "s", "z": 1.5}) is None  # list order counts
    assert (index.get("f", {"x": 1}).id, index.get("f", {"x": True}).id) == (b, c)
    assert index.get("f", {"x": 1.0}) is None and index.get("g", {"x": 1}) is None


def test_recorder_wraps_a_live_callable_and_store_round_trips(tmp_path):
    calls = []

    def live_api(function, args):
        calls.append(function)
        if args.get("q") == "boom":
            raise ConnectionError("upstream down")
        return {"error": "bad query"} if args.get("q") == "bad" else {"hits": [args["q"].upper()]}

    rec = Recorder(live_api)
    for q in ("spa", "bad", "boom", "spa"):
        rec.execute(ToolCall(call_id="c", name="search", args_exec={"q": q}, args_prov={"q": ArgProvenance(tag=Tag.self_create)}))
    assert calls == ["search"] * 4 and len(rec.index) == 1 and len(rec.new) == 1
    store = CacheStore(RunStore(f"sqlite:///{tmp_path / 'c.db'}"))
    spec = ToolSpec(name="search", parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})
    store.save_tools("live", [spec])
    assert store.save_index("live", rec.index.entries.values()) == 1
    assert store.save_index("live", rec.index.entries.values()) == 0  # nothing twice
    loaded = CacheStore(RunStore(f"sqlite:///{tmp_path / 'c.db'}")).load("live")
    assert loaded.specs == [spec] and loaded.index.get("search", {"q": "spa"}).response == {"hits": ["SPA"]}
    assert loaded.index.ids_with("search", "q", "spa") == {loaded.index.get("search", {"q": "spa"}).id}
    assert store.caches() == {"live": 1}
