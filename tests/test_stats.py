"""Chain-length statistics (SAP 3.4) and source columns on hand-made records whose figures are known."""
from __future__ import annotations

import json

from sap.provenance.stats import arg_nodes, dataset_stats


def _call(cid: str, name: str, args: dict) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def _arg(tag: str, **source) -> dict:
    return {"tag": tag, "source": source or None, "fallback_from": "prev_output" if tag == "fallback" else None}


def _build(turns: dict[int, list[tuple[str, str, dict, dict]]], n_turns: int) -> dict:
    """A record of `n_turns` user turns; turns[t] lists (call id, tool, args, provenance args) run at turn t."""
    messages, prov = [{"role": "system", "content": "s"}], []
    for turn in range(n_turns):
        messages.append({"role": "user", "content": f"turn {turn}"})
        for cid, name, args, pargs in turns.get(turn, []):
            messages += [_call(cid, name, args), {"role": "tool", "tool_call_id": cid, "content": "{}"}]
            prov.append({"call_id": cid, "turn": turn, "name": name, "args": pargs})
    tools = [{"type": "function", "function": {"name": n}} for n in ("mkdir", "ls", "cd", "grep", "rm", "touch")]
    return {"id": "r", "messages": messages, "provenance": prov, "tools": tools, "initial_config": {"dir": "docs"}}


def _record() -> dict:
    # turn 0: mkdir of the config's folder (P_i); turn 1: ls shows it; turn 3: cd into it from the ls result (P_o)
    # turn 3 also greps with a new pattern (P_c); turn 4 restates the pattern from turn 3 (P_u) and removes the
    # config's folder again (P_i reused) and a fallback value equal to the pattern (P_f)
    return _build({
        0: [("c0", "mkdir", {"dir_name": "docs"}, {"dir_name": _arg("initial_state", path="$.dir")})],
        1: [("c1", "ls", {}, {})],
        3: [("c2", "cd", {"folder": "docs"}, {"folder": _arg("prev_output", turn=1, call=0, path="$.folder")}),
            ("c3", "grep", {"pattern": "todo"}, {"pattern": _arg("self_create")})],
        4: [("c4", "grep", {"pattern": "todo"}, {"pattern": _arg("prev_user_msg", turn=3)}),
            ("c5", "rm", {"dir_name": "docs", "x": "todo"},
             {"dir_name": _arg("initial_state", path="$.dir"), "x": _arg("fallback")})],
    }, 5)


def test_chain_lengths_follow_only_output_and_user_sources():
    nodes = arg_nodes(_record())
    # P_o produced at turn 1 and consumed at turn 3: L = 2 (the equal value mkdir used at turn 0 does not count);
    # P_u follows its user turn; P_i, P_c and P_f have L = 0 even when an equal value was bound before
    assert [(n.name, n.tag, n.chain_length) for n in nodes] == [
        ("dir_name", "initial_state", 0), ("folder", "prev_output", 2), ("pattern", "self_create", 0),
        ("pattern", "prev_user_msg", 1), ("dir_name", "initial_state", 0), ("x", "fallback", 0)]
    # value reuse counts from the earliest equal binding, whatever its tag
    assert [n.reuse_length for n in nodes] == [0, 3, 0, 1, 4, 1]


def test_an_output_value_carried_through_a_call_keeps_its_first_origin():
    # turn 0 lists an order id; turn 1 reads it back (P_o from turn 0) and the result echoes it; turn 3 uses the
    # echo from turn 1's result: the value entered at turn 0, so L = 3; an id first seen in turn 2's output, L = 1
    record = _build({
        0: [("c0", "ls", {}, {})],
        1: [("c1", "cd", {"folder": "a1"}, {"folder": _arg("prev_output", turn=0, call=0, path="$.f")})],
        2: [("c2", "ls", {}, {})],
        3: [("c3", "rm", {"dir_name": "a1"}, {"dir_name": _arg("prev_output", turn=1, call=0, path="$.f")}),
            ("c4", "rm", {"dir_name": "b2"}, {"dir_name": _arg("prev_output", turn=2, call=0, path="$.f")})],
    }, 4)
    assert [n.chain_length for n in arg_nodes(record)] == [1, 3, 1]


def test_data_without_dependencies_has_no_chains():
    record = _build({t: [(f"c{t}", "mkdir", {"dir_name": "docs"}, {"dir_name": _arg("initial_state", path="$.dir")})]
                     for t in range(4)}, 4)
    stats = dataset_stats([record])
    assert stats["mean_chain_length"] == 0 and stats["max_chain_length"] == 0 and stats["dependent_share"] == 0
    assert stats["value_reuse"]["max_chain_length"] == 3


def test_dataset_stats_figures_and_source_columns():
    stats = dataset_stats([_record()])
    assert stats["max_chain_length"] == 2
    assert stats["mean_chain_length"] == 3 / 6
    assert stats["dependent_share"] == 2 / 6
    assert stats["value_reuse"] == {"mean_chain_length": 9 / 6, "max_chain_length": 4, "dependent_share": 4 / 6}
    assert stats["mean_turns"] == 5
    assert stats["tool_coverage"] == 5 / 6
    assert stats["tag_distribution"]["prev_output"] == 1 / 6
    # Tables 5/6: P_u is counted under P_c, and the four columns add up to one
    assert stats["source_columns"] == {"P_i": 2 / 6, "P_o": 1 / 6, "P_c": 2 / 6, "P_f": 1 / 6}
    assert abs(sum(stats["source_columns"].values()) - 1) < 1e-12
