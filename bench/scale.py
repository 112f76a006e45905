"""Scaling out on Ray: trajectories per second with 1, 2 and 4 Ray actors (each a run driver with --per-actor slots in
flight) against the same work in one process (RunDriver at actors x per-actor concurrency), every role an LLM role on a
model with a simulated 200 ms latency (sap.testing's RoleModel behind a ScriptedLLMServer in its own process).

Every run is on a PostgreSQL run database of its own (SAP_BENCH_PG_URL, default the test server), created and dropped
here; Ray is a local single-node instance (ray.init) with one logical CPU per actor. The Ray figures include the actors'
start-up (each imports sap), as a user's run does. Scaling efficiency at 4 actors is tps(4 actors) / (4 x tps(1 actor)).
On a machine with few cores it is bounded by CPU, not by the model's latency: the machine's CPU seconds per slot
(/proc/stat busy time over the run: sap, Ray's daemons, PostgreSQL and the model server alike) are printed beside it.
Last line: one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any, Callable

from llm_calls import fresh_database, model_server  # bench/llm_calls.py: RoleModel server, scratch databases

from sap.agents.config import build_agents_config
from sap.runs.driver import RunDriver, run_config, start_run
from sap.runs.ray_cluster import RayOptions, run_on_ray
from sap.store.checkpoint import checkpointer_for
from sap.store.runs import RunStore
from sap.toolsets import load_toolset

PG_URL = os.environ.get("SAP_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def machine_busy_seconds() -> float:
    """CPU seconds every process of the machine has spent so far (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def timed_run(toolset_name: str, api_base: str, n: int, seed: int, slots: int,
              work: Callable[[RunStore, str, Any, int], Any]) -> dict[str, Any]:
    """Create a run of `n` trajectories on a fresh database (every role on the model) and time `work` on it:
    trajectories per second and the machine's CPU ms per slot."""
    agents = build_agents_config(agents="llm", message_mode="per_turn", model_overrides={
        "model": "openai/rolemodel", "api_base": api_base, "concurrency": max(slots, 8), "timeout": 30})
    toolset = load_toolset(toolset_name)
    with fresh_database(PG_URL) as url:
        store = RunStore(url)
        run_id = start_run(store, toolset, run_config(n, seed, None, {}, agents=agents))
        with checkpointer_for(url):  # the checkpoint tables exist before any worker starts
            pass
        start, busy = time.perf_counter(), machine_busy_seconds()
        work(store, run_id, toolset, slots)
        wall, cpu = time.perf_counter() - start, machine_busy_seconds() - busy
        counts = store.counts(run_id)
        store.engine.dispose()
    attempted = sum(counts.values())
    return {"accepted": counts.get("accepted", 0), "slots": attempted, "wall_s": round(wall, 2),
            "tps": round(counts.get("accepted", 0) / wall, 3), "cpu_ms_per_slot": round(1000 * cpu / attempted)}


def in_one_process(store: RunStore, run_id: str, toolset: Any, slots: int) -> None:
    """RunDriver in this process with `slots` slots in flight."""
    with checkpointer_for(store.url) as saver:
        RunDriver(store, run_id, toolset, saver).run(concurrency=slots)


def on_actors(actors: int, per_actor: int) -> Callable[[RunStore, str, Any, int], None]:
    """Ray: `actors` actors with `per_actor` slots each."""
    def work(store: RunStore, run_id: str, toolset: Any, slots: int) -> None:
        run_on_ray(store, run_id, toolset.name, RayOptions(actors=actors, concurrency=per_actor))
    return work


def main() -> None:
    """Measure and print one line per configuration, then the JSON summary."""
    import ray

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--toolset", default="store")
    parser.add_argument("-n", type=int, default=24, help="accepted trajectories per run")
    parser.add_argument("--latency", type=float, default=0.2, help="the model's simulated latency per call, seconds")
    parser.add_argument("--per-actor", type=int, default=2, help="slots in flight per actor")
    parser.add_argument("--actors", default="1,2,4")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    counts = [int(a) for a in args.actors.split(",")]
    ray.init(num_cpus=max(counts), logging_level="ERROR", log_to_driver=False, include_dashboard=False)
    rows = []
    with model_server(args.latency) as api_base:
        for actors in counts:
            slots = actors * args.per_actor
            on_ray = timed_run(args.toolset, api_base, args.n, args.seed, slots, on_actors(actors, args.per_actor))
            here = timed_run(args.toolset, api_base, args.n, args.seed, slots, in_one_process)
            rows.append({"actors": actors, "slots_in_flight": slots, "ray": on_ray, "one_process": here})
            print(f"{actors} actors x {args.per_actor}: {on_ray['tps']:.3f} traj/s ({on_ray['cpu_ms_per_slot']} CPU "
                  f"ms/slot) | one process at concurrency {slots}: {here['tps']:.3f} traj/s "
                  f"({here['cpu_ms_per_slot']} CPU ms/slot)", flush=True)
    ray.shutdown()
    base = next(r for r in rows if r["actors"] == 1)["ray"]["tps"] if 1 in counts else None
    top = rows[-1]
    efficiency = round(top["ray"]["tps"] / (top["actors"] * base), 3) if base else None
    print(f"scaling efficiency at {top['actors']} actors: {efficiency} (CPU per slot {top['ray']['cpu_ms_per_slot']} "
          f"ms on {os.cpu_count()} cores; the CPU-bound ceiling is {os.cpu_count()} x 1000 / that = "
          f"{os.cpu_count() * 1000 / top['ray']['cpu_ms_per_slot']:.2f} slots/s)")
    print(json.dumps({"bench": "scale", "toolset": args.toolset, "n": args.n, "latency_s": args.latency,
                      "per_actor": args.per_actor, "cores": os.cpu_count(), "rows": rows,
                      f"efficiency_at_{top['actors']}": efficiency}))


if __name__ == "__main__":
    main()
