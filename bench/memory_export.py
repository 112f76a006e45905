"""Peak memory of reading a stored run, side by side: streamed (RunStore.iter_records, as `sap export` and `sap resume`
read a run now) against loaded (every record in a list first, RunStore.records, as they read it before).

A run of the store domain is synthesized once (--base records), then its record rows are copied up to each size N
(--sizes), so large runs take seconds to build. Each measurement runs in a fresh process: `sap export --format
openai` and `--format sharegpt`, `sap resume` of the complete run with -o (the -o rewrite and the run summary), and
the loaded baseline (records() then the JSONL write). The figure printed is the child's peak RSS once its imports
are done (VmHWM, reset then) minus its RSS at that point, i.e. what reading the run cost. Target: streamed peaks
do not grow with N. The last line is one JSON object with every figure.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys
import sap.api, sap.cli.data, sap.export.sharegpt, sap.runs.driver, sap.store.checkpoint, sap.toolsets  # imports first
from sap.cli import main
from sap.jsonutil import write_jsonl
from sap.store import RunStore

def status_kb(field):
    with open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith(field + ":")).split()[1])

mode, db, run_id, out = sys.argv[1:5]
with open("/proc/self/clear_refs", "w") as refs:  # reset the peak (VmHWM) to the RSS now, after imports
    refs.write("5")
base = status_kb("VmRSS")
if mode == "loaded":
    write_jsonl(out, RunStore(db).records(run_id))
elif mode == "resume":
    assert main(["resume", run_id, "--db", db, "-o", out, "-q"]) == 0
else:
    assert main(["export", run_id, "--db", db, "-o", out, "--format", mode]) == 0
print(json.dumps({"peak_above_imports_kb": status_kb("VmHWM") - base}), file=sys.stderr)
"""
MODES = ("loaded", "openai", "sharegpt", "resume")


def build_run(db: str, base: int, size: int) -> str:
    """A store-domain run with `size` accepted records: `base` synthesized, the rest copies of their rows."""
    from sqlalchemy import select

    from sap.cli import main
    from sap.store import RunStore
    from sap.store.schema import RecordRow, SlotRow

    out = Path(tempfile.mkdtemp()) / "seed.jsonl"
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            assert main(["synthesize", "--toolset", "store", "-n", str(base), "--seed", "1", "-o", str(out),
                         "--db", db, "-q"]) == 0
        finally:
            sys.stdout = stdout
    store = RunStore(db)
    run = store.runs()[-1]
    with store.session.begin() as s:
        rows = list(s.execute(select(RecordRow).where(RecordRow.run_id == run.id)).scalars())
        for index in range(base, size):
            src = rows[index % base]
            s.add(SlotRow(run_id=run.id, index=index, thread_id=f"{run.id}:{index}", status="accepted", attempts=1))
            s.add(RecordRow(run_id=run.id, index=index, record={**src.record, "id": f"{src.record['id']}-{index}"},
                            tool_calls=src.tool_calls))
    return run.id  # complete (past its target): resume only rewrites -o and prints the summary


def peak_mb(mode: str, db: str, run_id: str, out: str) -> float:
    """What reading the run cost one fresh process in `mode`: its peak RSS above its RSS after imports, in MB
    (Linux: the peak is reset through /proc/self/clear_refs once the imports are done)."""
    done = subprocess.run([sys.executable, "-c", CHILD, mode, db, run_id, out], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{mode} failed: {done.stderr}")
    return json.loads(done.stderr.strip().splitlines()[-1])["peak_above_imports_kb"] / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="200,800,3200", help="run sizes N, comma-separated")
    parser.add_argument("--base", type=int, default=20, help="records synthesized (the rest are copies)")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'N':>6} " + " ".join(f"{m + ' MB':>12}" for m in MODES) + "   loaded/openai")
        for size in sizes:
            db = f"sqlite:///{tmp}/run{size}.db"
            run_id = build_run(db, args.base, size)
            row = {mode: round(peak_mb(mode, db, run_id, f"{tmp}/{mode}{size}.jsonl"), 1) for mode in MODES}
            figures[str(size)] = row
            print(f"{size:>6} " + " ".join(f"{row[m]:>12.1f}" for m in MODES)
                  + f"   {row['loaded'] / max(row['openai'], 0.1):.1f}x")
    first, last = figures[str(sizes[0])], figures[str(sizes[-1])]
    growth = {m: round(last[m] / max(first[m], 0.1), 2) for m in MODES}
    print(f"growth from N={sizes[0]} to N={sizes[-1]}: " + ", ".join(f"{m} {g}x" for m, g in growth.items()))
    print(json.dumps({"peak_mb_above_imports": figures, "growth": growth}))


if __name__ == "__main__":
    main()
