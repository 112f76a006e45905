"""Checkpointing cost, side by side: no checkpointer, in-memory, SQLite (NORMAL, FULL) and PostgreSQL.

Each backend runs the same slots (durability="sync", one thread per slot), once with the offline agents and
once with a simulated 50 ms latency per agent call (planner, messenger, judge), as an LLM backend would add.
Prints trajectories/s and the ratio to no checkpointer per backend, then all figures as one JSON line.
Target: with the simulated latency, SQLite costs <= 5% throughput. PostgreSQL runs when --pg URL (or
SAP_TEST_PG_URL) names a server; a scratch database is created there and dropped.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import tempfile
import time
from typing import Any, Iterator

from langgraph.checkpoint.memory import InMemorySaver

from sap.agents.judge import RuleJudge
from sap.agents.messenger import RuleMessenger
from sap.agents.planner import RulePlanner
from sap.graphs.synthesis import SynthesisContext, synthesis_graph
from sap.runs.slots import slot_input
from sap.store.checkpoint import checkpointer_for
from sap.toolsets import load_toolset


class Slow:
    """An agent that waits `delay` seconds before each call, then delegates (a stand-in for LLM latency)."""

    def __init__(self, inner: Any, method: str, delay: float) -> None:
        self.inner, self.method, self.delay = inner, method, delay

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name != self.method:
            return attr

        def slow(*args: Any, **kwargs: Any) -> Any:
            time.sleep(self.delay)
            return attr(*args, **kwargs)
        return slow


@contextlib.contextmanager
def backend(name: str, pg_url: str | None) -> Iterator[Any]:
    """The checkpointer called `name` (None for no checkpointer), on scratch storage."""
    if name == "none":
        yield None
    elif name == "memory":
        yield InMemorySaver()
    elif name.startswith("sqlite"):
        with tempfile.TemporaryDirectory() as tmp:
            with checkpointer_for(f"sqlite:///{tmp}/bench.db", full_sync=name == "sqlite_full") as saver:
                yield saver
    else:
        import psycopg

        db = f"sap_bench_{secrets.token_hex(3)}"
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{db}"')
        try:
            with checkpointer_for(pg_url.rsplit("/", 1)[0] + "/" + db) as saver:
                yield saver
        finally:
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE "{db}" WITH (FORCE)')


def measure(toolset_name: str, name: str, n: int, delay: float, pg_url: str | None) -> float:
    """Trajectories per second for one backend and agent latency."""
    toolset = load_toolset(toolset_name)
    agents = {"planner": RulePlanner(), "messenger": RuleMessenger(), "judge": RuleJudge()}
    if delay:
        agents = {"planner": Slow(agents["planner"], "bind", delay),
                  "messenger": Slow(agents["messenger"], "write", delay),
                  "judge": Slow(agents["judge"], "judge", delay)}
    ctx = SynthesisContext(toolset=toolset, **agents)
    ctx.fsm()
    with backend(name, pg_url) as saver:
        graph = synthesis_graph(saver)
        start = time.perf_counter()
        for index in range(n):
            cfg = {"configurable": {"thread_id": f"bench:{index}"}}
            extra = {"durability": "sync"} if saver is not None else {}  # durability needs a checkpointer
            graph.invoke(slot_input(0, index, {}, None), cfg, context=ctx, **extra)
        return n / (time.perf_counter() - start)


def main() -> None:
    """Run every backend in both modes and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--toolset", default="store")
    parser.add_argument("-n", type=int, default=40, help="slots per backend, offline")
    parser.add_argument("--n-latency", type=int, default=8, help="slots per backend with simulated latency")
    parser.add_argument("--pg", default=os.environ.get("SAP_TEST_PG_URL"))
    args = parser.parse_args()
    names = ["none", "memory", "sqlite_normal", "sqlite_full"] + (["postgres"] if args.pg else [])
    results: dict[str, dict[str, Any]] = {}
    for mode, n, delay in (("offline", args.n, 0.0), ("latency_50ms", args.n_latency, 0.05)):
        rates = {name: measure(args.toolset, name, n, delay, args.pg) for name in names}
        base = rates["none"]
        results[mode] = {name: {"trajectories_per_s": round(r, 2), "ratio_to_none": round(r / base, 3)}
                         for name, r in rates.items()}
        for name, r in rates.items():
            print(f"{mode:<13} {name:<14} {r:7.2f} traj/s  ratio {r / base:.3f}")
    sqlite_cost = 1 - results["latency_50ms"]["sqlite_normal"]["ratio_to_none"]
    print(json.dumps({"bench": "checkpoint", "toolset": args.toolset, "results": results,
                      "sqlite_normal_cost_with_latency": round(sqlite_cost, 3), "target_cost": 0.05}))


if __name__ == "__main__":
    main()
