"""`sap stats` on data sap did not write: BFCL multi-turn, OpenAI-messages JSONL; new figures on sap records."""
from __future__ import annotations

import json

import pytest

from sap.cli import main
from sap.provenance.external import (bfcl_dialogue, detect_format, external_stats, infer_nodes, load_any,
                                     openai_dialogue, parse_call)
from sap.provenance.stats import dataset_stats

# ---------------------------------------------------------------- a hand-written BFCL pair

BFCL_QUESTION = {
    "id": "multi_turn_base_0",
    "question": [
        [{"role": "user", "content": "Go into the 'workspace' folder and make a new directory called 'drafts'."}],
        [{"role": "user", "content": "Move notes.txt into drafts."}],
        [{"role": "user", "content": "Go into it and list everything, hidden files included."}],
        [{"role": "user", "content": "Show the last 3 lines of notes.txt, then copy notes.txt into archive."}],
        [{"role": "user", "content": "Remove the stale log file there."}],
        [{"role": "user", "content": "Confirm it is gone and count the lines of the summary."}],
    ],
    "initial_config": {"GorillaFileSystem": {"root": {"alice": {"type": "directory", "contents": {
        "workspace": {"type": "directory", "contents": {
            "notes.txt": {"type": "file", "content": "hello"},
            "old_log.txt": {"type": "file", "content": "stale"},
            "archive": {"type": "directory", "contents": {}}}}}}}}},
    "path": ["GorillaFileSystem.cd", "GorillaFileSystem.mkdir", "GorillaFileSystem.mv"],
    "involved_classes": ["GorillaFileSystem"],
}
BFCL_ANSWER = {
    "id": "multi_turn_base_0",
    "ground_truth": [
        ["cd(folder='workspace')", "mkdir(dir_name='drafts')"],
        ["mv(source='notes.txt', destination='drafts')"],
        ["cd(folder='drafts')", "ls(a=True)"],
        ["tail(file_name='notes.txt', lines=3)", "GorillaFileSystem.cp(source='notes.txt', destination='archive')"],
        ["rm(file_name='old_log.txt')"],
        ["find(name='old_log.txt')", "wc(file_name='summary.md', mode='l')"],
    ],
}
# (turn, argument, inferred tag, L): SAP 3.4 gives L = 0 to every tag but prev_output and prev_user_msg
BFCL_EXPECTED = [
    (0, "folder", "self_create", 0), (0, "dir_name", "self_create", 0),
    (1, "source", "self_create", 0), (1, "destination", "self_create", 0),   # 'drafts' said at turn 0: reuse, not L
    (2, "folder", "prev_user_msg", 2), (2, "a", "unknown", 0),               # a boolean cannot be traced
    (3, "file_name", "self_create", 0), (3, "lines", "self_create", 0),
    (3, "source", "self_create", 0), (3, "destination", "self_create", 0),
    (4, "file_name", "initial_state", 0),                                      # only in the file system
    (5, "name", "initial_state", 0),                                           # same value as turn 4's: still L = 0
    (5, "file_name", "unknown", 0), (5, "mode", "unknown", 0),                 # in no message, not in the config
]
BFCL_REUSE = [0, 0, 0, 1, 2, 0, 2, 0, 2, 0, 0, 1, 0, 0]  # turns since an equal value was first used or said


def _write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _bfcl_files(tmp_path):
    questions = _write_jsonl(tmp_path / "BFCL_v3_multi_turn_base.json", [BFCL_QUESTION])
    (tmp_path / "possible_answer").mkdir()
    _write_jsonl(tmp_path / "possible_answer" / "BFCL_v3_multi_turn_base.json", [BFCL_ANSWER])
    return questions


def test_parse_call_reads_names_and_literals_without_eval():
    assert parse_call("cd(folder='document')") == ("cd", {"folder": "document"})
    assert parse_call("TwitterAPI.post_tweet(content='hi', tags=['#a', '#b'], n=-2, x=1.5, ok=False)") == (
        "TwitterAPI.post_tweet", {"content": "hi", "tags": ["#a", "#b"], "n": -2, "x": 1.5, "ok": False})
    assert parse_call("f('a', 2)") == ("f", {"_0": "a", "_1": 2})
    for bad in ("rm(file_name=__import__('os').system('true'))", "x = 1", "cd(folder=", "f()()", "f(**kw)"):
        with pytest.raises(ValueError):
            parse_call(bad)


def test_bfcl_origins_and_chain_lengths_are_exact(tmp_path):
    fmt, records = load_any(_bfcl_files(tmp_path))
    assert fmt == "bfcl"
    nodes = infer_nodes(bfcl_dialogue(records[0], replay=False))
    assert [(n.turn, n.name, n.tag, n.chain_length) for n in nodes] == BFCL_EXPECTED
    assert [n.reuse_length for n in nodes] == BFCL_REUSE


def test_bfcl_dataset_figures(tmp_path):
    fmt, records = load_any(_bfcl_files(tmp_path))
    stats = external_stats(fmt, records, replay=False)
    assert stats["records"] == 1 and stats["arguments"] == 14
    assert stats["tag_distribution"] == {"initial_state": 2 / 14, "prev_output": 0.0, "self_create": 8 / 14,
                                         "prev_user_msg": 1 / 14, "unknown": 3 / 14}
    assert "fallback" not in stats["tag_distribution"] and stats["fallback_rate"] is None
    assert stats["mean_chain_length"] == 2 / 14 and stats["max_chain_length"] == 2
    assert stats["dependent_share"] == 1 / 14
    assert stats["chain_length_counts"] == {"0": 13, "2": 1}
    assert stats["value_reuse"] == {"mean_chain_length": 8 / 14, "max_chain_length": 2, "dependent_share": 5 / 14}
    # Tables 5/6 columns: P_u inside P_c, the inferred "unknown" bucket beside them, no P_f in outside data
    assert stats["source_columns"] == {"P_i": 2 / 14, "P_o": 0.0, "P_c": 9 / 14, "P_f": None, "unknown": 3 / 14}
    assert stats["mean_turns"] == 6 and stats["mean_calls"] == 10
    assert stats["tool_counts"]["GorillaFileSystem.cp"] == 1 and stats["tool_counts"]["cd"] == 2
    # BFCL question files carry no tool docs and no parallel calls: these figures are unknown, not zero
    assert stats["tool_coverage"] is None and stats["uncalled_tools"] is None and stats["parallel_share"] is None
    assert stats["kind_counts"] == {"base": 1}
    assert stats["frequency_spread"] == 2.0


def test_bfcl_coverage_and_kind_when_the_record_has_func_docs(tmp_path):
    q = {**BFCL_QUESTION, "id": "multi_turn_miss_param_7",
         "function": [{"name": n} for n in ("cd", "mkdir", "mv", "ls", "tail", "cp", "rm", "find", "wc", "sort")]}
    a = {**BFCL_ANSWER, "id": "multi_turn_miss_param_7"}
    questions = _write_jsonl(tmp_path / "q.json", [q])
    answers = _write_jsonl(tmp_path / "a.json", [a])
    stats = external_stats(*load_any(questions, answers))
    assert stats["kind_counts"] == {"miss_param": 1}
    assert stats["tool_coverage"] == 0.9  # GorillaFileSystem.cp counts for cp; sort is never called
    assert stats["uncalled_tools"] == 1


def test_bfcl_answers_are_found_beside_or_given(tmp_path, capsys):
    questions = _bfcl_files(tmp_path)
    assert main(["stats", str(questions), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["format"] == "bfcl" and stats["arguments"] == 14
    lone = _write_jsonl(tmp_path / "lone.json", [BFCL_QUESTION])
    assert main(["stats", str(lone)]) == 2
    err = capsys.readouterr().err
    assert "--answers" in err and err.count("\n") == 1
    assert main(["stats", str(lone), "--answers",
                 str(tmp_path / "possible_answer" / "BFCL_v3_multi_turn_base.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("format bfcl: records 1, arguments 14") and "unknown 21.4%" in out


# ---------------------------------------------------------------- OpenAI messages from another generator

def _tc(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


OPENAI_RECORD = {
    "conversation_id": "gen-42",
    "messages": [
        {"role": "system", "content": "You are a store assistant."},
        {"role": "user", "content": "Find the orders of user mia_li_3668."},
        {"role": "assistant", "content": None, "tool_calls": [_tc("a", "get_user_details", {"user_id": "mia_li_3668"})]},
        {"role": "tool", "tool_call_id": "a",
         "content": json.dumps({"user_id": "mia_li_3668", "nickname": "Zoë", "orders": ["#W5918442", "#W4817420"]})},
        {"role": "assistant", "content": "She has two orders."},
        {"role": "user", "content": "Thanks!"},
        {"role": "assistant", "content": "You're welcome."},
        {"role": "user", "content": "Cancel the second one, it is no longer needed. Also fix my nickname."},
        {"role": "assistant", "content": None, "tool_calls": [
            _tc("b", "get_order_details", {"order_id": "#W4817420"}),
            _tc("c", "get_user_details", {"user_id": "mia_li_3668"})]},
        {"role": "tool", "tool_call_id": "b", "content": json.dumps({"order_id": "#W4817420", "status": "pending"})},
        {"role": "tool", "tool_call_id": "c", "content": json.dumps({"user_id": "mia_li_3668"})},
        {"role": "assistant", "content": None, "tool_calls": [
            _tc("d", "cancel_pending_order", {"order_id": "#W4817420", "reason": "no longer needed"}),
            _tc("e", "set_nickname", {"name": "Zoë"})]},
        {"role": "tool", "tool_call_id": "d", "content": "{\"status\": \"cancelled\"}"},
        {"role": "tool", "tool_call_id": "e", "content": "{}"},
        {"role": "assistant", "content": "Done."},
    ],
    "tools": [{"type": "function", "function": {"name": n}} for n in
              ("get_user_details", "get_order_details", "cancel_pending_order", "set_nickname", "return_items")],
}


def test_openai_value_from_a_tool_return_is_prev_output_with_its_chain_length():
    nodes = infer_nodes(openai_dialogue(OPENAI_RECORD))
    assert [(n.turn, n.name, n.tag, n.chain_length) for n in nodes] == [
        (0, "user_id", "self_create", 0),
        (2, "order_id", "prev_output", 2),    # returned by get_user_details at turn 0, used at turn 2
        (2, "user_id", "prev_user_msg", 2),
        (2, "order_id", "prev_output", 2),    # also in get_order_details' return at turn 2: the origin stays 0
        (2, "reason", "self_create", 0),
        (2, "name", "prev_output", 2),        # matched in the decoded JSON, not the \\u-escaped text
    ]


def test_openai_dataset_figures(tmp_path):
    path = _write_jsonl(tmp_path / "other.jsonl", [OPENAI_RECORD])
    fmt, records = load_any(path)
    assert fmt == "openai"
    stats = external_stats(fmt, records, replay=False)
    assert stats["records"] == 1 and stats["arguments"] == 6 and stats["mean_turns"] == 3 and stats["mean_calls"] == 5
    assert stats["tag_distribution"]["prev_output"] == 0.5 and stats["tag_distribution"]["unknown"] == 0.0
    assert stats["max_chain_length"] == 2 and stats["dependent_share"] == 4 / 6
    assert stats["parallel_share"] == 1.0
    assert stats["tool_coverage"] == 0.8 and stats["uncalled_tools"] == 1 and stats["frequency_spread"] == 2.0


def test_format_detection(tmp_path, capsys):
    sap_like = {"id": "s", "messages": [], "provenance": [], "tools": []}
    assert detect_format(sap_like) == "sap"
    assert detect_format(OPENAI_RECORD) == "openai"
    assert detect_format(BFCL_QUESTION) == "bfcl"
    with pytest.raises(ValueError, match="unknown record format"):
        detect_format({"id": "x", "text": "hello"})
    assert load_any(_write_jsonl(tmp_path / "s.jsonl", [sap_like]))[0] == "sap"
    mixed = _write_jsonl(tmp_path / "mixed.jsonl", [sap_like, OPENAI_RECORD])
    with pytest.raises(ValueError, match="mixed.jsonl:2"):
        load_any(mixed)
    other = _write_jsonl(tmp_path / "o.jsonl", [OPENAI_RECORD])
    assert main(["stats", str(other), "--answers", str(other)]) == 2
    assert "for BFCL question files" in capsys.readouterr().err
    assert main(["stats", str(other), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "openai"


# ---------------------------------------------------------------- new figures on sap records

def _sap_record(rid, calls_per_message, meta=None):
    """A sap record with one turn; each inner list of tool names is one assistant message."""
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "do it"}]
    prov = []
    for i, names in enumerate(calls_per_message):
        ids = [f"{rid}_{i}_{j}" for j in range(len(names))]
        messages.append({"role": "assistant", "content": None,
                         "tool_calls": [_tc(cid, n, {}) for cid, n in zip(ids, names)]})
        messages += [{"role": "tool", "tool_call_id": cid, "content": "{}"} for cid in ids]
        prov += [{"call_id": cid, "turn": 0, "name": n, "args": {}} for cid, n in zip(ids, names)]
    record = {"id": rid, "messages": messages, "provenance": prov, "initial_config": {},
              "tools": [{"type": "function", "function": {"name": n}} for n in ("a", "b", "c", "d")]}
    if meta is not None:
        record["meta"] = meta
    return record


def test_parallel_share_kind_counts_and_spread_on_sap_records():
    records = [
        _sap_record("p", [["a", "b"], ["a"]], {"kind": "parallel"}),
        _sap_record("q", [["a"], ["a"]], {"rewrite_kind": "paraphrase"}),
        _sap_record("r", [["b"]], {"rewrite_kind": "base"}),
        _sap_record("s", [["a"]]),
    ]
    stats = dataset_stats(records)
    assert stats["parallel_share"] == 0.25
    assert stats["kind_counts"] == {"base": 2, "parallel": 1, "paraphrase": 1}
    assert stats["tool_counts"] == {"a": 5, "b": 2}
    assert stats["frequency_spread"] == 2.5
    assert stats["uncalled_tools"] == 2 and stats["tool_coverage"] == 0.5
    assert stats["fallback_rate"] == 0.0 and "fallback" in stats["tag_distribution"]


def test_bfcl_ground_truth_replayed_gives_prev_output_and_the_chain_split(tmp_path):
    fmt, records = load_any(_bfcl_files(tmp_path))
    text_only = external_stats(fmt, records, replay=False)
    replayed = external_stats(fmt, records)
    assert text_only["tag_distribution"]["prev_output"] == 0.0
    assert replayed["tag_distribution"]["prev_output"] > 0
    chains = replayed["chains"]
    assert chains["output_derived"]["arguments"] == round(replayed["tag_distribution"]["prev_output"] * 14)
    assert chains["user_derived"]["arguments"] == round(replayed["tag_distribution"]["prev_user_msg"] * 14)
    assert chains["announced"]["arguments"] <= chains["user_derived"]["arguments"]
