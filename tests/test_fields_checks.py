"""Tests for field enumeration and matching (sap.provenance.fields) and the deterministic code check."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import call
from sap.model import ArgProvenance, Selector, Tag, Trajectory, Turn
from sap.provenance.checks import code_check, mentions
from sap.provenance.fields import (IndexCache, candidates, child_path, iter_fields, match_score, singular,
                                   type_ok)
from sap.provenance.jsonpath import PathError, resolve

WEIRD = {
    "a.b": {"": 1, "x y": [1, {'q"]': 2}], "ok": "v"},
    "ünï": {"[0]": 3, "$": 4},
    "_k-1": [[1, 2], [3]],
    "a": {"b": 9},
    "": {"": {"": "deep"}},
    "0": "zero",
    "n": None,
}


def test_iter_fields_paths_with_odd_keys_resolve_back():
    fields = list(iter_fields(WEIRD))
    paths = [f.path for f in fields]
    assert len(paths) == len(set(paths))
    for f in fields:
        assert resolve(WEIRD, f.path) == f.value, f.path
    by_path = {f.path: f.value for f in fields}
    # dotted key is quoted, not split: $.a.b is the nested {"a": {"b": 9}}
    assert by_path['$["a.b"][""]'] == 1
    assert by_path["$.a.b"] == 9
    assert by_path['$[""][""][""]'] == "deep"
    assert by_path['$["0"]'] == "zero"
    assert not any(p.startswith("$.n") for p in paths)  # None values are not fields


def test_child_path_quotes_only_non_identifiers():
    assert child_path("$", "hotel_id") == "$.hotel_id"
    assert child_path("$", "a.b") == '$["a.b"]'
    assert child_path("$", "") == '$[""]'
    assert child_path("$", "9lives") == '$["9lives"]'


@pytest.mark.parametrize("path", ["x.a", "$.a[", "$..a", '$["a.b"', "$.c", "$.a.b.c", "$.a[0]"])
def test_resolve_rejects_malformed_or_missing(path):
    with pytest.raises(PathError):
        resolve({"a": {"b": 1}, "a b": 2}, path)


scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
docs = st.recursive(scalars, lambda ch: st.lists(ch, max_size=3) | st.dictionaries(st.text(max_size=4), ch, max_size=3),
                    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=4), docs, max_size=4))
def test_every_field_path_resolves_to_its_value(doc):
    for f in iter_fields(doc):
        assert resolve(doc, f.path) == f.value


def test_singular():
    assert [singular(w) for w in ["orders", "entries", "ids", "boxes", "class", "us"]] == \
        ["order", "entry", "id", "box", "class", "us"]


def test_qualified_id_names():
    doc = {"hotels": [{"id": "H1", "name": "Alpha"}, {"id": "H2", "name": "Beta"}], "id": "TOP"}
    got = candidates("hotel_id", {"type": "string"}, doc)
    assert [(c.path, c.value, c.score) for c in got] == [("$.hotels[0].id", "H1", 2), ("$.hotels[1].id", "H2", 2)]
    assert [c.value for c in candidates("hotel_name", {"type": "string"}, doc)] == ["Alpha", "Beta"]
    # the bare key matches exactly (score 3) wherever it occurs
    assert {(c.value, c.score) for c in candidates("id", {"type": "string"}, doc)} == {("H1", 3), ("H2", 3), ("TOP", 3)}


def test_numbered_params_match_their_base_name():
    doc = {"file_name": "a.txt", "dir": {"file_name": "b.txt"}}
    got = candidates("file_name2", {"type": "string"}, doc)
    assert [(c.value, c.score) for c in got] == [("a.txt", 2), ("b.txt", 2)]
    assert match_score("file_name2", ("file_name",)) == 2
    assert match_score("name_2", ("name",)) == 2
    assert match_score("dest_file_name", ("file_name",)) == 1
    assert match_score("dest_name", ("name",)) == 0  # a suffix match needs a compound field name
    assert match_score("file", ("file_name",)) == 0


def test_array_param_takes_a_single_element_as_one_item_list():
    schema = {"type": "array", "items": {"type": "string"}}
    got = candidates("file_names", schema, {"file_name": "a.txt", "size": 3})
    assert [(c.path, c.value) for c in got] == [("$.file_name", ["a.txt"])]
    # a whole list matches as is, and each element as a one-item list
    got = candidates("tags", schema, {"tags": ["x", "y"]})
    assert [(c.path, c.value) for c in got] == [("$.tags", ["x", "y"]), ("$.tags[0]", ["x"]), ("$.tags[1]", ["y"])]
    # element type is checked
    assert candidates("file_names", schema, {"file_name": 7}) == []


def test_type_checks_exclude_bools_from_numbers_and_honour_enums():
    assert not type_ok(True, {"type": "integer"})
    assert type_ok(3, {"type": "number"})
    assert not type_ok(3.5, {"type": "integer"})
    assert not type_ok("x", {"type": "string", "enum": ["a"]})
    assert type_ok(None, {"type": ["string", "null"]})
    assert not type_ok(["a", 1], {"type": "array", "items": {"type": "string"}})
    got = candidates("id", {"type": "integer"}, {"users": [{"id": "U"}, {"id": 3}, {"id": True}]})
    assert [c.value for c in got] == [3]


def test_candidates_siblings_carry_neighbouring_values():
    doc = {"orders": [{"order_id": "O1", "status": "Pending"}]}
    (c,) = candidates("order_id", {"type": "string"}, doc)
    assert "pending" in c.siblings


TREE = {"fs": {"root": {"ann": {"type": "directory", "contents": {
    "a.txt": {"type": "file", "content": "hi"},
    "docs": {"type": "directory", "contents": {"deep.md": {"type": "file", "content": ""}}}}}}}}


def test_keys_of_a_map_of_objects_are_fields_at_key_paths_with_the_entry_strings_as_siblings():
    keys = {f.path: f for f in iter_fields(TREE) if f.path.endswith("~")}
    a = keys['$.fs.root.ann.contents["a.txt"]~']
    assert (a.value, a.names, a.siblings) == ("a.txt", ("content_key",), frozenset({"file", "hi"}))
    assert keys["$.fs.root.ann.contents.docs.contents[\"deep.md\"]~"].value == "deep.md"
    assert keys["$.fs.root.ann~"].names == ("root_key",)
    # a map holding any non-object value is not a map of entries: its keys are not fields
    assert not any(f.path.endswith("~") for f in iter_fields({"m": {"a": {"x": 1}, "b": 2}}))


@pytest.mark.parametrize("path", ["$~", "$.l[0]~", '$.m["zz"]~', "$.m.a.x~~"])
def test_a_key_path_must_end_an_existing_object_key(path):
    with pytest.raises(PathError):
        resolve({"m": {"a": {"x": 1}}, "l": [{"y": 2}]}, path)


def test_declared_aliases_and_path_patterns_fill_a_parameter_as_qualified_matches():
    schema = {"type": "string"}
    assert candidates("file_name", schema, TREE) == []
    top = candidates("file_name", schema, TREE, ("$.fs.root.*.contents.*~",))
    assert [(c.path, c.value, c.score) for c in top] == [('$.fs.root.ann.contents["a.txt"]~', "a.txt", 2),
                                                        ("$.fs.root.ann.contents.docs~", "docs", 2)]
    listing = {"current_directory_content": ["a.txt", "docs"]}
    assert [c.path for c in candidates("folder", schema, listing, ("current_directory_content",))] == [
        "$.current_directory_content[0]", "$.current_directory_content[1]"]
    assert candidates("folder", schema, listing) == []


def test_an_aliased_element_fills_an_array_parameter_as_a_one_item_list():
    product = {"product_id": "P1", "variants": {"11": {"item_id": "11", "price": 3}, "12": {"item_id": "12"}}}
    schema = {"type": "array", "items": {"type": "string"}}
    plain = candidates("new_item_ids", schema, product)
    assert {c.score for c in plain} == {1}  # `item_id` only as a suffix of the singular `new_item_id`
    aliased = candidates("new_item_ids", schema, product, ("$.variants.*.item_id",))
    assert [(c.path, c.value, c.score) for c in aliased if c.score == 2] == [
        ('$.variants["11"].item_id', ["11"], 2), ('$.variants["12"].item_id', ["12"], 2)]


def test_index_cache_keeps_its_field_bound_over_many_documents_and_the_recent_ones():
    cache = IndexCache(max_fields=50)
    docs = [{"user_id": f"u{i}", "name": f"N{i}", "orders": [i, i + 1]} for i in range(1000)]  # 5 fields each
    for doc in docs:
        assert cache.get(doc).doc is doc
        assert cache.fields <= 50
    assert len(cache) == 10
    held = {i: cache.get(docs[i]) for i in range(-10, 0)}  # all hits, oldest first
    assert cache.get(docs[-10]) is held[-10]  # used again: the least recently used is now docs[-9]
    cache.get({"other": 1, "more": 2, "yet": 3, "four": 4, "five": 5})  # evicts docs[-9] only
    assert cache.get(docs[-10]) is held[-10] and cache.get(docs[-1]) is held[-1]
    assert cache.get(docs[-9]) is not held[-9]  # rebuilt


def test_index_cache_keeps_one_document_larger_than_its_bound():
    cache = IndexCache(max_fields=3)
    big = {f"k{i}": i for i in range(10)}
    assert cache.get(big) is cache.get(big)
    assert len(cache) == 1


# ----- code_check -----------------------------------------------------------------------------------------

C0 = {"user": {"name": "Ann Lee"}, "currency": "EUR"}


def good_trajectory():
    """search (self_create city) -> book (prev_output hotel_id, initial_state name) -> pay (prev_user_msg city)."""
    search = call("search_hotels", {"city": "Oslo"}, result={"hotels": [{"id": "H1"}, {"id": "H2"}]}, call_id="a")
    book = call("book_hotel", {"hotel_id": "H2", "guest_name": "Ann Lee", "hotel_ids": ["H1"]}, result={"booking": "B7"},
                prov={"hotel_id": ArgProvenance(tag=Tag.prev_output, turn=0, call=0, path="$.hotels[1].id",
                                                selector=Selector(noun="hotel", position=2)),
                      "guest_name": ArgProvenance(tag=Tag.initial_state, path="$.user.name"),
                      "hotel_ids": ArgProvenance(tag=Tag.prev_output, turn=0, call=0, path="$.hotels[0].id",
                                                 selector=Selector(noun="hotel", position=1))},
                call_id="b")
    pay = call("pay", {"booking": "B7", "city": "Oslo", "note": "fast please", "currency": "EUR"}, result={"paid": True},
               prov={"booking": ArgProvenance(tag=Tag.prev_output, turn=1, call=0, path="$.booking"),
                     "currency": ArgProvenance(tag=Tag.fallback, fallback_from=Tag.prev_output, path="$.currency"),
                     "city": ArgProvenance(tag=Tag.prev_user_msg, turn=0),
                     "note": ArgProvenance(tag=Tag.fallback, fallback_from=Tag.prev_output)},
               call_id="c")
    turns = [
        Turn(index=0, state="s1", transition=0, user_message='Find hotels (city "Oslo").', calls=[search]),
        Turn(index=1, state="s2", transition=1, user_message='Book the second hotel for guest name "Ann Lee", keeping the first in mind.',
             calls=[book]),
        Turn(index=2, state="s3", transition=2, user_message="Pay it in the city I said, in EUR, note: Fast  please.",
             calls=[pay]),
    ]
    return Trajectory(id="t", toolset="demo", seed=1, c0=C0, turns=turns)


def test_correct_trajectory_passes():
    assert code_check(good_trajectory()) == []


def _with(traj, turn, idx, **update):
    t = traj.model_copy(deep=True)
    c = t.turns[turn].calls[idx]
    t.turns[turn].calls[idx] = c.model_copy(update=update)
    return t


def _only_problem(traj, *fragments):
    problems = code_check(traj)
    assert len(problems) == 1, problems
    for frag in fragments:
        assert frag in problems[0], problems[0]
    return problems[0]


def test_prev_output_pointing_at_a_later_call_is_flagged():
    t = good_trajectory()
    prov = dict(t.turns[1].calls[0].args_prov)
    prov["hotel_id"] = ArgProvenance(tag=Tag.prev_output, turn=2, call=0, path="$.paid")
    _only_problem(_with(t, 1, 0, args_prov=prov), "turn 1 call 0 (book_hotel) arg hotel_id", "not earlier")


def test_prev_output_pointing_at_itself_is_flagged():
    t = good_trajectory()
    prov = dict(t.turns[1].calls[0].args_prov)
    prov["hotel_id"] = ArgProvenance(tag=Tag.prev_output, turn=1, call=0, path="$.booking")
    _only_problem(_with(t, 1, 0, args_prov=prov), "not earlier")


def test_prev_output_value_differing_from_result_is_flagged():
    t = good_trajectory()
    args = {**t.turns[1].calls[0].args_exec, "hotel_id": "H9"}
    _only_problem(_with(t, 1, 0, args_exec=args), "arg hotel_id", "'H9' differs from 'H2'")


def test_prev_output_path_missing_in_result_is_flagged():
    t = good_trajectory()
    prov = dict(t.turns[1].calls[0].args_prov)
    prov["hotel_id"] = ArgProvenance(tag=Tag.prev_output, turn=0, call=0, path="$.hotels[5].id")
    _only_problem(_with(t, 1, 0, args_prov=prov), "not found")


def test_self_create_value_not_in_user_message_is_flagged():
    t = good_trajectory()
    problems = code_check(_with(t, 0, 0, args_exec={"city": "Osaka"}))
    assert "turn 0 call 0 (search_hotels) arg city: new value 'Osaka' not stated" in problems[0]
    # the user now stated two cities, and the later "city I said" does not say which
    assert problems[1:] == ["turn 2 call 0 (pay) arg city: ambiguous reference: 'Oslo' is one among several and "
                            'nothing says which ({"latest": true, "noun": "city"})']


def test_initial_state_value_must_match_c0_and_be_stated():
    t = good_trajectory()
    args = {**t.turns[1].calls[0].args_exec, "guest_name": "Bob Ray"}
    _only_problem(_with(t, 1, 0, args_exec=args), "differs from c0")
    t2 = good_trajectory()
    t2.turns[1].user_message = "Book the second one, and the first."
    _only_problem(t2, "config value 'Ann Lee' not stated")


def test_initial_state_from_a_key_path_checks_the_key_itself():
    tree = {"fs": {"contents": {"a.txt": {"type": "file"}}}}
    cat = call("cat", {"file_name": "a.txt"}, result={"file_content": ""},
               prov={"file_name": ArgProvenance(tag=Tag.initial_state, path='$.fs.contents["a.txt"]~')})
    turn = Turn(index=0, state="s", transition=0, user_message='Show "a.txt".', calls=[cat])
    traj = Trajectory(id="t", toolset="demo", seed=1, c0=tree, turns=[turn])
    assert code_check(traj) == []
    _only_problem(_with(traj, 0, 0, args_exec={"file_name": "b.txt"}), "differs from c0")
    moved = {"file_name": ArgProvenance(tag=Tag.initial_state, path='$.fs.contents["b.txt"]~')}
    _only_problem(_with(traj, 0, 0, args_prov=moved), "not found")


def test_prev_user_msg_whose_anchor_lacks_the_value_is_flagged():
    t = good_trajectory()
    prov = dict(t.turns[2].calls[0].args_prov)
    prov["city"] = ArgProvenance(tag=Tag.prev_user_msg, turn=1)  # turn 1's message never says Oslo
    _only_problem(_with(t, 2, 0, args_prov=prov), "arg city", "anchor turn 1")


def test_prev_user_msg_anchor_must_be_earlier():
    t = good_trajectory()
    prov = dict(t.turns[2].calls[0].args_prov)
    prov["city"] = ArgProvenance(tag=Tag.prev_user_msg, turn=2)
    _only_problem(_with(t, 2, 0, args_prov=prov), "not an earlier turn")


def test_fallback_without_fallback_from_is_flagged():
    t = good_trajectory()
    prov = dict(t.turns[2].calls[0].args_prov)
    prov["note"] = ArgProvenance(tag=Tag.fallback)
    _only_problem(_with(t, 2, 0, args_prov=prov), "arg note", "fallback without fallback_from")


def test_fallback_located_source_is_checked_like_its_kind():
    t = good_trajectory()
    prov = dict(t.turns[2].calls[0].args_prov)
    prov["currency"] = ArgProvenance(tag=Tag.fallback, fallback_from=Tag.prev_output, path="$.user.name")
    _only_problem(_with(t, 2, 0, args_prov=prov), "arg currency", "differs")


def test_fallback_from_an_earlier_output_or_message_is_flagged():
    t = good_trajectory()
    for located in (ArgProvenance(tag=Tag.fallback, fallback_from=Tag.initial_state, turn=1, call=0, path="$.booking"),
                    ArgProvenance(tag=Tag.fallback, fallback_from=Tag.initial_state, turn=0)):
        prov = {**t.turns[2].calls[0].args_prov, "booking": located}
        _only_problem(_with(t, 2, 0, args_prov=prov), "arg booking", "P_f recovers only from c0 or a new value")


def test_arguments_without_provenance_and_failed_calls_are_flagged():
    t = good_trajectory()
    _only_problem(_with(t, 0, 0, args_prov={}), "arguments without provenance", "city")
    problems = code_check(_with(t, 0, 0, ok=False, error="nope"))
    assert any("committed call failed: nope" in p for p in problems)


def test_negative_reference_indices_are_flagged():
    t = good_trajectory()
    prov = dict(t.turns[1].calls[0].args_prov)
    prov["booking"] = ArgProvenance(tag=Tag.prev_output, turn=-1, call=0, path="$.paid")  # = turn 2, a later call
    t = _with(t, 1, 0, args_prov=prov, args_exec={**t.turns[1].calls[0].args_exec, "booking": True})
    assert code_check(t)


def test_mentions_is_case_and_whitespace_insensitive_and_handles_lists():
    assert mentions("Pay with  EUR now", "eur")
    assert mentions("ids H1 and H2", ["H1", "H2"])
    assert not mentions("ids H1", ["H1", "H2"])
    assert mentions("quantity 3", 3)
    assert not mentions("quantity three", 3)


def test_a_lookup_table_names_its_keys_and_values_and_a_status_text_is_no_field():
    """{"user_map": {"Quinn": "USR001"}} gives users (its keys) and user ids (its values); a "message" beside a
    status flag is what the tool said about the call, never a message to send on."""
    c0 = {"MessageAPI": {"user_map": {"Quinn": "USR001", "Eva": "USR002"}}}
    assert [(c.path, c.value) for c in candidates("user", {"type": "string"}, c0)] == [
        ('$.MessageAPI.user_map.Quinn~', "Quinn"), ('$.MessageAPI.user_map.Eva~', "Eva")]
    assert [c.value for c in candidates("user_id", {"type": "string"}, c0)] == ["USR001", "USR002"]
    for path, value in (('$.MessageAPI.user_map.Quinn~', "Quinn"), ('$.MessageAPI.user_map.Eva', "USR002")):
        assert resolve(c0, path) == value
    sent = {"sent_status": True, "message_id": 7, "message": "Message sent to 'USR002' successfully."}
    assert candidates("message", {"type": "string"}, sent) == []
    assert [c.value for c in candidates("message", {"type": "string"}, {"message": "hi there"})] == ["hi there"]


def test_an_array_takes_an_aliased_listing_whole_and_single_aliased_elements_only_without_one():
    array = {"type": "array", "items": {"type": "string"}}
    listing = {"stock_list": ["AAPL", "GOOG"]}
    assert [(c.path, c.value) for c in candidates("stocks", array, listing, ("stock_list",))] == \
        [("$.stock_list", ["AAPL", "GOOG"])]
    variants = {"variants": {"1": {"item_id": "111"}, "2": {"item_id": "222"}}}
    found = candidates("new_item_ids", {"type": "array", "items": {"type": "string"}}, variants,
                       ("$.variants.*.item_id",))
    assert {tuple(c.value) for c in found} == {("111",), ("222",)}  # no listing to take whole: one element


def test_a_value_with_a_letter_at_an_edge_is_mentioned_only_as_a_word_of_its_own():
    assert not mentions("Fly me to Amsterdam.", "AMS") and mentions("Fly me to AMS.", "AMS")
    assert not mentions("Open the reports folder.", "report") and mentions("Open notes.txt", "notes")
    assert mentions("Pay $87.00", 87.0) and mentions("Flight FL123 then", "FL123")
