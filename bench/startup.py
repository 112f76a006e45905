"""Start-up time of the command line, side by side with a bare interpreter in the same run.

Times `sap --help`, `sap toolsets`, `sap runs` on an empty run database and `python -c "import sap"`, each beside
`python -c pass`, over several interleaved rounds (every command once per round, so load on the machine spreads
evenly), and prints the min and median wall time of each and their ratios to the bare interpreter, then all
figures as one JSON line. Target (issue 17): `sap --help` <= 0.4 s and <= 10x `python -c pass`.
`--root DIR` times another checkout's sap (e.g. `git archive REV | tar -x -C DIR`) for a before/after comparison.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def commands(python: str, db: str) -> dict[str, list[str]]:
    """The timed command lines by name; `python -c pass` is the baseline the others are divided by."""
    return {"python -c pass": [python, "-c", "pass"],
            "import sap": [python, "-c", "import sap"],
            "sap --help": [python, "-m", "sap.cli", "--help"],
            "sap toolsets": [python, "-m", "sap.cli", "toolsets"],
            "sap runs (empty db)": [python, "-m", "sap.cli", "runs", "--db", db]}


def wall_time(argv: list[str], env: dict[str, str], cwd: str) -> float:
    """Seconds from start to exit of one command (output discarded); a failing command stops the bench."""
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    """Time every command `--runs` times and print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="rounds (each runs every command once)")
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout whose sap is timed (default: this one)")
    parser.add_argument("--python", default=sys.executable, help="interpreter (default: this one)")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(args.root.resolve())}
    with tempfile.TemporaryDirectory() as cwd:
        db = f"sqlite:///{cwd}/empty.db"
        subprocess.run([args.python, "-c", f"from sap.store import RunStore; RunStore({db!r})"], env=env, check=True)
        timed = commands(args.python, db)
        for argv in timed.values():  # warm the file cache and the bytecode before timing
            wall_time(argv, env, cwd)
        times: dict[str, list[float]] = {name: [] for name in timed}
        for _ in range(args.runs):
            for name, argv in timed.items():
                times[name].append(wall_time(argv, env, cwd))
    base_min, base_median = min(times["python -c pass"]), statistics.median(times["python -c pass"])
    results = {name: {"min_s": round(min(t), 4), "median_s": round(statistics.median(t), 4),
                      "ratio_min": round(min(t) / base_min, 1),
                      "ratio_median": round(statistics.median(t) / base_median, 1)} for name, t in times.items()}
    print(f"{'command':<22} {'min s':>7} {'median s':>9} {'x bare (min)':>13} {'x bare (median)':>16}")
    for name, r in results.items():
        print(f"{name:<22} {r['min_s']:>7.3f} {r['median_s']:>9.3f} {r['ratio_min']:>13.1f} {r['ratio_median']:>16.1f}")
    help_ = results["sap --help"]
    print(f"target sap --help <= 0.4 s and <= 10x bare: {help_['median_s']:.3f} s, {help_['ratio_median']:.1f}x -> "
          f"{'met' if help_['median_s'] <= 0.4 and help_['ratio_median'] <= 10 else 'not met'}")
    print(json.dumps({"bench": "startup", "root": str(args.root), "runs": args.runs, "results": results}))


if __name__ == "__main__":
    main()
