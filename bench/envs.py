"""sap.envs throughput: a scripted policy plays every task's ground truth, one step per assistant message, through
ToolEnv in process and through the HTTP server (a keep-alive httpx client, 1 and 4 client threads); steps/s and
episodes/s side by side, with the HTTP overhead as a ratio. Every episode must score graduated 1.0. The figures
are printed last as one JSON line."""
from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from sap.api import synthesize
from sap.envs import EnvServer, TaskCatalog, ToolEnv, gold_message
from sap.eval.tasks import EvalTask, tasks_from_records

DONE = {"role": "assistant", "content": "Done."}


def script(task: EvalTask) -> list[dict[str, Any]]:
    """The assistant messages that play `task`'s ground truth: per turn, one message of its calls, then text."""
    return [m for t, turn in enumerate(task.turns) for m in ([gold_message(task, t)] if turn.gold else []) + [DONE]]


def in_process(catalog: TaskCatalog) -> int:
    """Steps made playing every task once in process."""
    steps = 0
    for task in catalog:
        env = ToolEnv(task)
        env.reset()
        for message in script(task):
            step = env.step(message)
            steps += 1
        assert step.reward and step.reward["graduated"] == 1.0, (task.id, step.reward)
    return steps


def over_http(url: str, catalog: TaskCatalog, indices: list[int]) -> int:
    """Steps made playing the tasks at `indices` over HTTP with one client."""
    steps = 0
    with httpx.Client(base_url=url) as http:
        for i in indices:
            session = http.post("/reset", json={"index": i}).json()["session"]
            for message in script(catalog.tasks[i]):
                answer = http.post("/step", json={"session": session, "message": message}).json()
                steps += 1
            assert answer["reward"]["graduated"] == 1.0, answer
    return steps


def timed(fn: Callable[[], int]) -> tuple[int, float]:
    """(steps, seconds) of one run of `fn`."""
    start = time.perf_counter()
    steps = fn()
    return steps, time.perf_counter() - start


def main() -> None:
    """Synthesize the tasks, play them both ways, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=40, help="records per built-in toolset")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    records = [r for name in ("filesystem", "store", "travel") for r in synthesize(name, args.n, seed=args.seed).records]
    catalog = TaskCatalog(tasks_from_records(enumerate(records), "bench"), "bench")
    server = EnvServer(catalog)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    everything = list(range(len(catalog)))
    results: dict[str, dict[str, float]] = {}
    try:
        runs = {
            "in_process": lambda: in_process(catalog),
            "http_1_client": lambda: over_http(server.url, catalog, everything),
            "http_4_clients": lambda: sum(f.result() for f in [
                pool.submit(over_http, server.url, catalog, everything[k::4]) for k in range(4)]),
        }
        with ThreadPoolExecutor(max_workers=4) as pool:
            for name, fn in runs.items():
                steps, seconds = timed(fn)
                results[name] = {"steps": steps, "seconds": round(seconds, 3),
                                 "steps_per_s": round(steps / seconds, 1),
                                 "episodes_per_s": round(len(catalog) / seconds, 1)}
    finally:
        server.shutdown()
        server.server_close()
    base = results["in_process"]["steps_per_s"]
    for name, r in results.items():
        print(f"{name:15s} {r['steps']} steps in {r['seconds']:.2f} s: {r['steps_per_s']:8.1f} steps/s, "
              f"{r['episodes_per_s']:6.1f} episodes/s, {r['steps_per_s'] / base:.2f}x in-process")
    print(json.dumps({"bench": "envs", "tasks": len(catalog), **results,
                      "http_over_in_process": round(results["http_1_client"]["steps_per_s"] / base, 3)}))


if __name__ == "__main__":
    main()
