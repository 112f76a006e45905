"""MissFunc hides its tool in every export: the record's `tools` are those of the first turn, `tools_added` lists the
tool at the turn it comes back (where a system message hands its schema over), and the messages, ShareGPT, HF, verl
and eval forms show it at no turn before that one; a record without `tools_added` offers all tools at every turn."""
from __future__ import annotations

import json
import re

import pytest

from sap.export.hf import to_hf_row
from sap.export.messages import to_messages_row
from sap.export.records import TOOLS_ADDED_PROMPT
from sap.provenance.record_tools import all_tools, tools_at_turns
from sap.export.sharegpt import to_sharegpt
from sap.export.verl import verl_row


@pytest.fixture(scope="module")
def records() -> list[dict]:
    """Base and MissFunc filesystem records."""
    import sap

    out = sap.synthesize("filesystem", 6, seed=3, mix={"base": 0.5, "miss_func": 0.5}).records
    assert {r["meta"]["kind"] for r in out} == {"base", "miss_func"}
    return out


def _hidden(record: dict) -> tuple[str, int]:
    """(the hidden tool, the turn it comes back) of a MissFunc record."""
    ((turn, (tool,)),) = record["meta"]["missed_function"].items()
    return tool, int(turn) + 1


def _names(tools: list[dict]) -> set[str]:
    return {t.get("function", t)["name"] for t in tools}


def _shows(text: str, tool: str) -> bool:
    """Whether a text holds the tool's schema or a call of it (its name as a JSON string value)."""
    return re.search(rf'"name":\s*"{re.escape(tool)}"', text) is not None


def _user_positions(messages: list[dict]) -> list[int]:
    return [i for i, m in enumerate(messages) if m["role"] == "user"]


def test_the_record_offers_the_hidden_tool_from_the_turn_it_comes_back(records):
    for record in records:
        tools_by_turn = [_names(t) for t in tools_at_turns(record)]
        if record["meta"]["kind"] != "miss_func":
            assert "tools_added" not in record and all(t == _names(record["tools"]) for t in tools_by_turn)
            continue
        tool, back = _hidden(record)
        assert tool not in _names(record["tools"]) and tool in _names(all_tools(record))
        assert record["tools_added"] == [{"turn": back, "tools": [t for t in record["tools_added"][0]["tools"]]}]
        assert [tool in names for names in tools_by_turn] == [t >= back for t in range(len(tools_by_turn))]
        users = _user_positions(record["messages"])
        notice = record["messages"][users[back] - 1]
        assert notice["role"] == "system" and notice["content"].startswith(TOOLS_ADDED_PROMPT)
        assert _names(json.loads(notice["content"].split("\n", 1)[1])) == {tool}
        assert not any(_shows(json.dumps(m), tool) for m in record["messages"][:users[back] - 1])


def test_the_messages_row_keeps_the_notice_and_the_tools_added(records):
    for record in records:
        row = to_messages_row(record)
        if record["meta"]["kind"] != "miss_func":
            assert set(row) == {"messages", "tools"}
            continue
        tool, back = _hidden(record)
        assert tool not in _names(row["tools"]) and row["tools_added"] == record["tools_added"]
        users = _user_positions(row["messages"])
        assert row["messages"][users[back] - 1]["role"] == "system"
        assert not any(_shows(json.dumps(m), tool) for m in row["messages"][:users[back] - 1])


def test_the_sharegpt_row_hands_the_tool_over_in_the_human_turn_it_comes_back(records):
    for record in (r for r in records if r["meta"]["kind"] == "miss_func"):
        tool, back = _hidden(record)
        row = to_sharegpt(record)
        assert tool not in _names(json.loads(row["tools"]))
        humans = [i for i, t in enumerate(row["conversations"]) if t["from"] == "human"]
        assert row["conversations"][humans[back]]["value"].startswith(TOOLS_ADDED_PROMPT)
        assert _shows(row["conversations"][humans[back]]["value"], tool)
        assert not any(_shows(t["value"], tool) for t in row["conversations"][:humans[back]])
        assert not _shows(row["system"], tool)
        assert all(t["from"] in ("human", "observation") for t in row["conversations"][0::2])  # LLaMA-Factory's order


def test_the_hf_and_verl_rows_hold_the_first_turn_tools_and_the_tools_added(records):
    for record in (r for r in records if r["meta"]["kind"] == "miss_func"):
        tool, back = _hidden(record)
        hf = to_hf_row(record)
        assert tool not in _names([json.loads(t) for t in hf["tools"]])
        assert json.loads(hf["tools_added"]) == record["tools_added"]
        info = verl_row(record["id"], record)["extra_info"]
        assert tool not in _names(json.loads(info["tools"])) and json.loads(info["tools_added"]) == record["tools_added"]
    base = next(r for r in records if r["meta"]["kind"] == "base")
    assert to_hf_row(base)["tools_added"] == "[]"


def test_the_eval_task_offers_the_tool_only_from_its_comeback_turn(records):
    from sap.eval.tasks import task_from_record
    from sap.toolsets import load_toolset

    toolset = load_toolset("filesystem")
    for record in (r for r in records if r["meta"]["kind"] == "miss_func"):
        tool, back = _hidden(record)
        task = task_from_record(record, toolset)
        assert [tool in _names(task.tools_at(t)) for t in range(len(task.turns))] == \
            [t >= back for t in range(len(task.turns))]


def test_a_record_without_tools_added_offers_every_tool_at_every_turn(records):
    old = {k: v for k, v in records[0].items() if k != "tools_added"}
    assert all(_names(t) == _names(old["tools"]) for t in tools_at_turns(old))


def test_missfunc_records_pass_validation(records):
    from sap.toolsets import load_toolset
    from sap.validate import validate_record

    toolset = load_toolset("filesystem")
    assert [p for r in records for p in validate_record(r, toolset)] == []
