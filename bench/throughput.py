"""Offline synthesis throughput per built-in toolset on one core, with the per-node time split; with
`--latency`, stored runs on a simulated LLM at concurrency 1 and 8 and with 4 workers on PostgreSQL, before
(the sap of git revision `--before`) and after (this tree), side by side.

Prints one line per toolset (or per setting), then all figures as one JSON line. Target: >= 20 trajectories/s.
The FSM is built (probed) once before timing; its cost is reported separately.

With --latency every role is sap.testing's RoleModel behind a scripted server answering after that many seconds
(bench/llm_calls.py's model server). Each run is a child process whose PYTHONPATH is the measured tree, so before
and after run the same bench code on the same model; the rows alternate before/after to spread the machine's load.
The 4-worker rows need --pg-url (or SAP_TEST_PG_URL): each run gets a database of its own, dropped afterwards.

With --compare REV: the offline CPU per accepted trajectory of revision REV's sap beside this tree's, per toolset,
each in a child process pinned to one core (target: after/before <= 0.4).

With --memory: the peak RSS of a whole `sap synthesize -n 200` process beside `-n 2000` per toolset (target: within
1.3x, memory does not grow with the run).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from sap.api import synthesize
from sap.graphs.synthesis import SynthesisContext
from sap.toolsets import builtin_names, load_toolset


def measure(name: str, n: int, seed: int) -> dict:
    """Accepted trajectories per second for one toolset, and where the time went."""
    toolset = load_toolset(name)
    start = time.perf_counter()
    SynthesisContext(toolset=toolset).fsm()
    fsm_seconds = time.perf_counter() - start
    nodes: dict[str, float] = {}
    start, cpu_start = time.perf_counter(), time.process_time()
    summary = synthesize(toolset, n, seed=seed, node_seconds=nodes)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    in_nodes = sum(nodes.values())
    return {
        "toolset": name,
        "accepted": summary.accepted,
        "slots": summary.attempted,
        "seconds": round(wall, 3),
        "trajectories_per_s": round(summary.accepted / wall, 2),
        "cpu_ms_per_trajectory": round(1000 * cpu / max(summary.accepted, 1), 1),
        "fsm_build_s": round(fsm_seconds, 3),
        "node_share": {k: round(v / wall, 3) for k, v in sorted(nodes.items(), key=lambda kv: -kv[1])},
        "graph_overhead_share": round((wall - in_nodes) / wall, 3),
    }


def peak_rss_mb(name: str, n: int, seed: int, tmp: str) -> dict[str, Any]:
    """Peak RSS of one `sap synthesize -n N` process (the whole process, imports included) and its wall time."""
    cmd = [sys.executable, "-m", "sap.cli", "synthesize", "--toolset", name, "-n", str(n), "--seed", str(seed),
           "-o", f"{tmp}/{name}-{n}.jsonl", "--db", f"sqlite:///{tmp}/{name}-{n}.db", "-q"]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage (ru_maxrss in KB on Linux)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return {"n": n, "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "seconds": round(time.perf_counter() - start, 1)}


def memory_main(args: argparse.Namespace) -> None:
    """Peak RSS of `sap synthesize` at two run sizes per toolset, side by side; target: the large within 1.3x."""
    small, large = (int(n) for n in args.memory_sizes.split(","))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.toolsets.split(","):
            a, b = peak_rss_mb(name, small, args.seed, tmp), peak_rss_mb(name, large, args.seed, tmp)
            ratio = round(b["peak_rss_mb"] / a["peak_rss_mb"], 3)
            rows.append({"toolset": name, "small": a, "large": b, "ratio": ratio})
            print(f"{name:<11} peak RSS -n {small}: {a['peak_rss_mb']} MB ({a['seconds']} s), -n {large}: "
                  f"{b['peak_rss_mb']} MB ({b['seconds']} s); ratio {ratio} (target <= 1.3)")
    print(json.dumps({"bench": "throughput_memory", "sizes": [small, large], "target_ratio": 1.3, "toolsets": rows}))


SETTINGS = {"concurrency 1": (1, 1), "concurrency 8": (8, 1), "4 workers (PostgreSQL)": (1, 4)}  # (threads, workers)


@contextlib.contextmanager
def source_tree(revision: str) -> Iterator[Path]:
    """The `sap` package of git `revision` of this repository, unpacked into a temporary directory."""
    repo = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "src.tar"
        subprocess.run(["git", "-C", str(repo), "archive", "-o", str(archive), revision, "sap"], check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        yield Path(tmp)


def stored_run(job: dict[str, Any]) -> dict[str, Any]:
    """In the child: one stored run of the store toolset on the model at `api_base`, with `threads` slots in
    flight in each of `workers` processes (`sap worker`), timed from the first slot to the last."""
    from llm_calls import run_once, run_workers  # bench/ is this script's directory: the child imports its sibling

    if job["workers"] == 1:
        out = run_once("store", job["api_base"], job["n"], "per_turn", job["threads"], job["seed"])
    else:
        out = run_workers("store", job["api_base"], job["db"], job["n"], job["workers"], job["threads"], job["seed"],
                          "openai/rolemodel-workers")
    return {"seconds": out["wall_s"], "accepted": out["accepted"], "slots": out["slots"]}


def timed_in(root: Path, job: dict[str, Any]) -> dict[str, Any]:
    """Run `stored_run(job)` in a child process importing `sap` from `root`; its figures."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, __file__, "--child", json.dumps(job)], env=env, capture_output=True,
                          text=True, check=False)
    if done.returncode:
        raise SystemExit(f"bench child under {root} failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def latency_rows(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Trajectories per second per setting, before and after, on the simulated model."""
    from llm_calls import fresh_database, model_server

    pg_url = args.pg_url or os.environ.get("SAP_TEST_PG_URL")
    settings = {k: v for k, v in SETTINGS.items() if v[1] == 1 or pg_url}
    rows: dict[str, dict[str, Any]] = {name: {} for name in settings}
    after = Path(__file__).resolve().parent.parent
    with source_tree(args.before) as before, model_server(args.latency) as api_base:
        for name, (threads, workers) in settings.items():
            n = args.n if threads * workers > 1 else max(4, args.n // 8)  # sequential runs need fewer slots
            for _ in range(args.repeats):
                for label, root in (("before", before), ("after", after)):
                    with fresh_database(pg_url) if workers > 1 else contextlib.nullcontext() as db:
                        out = timed_in(root, {"api_base": api_base, "n": n, "threads": threads,
                                              "workers": workers, "seed": args.seed, "db": db})
                    runs = rows[name].setdefault(label, [])
                    runs.append(round(out["accepted"] / out["seconds"], 3))
    return {name: {label: {"trajectories_per_s": max(runs), "runs": runs} for label, runs in row.items()}
            for name, row in rows.items()}


def compare_main(args: argparse.Namespace) -> None:
    """Offline CPU per accepted trajectory of git revision `--compare` beside this tree, per toolset, each run a
    child process pinned to one core, before and after alternating; prints the ratios, then one JSON line."""
    rows = []
    after_root = Path(__file__).resolve().parent.parent
    with source_tree(args.compare) as before_root:
        for name in args.toolsets.split(","):
            runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
            for _ in range(args.repeats):
                for label, root in (("before", before_root), ("after", after_root)):
                    runs[label].append(timed_in(root, {"measure": name, "n": args.n, "seed": args.seed}))
            best = {label: min(r, key=lambda m: m["cpu_ms_per_trajectory"]) for label, r in runs.items()}
            ratio = round(best["after"]["cpu_ms_per_trajectory"] / best["before"]["cpu_ms_per_trajectory"], 3)
            rows.append({"toolset": name, "before": best["before"], "after": best["after"], "cpu_ratio": ratio})
            print(f"{name:<11} CPU per trajectory: before {best['before']['cpu_ms_per_trajectory']:6.1f} ms, after "
                  f"{best['after']['cpu_ms_per_trajectory']:6.1f} ms, after/before {ratio:.2f} (target <= 0.4); "
                  f"traj/s before {best['before']['trajectories_per_s']}, after {best['after']['trajectories_per_s']}")
    print(json.dumps({"bench": "throughput_compare", "n": args.n, "before": args.compare, "target_cpu_ratio": 0.4,
                      "toolsets": rows}))


def latency_main(args: argparse.Namespace) -> None:
    """Print before and after side by side per setting, then one JSON line."""
    rows = latency_rows(args)
    for name, row in rows.items():
        before, after = row["before"]["trajectories_per_s"], row["after"]["trajectories_per_s"]
        row["after_over_before"] = round(after / before, 3)
        print(f"{name:<24} before {before:6.3f} traj/s   after {after:6.3f} traj/s   "
              f"after/before {after / before:.2f}  (runs: before {row['before']['runs']}, after {row['after']['runs']})")
    print(json.dumps({"bench": "throughput_latency", "latency_s": args.latency, "n": args.n, "before": args.before,
                      "settings": rows}))


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=100, help="accepted trajectories (with --latency: per parallel run)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--latency", type=float, help="simulated LLM latency in seconds: stored runs, before/after")
    parser.add_argument("--before", default="main", help="git revision whose sap is 'before' (with --latency)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per setting and tree; the best counts")
    parser.add_argument("--pg-url", help="PostgreSQL server for the 4-worker rows (default: $SAP_TEST_PG_URL)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--memory", action="store_true", help="peak RSS of sap synthesize at two run sizes instead")
    parser.add_argument("--memory-sizes", default="200,2000", help="the two -n of --memory")
    parser.add_argument("--toolsets", default=",".join(builtin_names()), help="toolsets of --memory and --compare")
    parser.add_argument("--compare", metavar="REV", help="offline CPU per trajectory of git revision REV beside this "
                        "tree, side by side in one run")
    args = parser.parse_args()
    if args.memory:
        memory_main(args)
        return
    if args.child:
        job = json.loads(args.child)
        if "measure" in job:
            if hasattr(os, "sched_setaffinity"):
                os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
            print(json.dumps(measure(job["measure"], job["n"], job["seed"])))
        else:
            print(json.dumps(stored_run(job)))
        return
    if args.compare:
        compare_main(args)
        return
    if args.latency is not None:
        latency_main(args)
        return
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    rows = [measure(name, args.n, args.seed) for name in builtin_names()]
    for r in rows:
        split = ", ".join(f"{k} {v:.0%}" for k, v in r["node_share"].items())
        print(f"{r['toolset']:<11} {r['trajectories_per_s']:>7.1f} traj/s  ({r['accepted']} in {r['seconds']} s; "
              f"FSM build {r['fsm_build_s']} s)  nodes: {split}; graph {r['graph_overhead_share']:.0%}")
    total = sum(r["accepted"] for r in rows) / sum(r["seconds"] for r in rows)
    print(json.dumps({"bench": "throughput", "n": args.n, "overall_trajectories_per_s": round(total, 2),
                      "target_trajectories_per_s": 20, "toolsets": rows}))


if __name__ == "__main__":
    main()
