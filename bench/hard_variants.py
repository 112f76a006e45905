"""Hard-variant honesty on sap records: MissParam turns that announce the withheld value, withhold an optional
parameter or a value shown before (`sap.provenance.withheld`), and MissFunc records whose hidden tool shows before
the turn it comes back, per export format (openai record, messages, sharegpt, hf, verl, bfcl).

    python bench/hard_variants.py RECORDS.jsonl [...]
"""
from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from typing import Any

from sap.export.hf import to_hf_row
from sap.export.messages import to_messages_row
from sap.export.records import record_to_trajectory
from sap.export.sharegpt import to_sharegpt
from sap.export.verl import verl_row
from sap.jsonutil import read_records
from sap.provenance.withheld import announces, miss_param_problems, withheld_turn
from sap.toolsets import load_toolset
from sap.toolsets.bfcl import is_bfcl_name


def _shows(data: Any, tool: str) -> bool:
    """Whether JSON data (or text) holds the tool's schema or a call of it: its name as a JSON name value."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return re.search(rf'\\?"name\\?":\s*\\?"{re.escape(tool)}\\?"', text) is not None


def _names(tools: list[dict[str, Any]]) -> set[str]:
    return {t.get("function", t)["name"] for t in tools}


def _before_user(messages: list[dict[str, Any]], turn: int, role: str = "role", user: str = "user") -> list[Any]:
    """The messages before the `turn`-th user message, less a system message right before it (the hand-over)."""
    users = [i for i, m in enumerate(messages) if m.get(role) == user]
    end = users[turn]
    while end > 0 and messages[end - 1].get(role) == "system":
        end -= 1
    return messages[:end]


def miss_func_leaks(record: dict[str, Any]) -> dict[str, bool]:
    """Per export format, whether the record's hidden tool shows before the turn it comes back."""
    ((k, tools),) = record["meta"]["missed_function"].items()
    back, tool = int(k) + 1, tools[0]
    messages = to_messages_row(record)
    sharegpt = to_sharegpt(record)
    hf = to_hf_row(record)
    humans = [i for i, t in enumerate(sharegpt["conversations"]) if t["from"] == "human"]
    out = {
        "openai": tool in _names(record["tools"]) or _shows(_before_user(record["messages"], back), tool),
        "messages": tool in _names(messages["tools"]) or _shows(_before_user(messages["messages"], back), tool),
        "sharegpt": tool in _names(json.loads(sharegpt["tools"])) or _shows(sharegpt["system"], tool)
        or _shows(sharegpt["conversations"][:humans[back]], tool),
        "hf": tool in _names([json.loads(t) for t in hf["tools"]]) or _shows(_before_user(hf["messages"], back), tool),
        "verl": tool in _names(json.loads(verl_row(record["id"], record)["extra_info"]["tools"])),
    }
    if is_bfcl_name(record["meta"]["toolset"]):
        from sap.export.bfcl import to_bfcl

        (question,), _ = to_bfcl([record], None, load_toolset)
        out["bfcl"] = tool not in question["missed_function"].get(str(back), []) or _shows(question["question"][:back], tool)
    return out


def report(path: str) -> dict[str, Any]:
    """The figures of one records file."""
    records = [r for _, r in read_records(path)]
    kinds = Counter(r["meta"]["kind"] for r in records)
    toolset = load_toolset(records[0]["meta"]["toolset"])
    specs = {t.name: t for t in toolset.tools}
    problems: Counter = Counter()
    for record in (r for r in records if r["meta"]["kind"] == "miss_param"):
        traj = record_to_trajectory(record)
        k = withheld_turn(traj)
        problems["announcing turns"] += announces(traj.turns[k].user_message)
        found = miss_param_problems(traj, specs)
        problems["optional withheld"] += sum("is optional" in p for p in found)
        problems["shown earlier"] += sum("is shown before" in p for p in found)
        problems["stated in the withheld turn"] += sum("is stated in user message" in p for p in found)
        problems["missing from the reveal"] += sum("is not given" in p for p in found)
    leaks: Counter = Counter()
    for record in (r for r in records if r["meta"]["kind"] == "miss_func"):
        for fmt, leaked in miss_func_leaks(record).items():
            leaks[fmt] += leaked
    return {"records": len(records), "kinds": dict(kinds), "miss_param": dict(problems),
            "miss_func records showing the hidden tool before its return": dict(leaks)}


def main() -> None:
    """Print the figures of each file as JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+")
    for path in parser.parse_args().files:
        print(path, json.dumps(report(path), indent=1))


if __name__ == "__main__":
    main()
