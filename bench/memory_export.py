"""Peak memory of reading a stored run: `sap export` in every format and `sap resume`, each streaming the run
(RunStore.iter_records), beside the loaded baseline (every record in a list first, RunStore.records, as exports
read a run before), at growing run sizes N.

A run of the store domain (and, for `--format bfcl`, of bfcl/TwitterAPI) is synthesized once (--base records), then
its record rows are copied up to each size N (--sizes, default 500, 2,000 and 8,000), so large runs take seconds to
build. Each measurement runs in a fresh process: `sap export` to openai, sharegpt, messages, parquet, hf, verl and
bfcl (the carded ones with --split train=0.9,test=0.1), `sap resume` of the complete run with -o (the -o rewrite and
the run summary), and the loaded baseline (records() then the JSONL write). The figure is the child's peak RSS once
its imports are done (VmHWM, reset then) minus its RSS at that point, i.e. what reading the run cost; file-backed
pages a writer maps count too. Target: every streamed peak at the largest N within 1.3x of the smallest N's. The
last line is one JSON object with every figure.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys
import datasets, pyarrow.parquet  # the formats' own libraries, imported before the peak is reset
import sap.api, sap.cli.data, sap.export.bfcl, sap.export.hf, sap.export.sharegpt, sap.export.verl  # imports first
import sap.runs.driver, sap.store.checkpoint, sap.toolsets
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
    split = ["--split", "train=0.9,test=0.1"] if mode in ("messages", "parquet", "hf") else []
    assert main(["export", run_id, "--db", db, "-o", out, "--format", mode, *split]) == 0
print(json.dumps({"peak_above_imports_kb": status_kb("VmHWM") - base}), file=sys.stderr)
"""
MODES = ("loaded", "openai", "sharegpt", "messages", "parquet", "hf", "verl", "bfcl", "resume")
TOOLSETS = {"bfcl": "bfcl/TwitterAPI"}  # the modes whose run is of another toolset than store
COPY_BATCH = 200  # record rows inserted per statement while a run is grown


def build_run(db: str, toolset: str, base: int, size: int) -> str:
    """A run of `toolset` with `size` accepted records: `base` synthesized, the rest copies of their rows (ids made
    unique), inserted COPY_BATCH at a time."""
    from sqlalchemy import insert, select

    from sap.cli import main
    from sap.store import RunStore
    from sap.store.schema import RecordRow, SlotRow

    out = Path(tempfile.mkdtemp()) / "seed.jsonl"
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            assert main(["synthesize", "--toolset", toolset, "-n", str(base), "--seed", "1", "-o", str(out),
                         "--db", db, "-q"]) == 0
        finally:
            sys.stdout = stdout
    store = RunStore(db)
    run = store.runs()[-1]
    with store.session() as s:
        rows = list(s.execute(select(RecordRow).where(RecordRow.run_id == run.id)).scalars())
        first = 1 + max(s.execute(select(SlotRow.index).where(SlotRow.run_id == run.id)).scalars())
    last = first + size - len(rows)  # the copies take the slots after the run's own (accepted or dropped) ones
    for start in range(first, last, COPY_BATCH):
        indexes = range(start, min(last, start + COPY_BATCH))
        with store.session.begin() as s:
            s.execute(insert(SlotRow), [{"run_id": run.id, "index": i, "thread_id": f"{run.id}:{i}",
                                         "status": "accepted", "attempts": 1} for i in indexes])
            s.execute(insert(RecordRow), [
                {"run_id": run.id, "index": i, "tool_calls": rows[i % len(rows)].tool_calls,
                 "record": {**rows[i % len(rows)].record, "id": f"{rows[i % len(rows)].record['id']}-{i}"}}
                for i in indexes])
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
    parser.add_argument("--sizes", default="500,2000,8000", help="run sizes N, comma-separated")
    parser.add_argument("--base", type=int, default=20, help="records synthesized (the rest are copies)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    modes = [m for m in args.modes.split(",") if m]
    if unknown := sorted(set(modes) - set(MODES)):
        parser.error(f"unknown modes {unknown}")
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'N':>6} " + " ".join(f"{m:>9}" for m in modes) + "   (MB above imports)", flush=True)
        for size in sizes:
            sized = Path(tmp, str(size))  # its runs and outputs, removed before the next size
            sized.mkdir()
            runs = {toolset: (db := f"sqlite:///{sized}/{toolset.replace('/', '_')}.db",
                              build_run(db, toolset, args.base, size))
                    for toolset in sorted({TOOLSETS.get(m, "store") for m in modes})}
            row = {}
            for mode in modes:
                db, run_id = runs[TOOLSETS.get(mode, "store")]
                row[mode] = round(peak_mb(mode, db, run_id, str(sized / mode)), 1)
            figures[str(size)] = row
            print(f"{size:>6} " + " ".join(f"{row[m]:>9.1f}" for m in modes), flush=True)
            shutil.rmtree(sized)
    first, last = figures[str(sizes[0])], figures[str(sizes[-1])]
    growth = {m: round(last[m] / max(first[m], 0.1), 2) for m in modes}
    streamed = [m for m in modes if m != "loaded"]
    print(f"growth from N={sizes[0]} to N={sizes[-1]}: " + ", ".join(f"{m} {g}x" for m, g in growth.items()))
    print(json.dumps({"sizes": sizes, "peak_mb_above_imports": figures, "growth": growth,
                      "streamed_within_1_3x": all(growth[m] <= 1.3 for m in streamed)}))


if __name__ == "__main__":
    main()
