"""BFCL v4 multi-turn ground truth replayed through the eval loader: every file's tasks built by `load_tasks`,
each task's gold calls run in order on the task's own executor. A call *fails* when it gives no value at all
(unknown tool, bad arguments, raised, timed out, non-JSON return); an `{"error": ...}` answer is the backend's
own reply and is counted apart. Each gold call's arguments are also checked against the offered tool's schema
(sap's `ToolValidator`, so the enums and ranges the toolset reads from descriptions count). Prints the counts
per file, the failures and schema violations by message.

Run: PYTHONPATH=. python bench/bfcl_replay.py [--files base,long_context]; the last line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter

from sap.cache.rules import ToolValidator
from sap.eval import EvalTask, load_tasks
from sap.eval.rollout import replay_gold
from sap.toolsets import load_toolset
from sap.toolsets.bfcl import data_dir

CATEGORIES = ("base", "miss_func", "miss_param", "long_context")


def schema_violations(task: EvalTask, validators: dict[str, dict[str, ToolValidator]]) -> list[str]:
    """The messages of the task's gold calls whose arguments the offered schema rejects (validators by toolset)."""
    name = task.meta["toolset"]
    if name not in validators:
        validators[name] = {spec.name: ToolValidator(spec) for spec in load_toolset(name).tools}
    problems = (validators[name][g.name].check(g.args) for turn in task.turns for g in turn.gold)
    return [f"{p.code}: {p.message}" for p in problems if p is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", default=",".join(CATEGORIES), help="categories, comma-separated")
    args = parser.parse_args()
    totals: dict[str, dict[str, int]] = {}
    failures: Counter[str] = Counter()
    violations: Counter[str] = Counter()
    validators: dict[str, dict[str, ToolValidator]] = {}
    start = time.perf_counter()
    for category in args.files.split(","):
        tasks = load_tasks(data_dir() / f"BFCL_v4_multi_turn_{category}.json")
        results = [r for task in tasks for r in replay_gold(task)]
        failed = [r.error or "" for r in results if r.value is None and not r.ok]
        failures.update(re.sub(r"\d+|'[^']*'", "_", e)[:80] for e in failed)
        rejected = [v for task in tasks for v in schema_violations(task, validators)]
        violations.update(rejected)
        totals[category] = {"tasks": len(tasks), "calls": len(results), "failed": len(failed),
                            "error_answers": sum(not r.ok and r.value is not None for r in results),
                            "schema_violations": len(rejected)}
        print(f"{category}: {totals[category]}", flush=True)
    keys = ("calls", "failed", "error_answers", "schema_violations")
    print(json.dumps({**{key: sum(t[key] for t in totals.values()) for key in keys}, "by_file": totals,
                      "failures": dict(failures.most_common()), "violations": dict(violations.most_common()),
                      "seconds": round(time.perf_counter() - start, 1)}))


if __name__ == "__main__":
    main()
