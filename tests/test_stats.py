"""Chain-length statistics on a hand-made record whose L values are known."""
from __future__ import annotations

import json

from sap.provenance.stats import arg_nodes, dataset_stats


def _call(cid: str, name: str, args: dict) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def _record() -> dict:
    # turn 0: user creates folder "docs"; turn 1: ls shows it; turn 3: cd into it (from the ls result)
    # turn 3 also greps with a brand-new pattern; turn 4 restates the pattern from turn 3
    messages = [{"role": "system", "content": "s"}]
    for turn in range(5):
        messages.append({"role": "user", "content": f"turn {turn}"})
        if turn == 0:
            messages += [_call("c0", "mkdir", {"dir_name": "docs"}), {"role": "tool", "tool_call_id": "c0", "content": "{}"}]
        if turn == 1:
            messages += [_call("c1", "ls", {}), {"role": "tool", "tool_call_id": "c1", "content": '{"folder": "docs"}'}]
        if turn == 3:
            messages += [_call("c2", "cd", {"folder": "docs"}), {"role": "tool", "tool_call_id": "c2", "content": "{}"},
                         _call("c3", "grep", {"pattern": "todo"}), {"role": "tool", "tool_call_id": "c3", "content": "{}"}]
        if turn == 4:
            messages += [_call("c4", "grep", {"pattern": "todo"}), {"role": "tool", "tool_call_id": "c4", "content": "{}"}]
    prov = [
        {"call_id": "c0", "turn": 0, "name": "mkdir", "args": {"dir_name": {"tag": "self_create", "source": None, "fallback_from": None}}},
        {"call_id": "c1", "turn": 1, "name": "ls", "args": {}},
        {"call_id": "c2", "turn": 3, "name": "cd", "args": {"folder": {"tag": "prev_output", "source": {"turn": 1, "call": 0, "path": "$.folder"}, "fallback_from": None}}},
        {"call_id": "c3", "turn": 3, "name": "grep", "args": {"pattern": {"tag": "self_create", "source": None, "fallback_from": None}}},
        {"call_id": "c4", "turn": 4, "name": "grep", "args": {"pattern": {"tag": "prev_user_msg", "source": {"turn": 3}, "fallback_from": None}}},
    ]
    tools = [{"type": "function", "function": {"name": n}} for n in ("mkdir", "ls", "cd", "grep", "rm")]
    return {"id": "r", "messages": messages, "provenance": prov, "tools": tools, "initial_config": {}}


def test_chain_lengths_follow_value_instances_back_to_their_origin():
    nodes = arg_nodes(_record())
    # the folder used at turn 3 came from ls at turn 1, but the value first entered at turn 0 (mkdir)
    assert [(n.name, n.chain_length) for n in nodes] == [("dir_name", 0), ("folder", 3), ("pattern", 0), ("pattern", 1)]


def test_dataset_stats_figures():
    stats = dataset_stats([_record()])
    assert stats["max_chain_length"] == 3
    assert stats["mean_chain_length"] == 1.0
    assert stats["dependent_share"] == 0.5
    assert stats["mean_turns"] == 5
    assert stats["tool_coverage"] == 0.8
    assert stats["tag_distribution"]["prev_output"] == 0.25
