"""Time per slot against the run's size: the store domain's slots synthesized after N accepted records, at growing N
(issue 26: at index 8,000 within 1.2x of index 500; before, each slot re-summed the tool calls of every earlier
record, O(N^2) over a run).

For each N (--sizes, default 500 and 8,000) a run of N records is built as bench/memory_export.py builds it (--base
synthesized, the rest copies of their rows), its target (and slot budget) raised by --slots, and `sap.resume` makes the new slots
(offline agents, concurrency 1, one process). The figure is the median time between consecutive accepted records
(the first one left out: it also pays the resumed process's one read of the histogram H below its bound); the same
slot seeds cannot be compared across sizes (a slot's seed is its index), so each median is over --slots slots.
The last line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from memory_export import build_run  # bench/memory_export.py: a run grown by copying its record rows
from sqlalchemy import update

from sap.api import resume
from sap.runs.driver import fingerprint, fingerprint_parts
from sap.store import RunStore
from sap.store.schema import RunRow
from sap.toolsets import load_toolset


def ms_per_slot(size: int, base: int, slots: int, workdir: Path) -> float:
    """The median milliseconds between accepted records for `slots` new slots after a run of `size` records."""
    db = f"sqlite:///{workdir / f'{size}.db'}"
    run_id = build_run(db, "store", base, size)
    store = RunStore(db)
    with store.session.begin() as s:
        run = s.get(RunRow, run_id)
        target, grown = run.target, size + slots
        config = {**run.config, "target": grown, "max_slots": 5 * grown + 20}
        parts = fingerprint_parts(load_toolset("store"), config)  # as if the run had been started with the new target
        s.execute(update(RunRow).where(RunRow.id == run_id).values(
            target=grown, status="running", config=config, fingerprint=fingerprint(parts), fingerprint_parts=parts))
    stamps: list[float] = []
    resume(run_id, db=db, on_record=lambda record: stamps.append(time.perf_counter()))
    if len(stamps) != slots:
        raise SystemExit(f"N={size}: {len(stamps)} records accepted after the resume, expected {slots} "
                         f"(the built run's own target was {target})")
    return 1000 * statistics.median(b - a for a, b in zip(stamps[1:], stamps[2:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500,8000", help="run sizes N before the timed slots, comma-separated")
    parser.add_argument("--base", type=int, default=20, help="records synthesized (the rest are copies)")
    parser.add_argument("--slots", type=int, default=64, help="accepted records timed after each N")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            figures[str(size)] = round(ms_per_slot(size, args.base, args.slots, Path(tmp)), 1)
            print(f"N={size:>6}: {figures[str(size)]:>7.1f} ms per slot", flush=True)
    ratio = round(figures[str(sizes[-1])] / figures[str(sizes[0])], 2)
    print(f"ratio N={sizes[-1]} / N={sizes[0]}: {ratio}x (target <= 1.2x)")
    print(json.dumps({"sizes": sizes, "ms_per_slot": figures, "ratio": ratio, "within_1_2x": ratio <= 1.2}))


if __name__ == "__main__":
    main()
