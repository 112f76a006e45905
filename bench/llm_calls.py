"""LLM calls and tokens per accepted trajectory by role, and throughput under a simulated 200 ms model latency
at concurrency 1, 8 and 32 against the ideal (concurrency / critical-path latency).

The model is sap.testing's RoleModel behind a ScriptedLLMServer in its own process (real HTTP, on sap's direct
OpenAI wire as for any server at an api_base),
so it answers every role validly and the figures show sap's own call pattern and overheads. The per-call
pattern of the SAP paper (one planner and one message call per tool call, plus the judge) is printed beside
the measured calls. Runs go through RunDriver on a SQLite run database with checkpoints, as `sap synthesize`
does. Targets: at 32, >= 0.8 of ideal; fewer calls than the per-call pattern. Last line: one JSON object.

CPU, not wall time, explains the ratio (and is robust to other load on the machine): every throughput row gives
the process's CPU ms per slot and per LLM call (time.process_time; the model server's CPU is its own process's)
and the CPU-bound ceiling, the slots/s that this CPU per slot allows under one GIL (1000 / CPU ms per slot).
A yappi run (CPU clock) at --split-concurrency splits the CPU per slot by component; its shares are applied to
the unprofiled CPU per slot, since the profiler's own overhead inflates every component. With PostgreSQL
(--pg-url or $SAP_TEST_PG_URL), the highest concurrency is also split over --workers `sap worker` processes, beside
the CPU-bound ceiling of that many processes.

First of all, the CPU of one LLM call on sap's path (`LLMClient.complete`) beside a bare httpx request of the same
chat completion to the same scripted server (target: <= 3x).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, ContextManager, Iterator

from pydantic import BaseModel

from sap.agents.config import build_agents_config
from sap.graphs import synthesis
from sap.llm import LLMClient, ModelConfig, client, usage, wire
from sap.runs.driver import RunDriver, run_config, start_run
from sap.store import runs
from sap.store.checkpoint import checkpointer_for
from sap.store.runs import RunStore
from sap.toolsets import load_toolset

_HTTP_PACKAGES = ("/litellm/", "/openai/", "/httpx/", "/httpcore/", "/h11/", "/anyio/", "/aiohttp/")
_SERVER = """
import sys, time
from sap.testing.role_model import role_model
from sap.testing.scripted_llm import ScriptedLLMServer
responder = role_model if sys.argv[2] == "roles" else (lambda request: '{"ok": true}')
with ScriptedLLMServer(responder=responder, latency=float(sys.argv[1])) as server:
    print(server.api_base, flush=True)
    sys.stdin.read()
"""


class Ok(BaseModel):
    """The answer of the call-path comparison's server."""

    ok: bool


@contextlib.contextmanager
def model_server(latency: float, answers: str = "roles") -> Iterator[str]:
    """A scripted model server in a child process (its own GIL), answering as RoleModel (`roles`) or always
    {"ok": true} (`ok`); yields its api_base."""
    proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(latency), answers], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        yield proc.stdout.readline().strip()
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def run_once(toolset_name: str, api_base: str, n: int, mode: str, concurrency: int, seed: int,
             around: Callable[[], ContextManager[Any]] = contextlib.nullcontext) -> dict[str, Any]:
    """One stored run with every role on the model: wall time, CPU time, slots, accepted, usage by role.
    The times (and `around`, e.g. a profiler) cover the slots only, not the run's creation (FSM build)."""
    agents = build_agents_config(agents="llm", message_mode=mode, model_overrides={  # one model name per limit:
        "model": f"openai/rolemodel-c{concurrency}", "api_base": api_base,  # limiters are per (model, api_base)
        "concurrency": max(concurrency, 8), "timeout": 30})
    toolset = load_toolset(toolset_name)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        store = RunStore(url)
        run_id = start_run(store, toolset, run_config(n, seed, None, {}, agents=agents))
        with checkpointer_for(url) as saver:
            driver = RunDriver(store, run_id, toolset, saver)
            with around():
                start, cpu_start = time.perf_counter(), time.process_time()
                progress = driver.run(concurrency=concurrency)
                wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        records = store.records(run_id)
        used = store.usage(run_id).snapshot()
    return {"wall_s": wall, "cpu_s": cpu, "slots": progress.slots, "accepted": progress.accepted,
            "tool_calls": sum(len(r["provenance"]) for r in records), "usage": used}


@contextlib.contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new database on the PostgreSQL server of `server_url`, dropped afterwards."""
    import psycopg

    name = f"sap_bench_{secrets.token_hex(4)}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def run_workers(toolset_name: str, api_base: str, db: str, n: int, workers: int, concurrency: int, seed: int,
                model: str) -> dict[str, Any]:
    """One stored run on the database `db` worked by `workers` `sap worker` processes, `concurrency` slots in
    flight in each: wall time from their start to the last one's end, the workers' CPU seconds, slots, accepted
    and usage."""
    agents = build_agents_config(agents="llm", message_mode="per_turn", model_overrides={
        "model": model, "api_base": api_base, "concurrency": max(concurrency, 8), "timeout": 30})
    store = RunStore(db)
    run_id = start_run(store, load_toolset(toolset_name), run_config(n, seed, None, {}, agents=agents))
    with checkpointer_for(db):  # the checkpoint tables exist before the workers start
        pass
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "sap.cli", "worker", run_id, "--db", db, "--concurrency",
                               str(concurrency)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for _ in range(workers)]
    cpu = 0.0
    for proc in procs:
        _, status, rusage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        cpu += rusage.ru_utime + rusage.ru_stime
    seconds = time.perf_counter() - start
    errors = [proc.stderr.read() for proc in procs if proc.stderr is not None]
    if any(proc.returncode for proc in procs):
        raise SystemExit(f"a worker failed: {errors}")
    counts = store.counts(run_id)
    return {"wall_s": seconds, "cpu_s": cpu, "slots": sum(counts.values()), "accepted": counts.get("accepted", 0),
            "usage": store.usage(run_id).snapshot()}


def _in(module: Any) -> str:
    """The source file of a module, as yappi names it."""
    return module.__file__


def cpu_split(toolset: str, api_base: str, concurrency: int, seed: int) -> dict[str, float]:
    """CPU shares per slot by component, from one run under yappi's CPU clock (inclusive times at the boundaries
    where sap hands work to LiteLLM or httpx, the checkpointer and the run store). `http_and_litellm` is what the
    LLM client's calls spend in LiteLLM (the openai SDK it drives included) and in httpx (the direct wire)."""
    import yappi  # a dev dependency, needed only here
    from langgraph.checkpoint import sqlite as sqlite_saver

    @contextlib.contextmanager
    def profiled() -> Iterator[None]:
        yappi.set_clock_type("cpu")
        yappi.clear_stats()
        yappi.start(builtins=False)
        try:
            yield
        finally:
            yappi.stop()

    run_once(toolset, api_base, max(3, 2 * concurrency), "per_turn", concurrency, seed, around=profiled)
    stats = list(yappi.get_func_stats())
    total = sum(s.tsub for s in stats)

    def inclusive(module: Any, names: set[str]) -> float:
        return sum(s.ttot for s in stats if s.module == _in(module) and s.name.rsplit(".", 1)[-1] in names)

    http_s = sum(child.ttot for s in stats if s.module in (_in(client), _in(usage), _in(wire))
                 for child in s.children if any(part in child.module for part in _HTTP_PACKAGES))
    in_client = inclusive(client, {"_call", "chat"})  # coroutines on the LLM loop thread, LiteLLM included
    waiting = inclusive(client, {"complete", "acomplete"})  # a slot thread handing a call to the loop thread
    nodes = inclusive(synthesis, {"load_fsm", "sample_path", "plan_call", "execute_call", "group_parallel",
                                  "write_messages", "check", "judge", "rewrite_variant", "persist"})
    checkpoint = inclusive(sqlite_saver, {"put", "put_writes", "get_tuple", "delete_thread"})
    store = sum(s.ttot for s in stats if s.module == _in(runs) and s.name.startswith("RunStore.")
                and not s.name.split(".", 1)[1].startswith("_"))
    parts = {"http_and_litellm": http_s, "sap_llm_client": in_client + waiting - http_s, "graph_nodes": nodes - waiting,
             "checkpoint_writes": checkpoint, "run_store": store}
    parts["langgraph_runtime_and_other"] = total - sum(parts.values())
    return {name: round(value / total, 3) for name, value in parts.items()}


def call_path_cpu(calls: int) -> dict[str, float]:
    """CPU ms per request, sequential, to one scripted server answering at once: a bare httpx POST of the chat
    completion LiteLLM would send, beside sap's `LLMClient.complete` (LiteLLM, limits, retries, validation and
    accounting) with the same messages and schema; the ratio is sap's cost over the HTTP request's own."""
    import httpx

    messages = [{"role": "system", "content": "You judge dialogues. " * 40},
                {"role": "user", "content": "Is this dialogue coherent? " * 60}]
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    body = {"model": "rolemodel-path", "messages": messages, "temperature": 0.7, "max_tokens": 1024,
            "response_format": {"type": "json_schema", "json_schema": {"name": "Ok", "schema": schema,
                                                                       "strict": False}}}
    with model_server(0.0, answers="ok") as api_base:
        cfg = ModelConfig(model="openai/rolemodel-path", api_base=api_base, timeout=30)
        llm = LLMClient()
        with httpx.Client(base_url=api_base, timeout=30) as http:
            for _ in range(5):  # warm both paths: connections, imports, the loop thread
                http.post("/chat/completions", json=body).raise_for_status()
                llm.complete("judge", cfg, messages, Ok)
            start = time.process_time()
            for _ in range(calls):
                http.post("/chat/completions", json=body).raise_for_status()
            bare = 1000 * (time.process_time() - start) / calls
        start = time.process_time()
        for _ in range(calls):
            llm.complete("judge", cfg, messages, Ok)
        sap_ms = 1000 * (time.process_time() - start) / calls
    return {"bare_httpx_cpu_ms": round(bare, 2), "sap_llm_call_cpu_ms": round(sap_ms, 2),
            "ratio": round(sap_ms / bare, 2)}


def calls_table(toolset: str, api_base: str, n: int, mode: str) -> dict[str, Any]:
    """Calls and tokens per accepted trajectory, by role, beside the per-call pattern."""
    out = run_once(toolset, api_base, n, mode, 1, seed=1)
    accepted = out["accepted"]
    roles = {role: {"calls": round(u["calls"] / accepted, 2),
                    "tokens": round((u["prompt_tokens"] + u["completion_tokens"]) / accepted, 1)}
             for role, u in out["usage"]["roles"].items()}
    per_call_pattern = round((2 * out["tool_calls"] + accepted) / accepted, 2)
    total = round(out["usage"]["total"]["calls"] / accepted, 2)
    return {"toolset": toolset, "mode": mode, "accepted": accepted, "tool_calls_per_trajectory":
            round(out["tool_calls"] / accepted, 2), "llm_calls_per_trajectory": total,
            "per_call_pattern": per_call_pattern, "by_role": roles}


def workers_row(args: argparse.Namespace, api_base: str, pg_url: str, concurrency: int) -> dict[str, Any]:
    """The same total concurrency split over `--workers` `sap worker` processes on PostgreSQL: slots/s against
    the ideal, and against the CPU-bound ceiling of that many processes (each on its own GIL; a core each where
    the machine has them)."""
    each = max(1, concurrency // args.workers)
    n = max(3, 4 * each * args.workers)
    with fresh_database(pg_url) as db:
        out = run_workers(args.toolset, api_base, db, n, args.workers, each, seed=4,
                          model=f"openai/rolemodel-w{args.workers}")
    calls_per_slot = out["usage"]["total"]["calls"] / out["slots"]
    ideal = each * args.workers / (calls_per_slot * args.latency)
    measured = out["slots"] / out["wall_s"]
    cpu_ms_per_slot = 1000 * out["cpu_s"] / out["slots"]
    ceiling = args.workers * 1000 / cpu_ms_per_slot
    return {"workers": args.workers, "concurrency_each": each, "slots": out["slots"],
            "slots_per_s": round(measured, 3), "ideal_slots_per_s": round(ideal, 3),
            "ratio_to_ideal": round(measured / ideal, 3), "cpu_ms_per_slot": round(cpu_ms_per_slot, 1),
            "cpu_ceiling_slots_per_s": round(ceiling, 3),
            "cpu_ceiling_ratio_to_ideal": round(min(ceiling, ideal) / ideal, 3),
            "share_of_ceiling": round(measured / min(ceiling, ideal), 3)}


def main() -> None:
    """Print the call table, then the throughput table, then one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--toolset", default="store")
    parser.add_argument("-n", type=int, default=20, help="accepted trajectories per call-count run")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--split-concurrency", type=int, default=8, help="concurrency of the profiled run")
    parser.add_argument("--skip-calls", action="store_true", help="only the throughput and CPU figures")
    parser.add_argument("--path-calls", type=int, default=300, help="requests of the call-path CPU comparison")
    parser.add_argument("--workers", type=int, default=2, help="sap worker processes sharing the highest "
                        "concurrency on PostgreSQL (--pg-url, else $SAP_TEST_PG_URL; skipped without one)")
    parser.add_argument("--pg-url", help="PostgreSQL server for the workers row")
    args = parser.parse_args()
    levels = [int(x) for x in args.concurrency.split(",")]
    if args.split_concurrency not in levels:
        parser.error(f"--split-concurrency {args.split_concurrency} is not one of --concurrency {args.concurrency}")
    path = call_path_cpu(args.path_calls)
    print(f"one LLM call, CPU: bare httpx request {path['bare_httpx_cpu_ms']:.2f} ms, sap's LLMClient.complete "
          f"{path['sap_llm_call_cpu_ms']:.2f} ms, ratio {path['ratio']:.2f} (target <= 3)")
    tables = []
    with model_server(0.0) as api_base:
        for toolset in () if args.skip_calls else ("filesystem", "store", "travel"):
            for mode in ("per_turn", "global"):
                row = calls_table(toolset, api_base, args.n, mode)
                tables.append(row)
                print(f"{toolset:<11} {mode:<9} {row['llm_calls_per_trajectory']:6.2f} LLM calls/trajectory "
                      f"(per-call pattern {row['per_call_pattern']:.2f}; {row['tool_calls_per_trajectory']:.2f} tool "
                      f"calls) by role, requests (tokens): " + ", ".join(f"{r} {v['calls']} ({v['tokens']:.0f})"
                                                                        for r, v in row["by_role"].items()))
    throughput = {}
    with model_server(args.latency) as api_base:
        for c in levels:
            n = max(3, 4 * c)  # several waves of slots, so the tail of the last one weighs less
            out = run_once(args.toolset, api_base, n, "per_turn", c, seed=2)
            calls_per_slot = out["usage"]["total"]["calls"] / out["slots"]
            ideal = c / (calls_per_slot * args.latency)  # slots/s if only the model's latency counted
            measured = out["slots"] / out["wall_s"]
            cpu_ms_per_slot = 1000 * out["cpu_s"] / out["slots"]
            ceiling = 1000 / cpu_ms_per_slot  # slots/s if the process did nothing but its CPU work, on one GIL
            throughput[str(c)] = {"slots_per_s": round(measured, 3), "ideal_slots_per_s": round(ideal, 3),
                                  "ratio_to_ideal": round(measured / ideal, 3), "slots": out["slots"],
                                  "llm_calls_per_slot": round(calls_per_slot, 2),
                                  "cpu_ms_per_slot": round(cpu_ms_per_slot, 1),
                                  "cpu_ms_per_call": round(cpu_ms_per_slot / calls_per_slot, 2),
                                  "cpu_ceiling_slots_per_s": round(ceiling, 3),
                                  "cpu_ceiling_ratio_to_ideal": round(min(ceiling, ideal) / ideal, 3)}
            print(f"concurrency {c:>2}: {measured:6.3f} slots/s, ideal {ideal:6.3f} "
                  f"({calls_per_slot:.1f} sequential calls x {args.latency * 1000:.0f} ms), "
                  f"ratio {measured / ideal:.2f}; "
                  f"CPU {cpu_ms_per_slot:.0f} ms/slot ({cpu_ms_per_slot / calls_per_slot:.1f} ms/call), "
                  f"CPU-bound ceiling {ceiling:.2f} slots/s ({min(ceiling, ideal) / ideal:.2f} of ideal)")
        split = cpu_split(args.toolset, api_base, args.split_concurrency, seed=3)
        pg_url = args.pg_url or os.environ.get("SAP_TEST_PG_URL")
        workers = workers_row(args, api_base, pg_url, max(levels)) if pg_url and args.workers > 1 else None
    cpu_ms = throughput[str(args.split_concurrency)]["cpu_ms_per_slot"]
    split_ms = {name: round(share * cpu_ms, 1) for name, share in split.items()}
    print(f"CPU per slot by component (yappi shares at concurrency {args.split_concurrency}, of {cpu_ms:.0f} ms): "
          + ", ".join(f"{name} {ms:.0f} ms" for name, ms in split_ms.items()))
    if workers is not None:
        print(f"{workers['workers']} sap workers x {workers['concurrency_each']} slots (PostgreSQL): "
              f"{workers['slots_per_s']:.3f} slots/s, ideal {workers['ideal_slots_per_s']:.3f}, ratio "
              f"{workers['ratio_to_ideal']:.2f}; CPU {workers['cpu_ms_per_slot']:.0f} ms/slot, CPU-bound ceiling of "
              f"the workers together {workers['cpu_ceiling_slots_per_s']:.2f} slots/s "
              f"({workers['cpu_ceiling_ratio_to_ideal']:.2f} of ideal), reached {workers['share_of_ceiling']:.2f}")
    print(json.dumps({"bench": "llm_calls", "latency_s": args.latency, "call_path_cpu_ms": path, "calls": tables,
                      "throughput": throughput, "workers": workers,
                      "cpu_split_ms_per_slot": split_ms, "cpu_split_concurrency": args.split_concurrency,
                      "target_ratio_at_32": 0.8}))


if __name__ == "__main__":
    main()
