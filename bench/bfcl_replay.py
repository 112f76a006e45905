"""BFCL v4 multi-turn ground truth replayed through the eval loader: every file's tasks built by `load_tasks`,
each task's gold calls run in order on the task's own executor. A call *fails* when it gives no value at all
(unknown tool, bad arguments, raised, timed out, non-JSON return); an `{"error": ...}` answer is the backend's
own reply and is counted apart. Prints the counts per file and the failures by message.

Run: PYTHONPATH=. python bench/bfcl_replay.py [--files base,long_context]; the last line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter

from sap.eval import load_tasks
from sap.eval.rollout import replay_gold
from sap.toolsets.bfcl import data_dir

CATEGORIES = ("base", "miss_func", "miss_param", "long_context")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", default=",".join(CATEGORIES), help="categories, comma-separated")
    args = parser.parse_args()
    totals: dict[str, dict[str, int]] = {}
    kinds: Counter[str] = Counter()
    start = time.perf_counter()
    for category in args.files.split(","):
        tasks = load_tasks(data_dir() / f"BFCL_v4_multi_turn_{category}.json")
        results = [r for task in tasks for r in replay_gold(task)]
        failed = [r.error or "" for r in results if r.value is None and not r.ok]
        kinds.update(re.sub(r"\d+|'[^']*'", "_", e)[:80] for e in failed)
        totals[category] = {"tasks": len(tasks), "calls": len(results), "failed": len(failed),
                            "error_answers": sum(not r.ok and r.value is not None for r in results)}
        print(f"{category}: {totals[category]}", flush=True)
    print(json.dumps({**{key: sum(t[key] for t in totals.values()) for key in ("calls", "failed", "error_answers")},
                      "by_file": totals,
                      "failure_kinds": dict(kinds.most_common()), "seconds": round(time.perf_counter() - start, 1)}))


if __name__ == "__main__":
    main()
