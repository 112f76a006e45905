"""Generic wording for tools without a phrase book: requests of the kind of action a tool's name names, in several
wordings, not the description's sentence; slots where the thing is named; the setting every tool takes left to the
renderer; unknown verbs keep the description; and a toolset of a user's own worded that way end to end."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from sap.agents.judge import phrase_verbs, stem
from sap.api import synthesize
from sap.audit import audit_records
from sap.model import ToolSpec
from sap.provenance.generic_phrases import generic_phrases
from sap.provenance.leaks import find_leaks, names_of
from sap.provenance.phrasebook import PhraseBookError, placeholders
from sap.toolsets import load_toolset


def _spec(name: str, description: str, *required: str, owner: str = "notes") -> ToolSpec:
    """A tool of the notes server below: string parameters, every one required."""
    return ToolSpec(name=name, description=description, owner=owner, parameters={
        "type": "object", "properties": {p: {"type": "string"} for p in required}, "required": list(required)})


NOTES = {s.name: s for s in [
    _spec("notes_read_note", "Read the complete text of a note from the vault as plain text.", "vault", "path"),
    _spec("notes_list_folder", "Get a detailed listing of every note and folder in a specified path.", "vault",
          "path"),
    _spec("notes_create_folder", "Create a new folder or make sure a folder exists in the vault.", "vault", "path"),
    _spec("notes_move_note", "Move or rename notes and folders inside the vault.", "vault", "source", "destination"),
    _spec("notes_search_notes", "Recursively search for notes whose names match a glob pattern.", "vault", "path",
          "pattern"),
    _spec("notes_sync", "Synchronise the vault with the remote copy right now.", "vault"),
]}


def _opening(spec: ToolSpec) -> str:
    """The first five words of a description, lower case."""
    return " ".join(re.findall(r"[a-z0-9]+", spec.description.lower())[:5])


@pytest.mark.parametrize("name", [n for n in NOTES if n != "notes_sync"])
def test_a_known_verb_gives_several_requests_none_of_them_the_description(name):
    phrases = generic_phrases(NOTES[name], NOTES)
    assert len(set(phrases.requests)) >= 4
    tools, params = names_of(NOTES)
    for request in phrases.requests:
        assert _opening(NOTES[name]) not in " ".join(re.findall(r"[a-z0-9]+", request.lower())), request
        assert find_leaks(re.sub(r"\{\w+\}", "X", request), tools, params) == [], request
        assert set(placeholders(request)) <= set(NOTES[name].required), request
        assert "{vault}" not in request  # every tool of the server takes it: the setting, said by the renderer


def test_slots_sit_where_the_thing_is_named_and_a_destination_takes_to():
    read = generic_phrases(NOTES["notes_read_note"], NOTES)
    assert all("note {path}" in r for r in read.requests) and read.nouns["path"] == "note"
    listing = generic_phrases(NOTES["notes_list_folder"], NOTES)
    assert any("what's in the folder {path}" in r for r in listing.requests)
    move = generic_phrases(NOTES["notes_move_note"], NOTES)
    assert all(r.endswith(" to {destination}") and "note {source}" in r for r in move.requests)
    search = generic_phrases(NOTES["notes_search_notes"], NOTES)
    assert all("in {path}" in r and "matching {pattern}" in r for r in search.requests)
    create = generic_phrases(NOTES["notes_create_folder"], NOTES)
    assert any(r.startswith("make a new folder {path}") for r in create.requests)


def test_an_unknown_verb_keeps_the_description_as_an_imperative():
    assert generic_phrases(NOTES["notes_sync"], NOTES).requests == (
        "synchronise the vault with the remote copy right now",)
    transfer = _spec("transfer", "Move money between two accounts.", "amount", owner="bank")
    assert generic_phrases(transfer).requests == ("move money between two accounts",)


def test_the_judge_takes_a_generic_request_verb_as_naming_the_task():
    memo = _spec("read_memo", "Fetches stored content.", "memo_id", owner=None)
    verbs = phrase_verbs({"read_memo": memo})["read_memo"]
    assert {stem("show"), stem("pull")} <= verbs


def test_a_user_toolset_without_a_phrase_book_is_asked_for_in_the_users_words():
    ts = load_toolset(str(Path(__file__).parent / "notes_domain.py"))
    records = synthesize(ts, 8, seed=2, mix={"base": 1.0}).records
    report = audit_records(records)
    assert len(records) == 8 and report.looked["dictated_call"] >= 16
    assert report.share("dictated_call") == 0 and report.share("internals_leak") == 0
    users = [m["content"] for r in records for m in r["messages"] if m["role"] == "user"]
    assert any(re.search(r"\bthe note \S+\.txt\b", u) for u in users), users
    assert len({u.split(",")[0] for u in users}) >= len(users) * 0.8  # not one sentence per tool


def _notes_copy(tmp_path: Path, phrases: str | None) -> str:
    """tests/notes_domain.py copied into tmp_path, with `phrases` as the phrase file beside it when given."""
    module = tmp_path / "vault.py"
    module.write_text((Path(__file__).parent / "notes_domain.py").read_text(encoding="utf-8"), encoding="utf-8")
    if phrases is not None:
        (tmp_path / "vault.phrases.toml").write_text(phrases, encoding="utf-8")
    return str(module)


def test_a_phrase_file_beside_a_domain_module_words_its_tools(tmp_path):
    path = _notes_copy(tmp_path, '[tools.read_note]\nrequests = ["dig out my jotting {path}", '
                                 '"fish out the jotting {path}"]\nnouns = { path = "jotting" }\n')
    records = synthesize(load_toolset(path), 6, seed=2, mix={"base": 1.0}).records
    reads = [(m, r) for r in records for m, nxt in zip(r["messages"], r["messages"][1:])
             if m["role"] == "user" and nxt.get("tool_calls")
             and [c["function"]["name"] for c in nxt["tool_calls"]] == ["read_note"]]
    assert reads and all("jotting" in m["content"] for m, _ in reads), [m["content"] for m, _ in reads]
    others = [m["content"] for r in records for m in r["messages"] if m["role"] == "user"]
    assert any("the folder" in u for u in others)  # tools the file leaves out keep the generic wording


def test_a_bad_phrase_file_beside_a_module_is_refused_naming_file_tool_and_field(tmp_path):
    path = _notes_copy(tmp_path, '[tools.read_note]\nrequests = ["dig out {note}"]\n')
    with pytest.raises(PhraseBookError) as err:
        load_toolset(path)
    assert "vault.phrases.toml" in str(err.value) and "read_note" in str(err.value) and "requests" in str(err.value)
    assert "{note}" in str(err.value)


def test_a_write_says_what_goes_in_and_what_is_told_of_a_thing_comes_after_it():
    write = _spec("notes_write_note", "Create a new note or completely overwrite an existing note.", "vault", "path",
                  "content")
    requests = generic_phrases(write, {**NOTES, write.name: write}).requests
    assert all("{content}" in r and "note {path}" in r for r in requests), requests
    info = _spec("notes_get_note_info", "Retrieve detailed metadata about a note.", "vault", "path")
    told = generic_phrases(info, {**NOTES, info.name: info})
    assert all("the info on the note {path}" in r for r in told.requests) and told.nouns["path"] == "note"
