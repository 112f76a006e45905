"""Durable runs: slots claimed from the run store, each a checkpointed LangGraph thread that resumes where it stopped."""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import socket
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable

from sqlalchemy.exc import SQLAlchemyError

import sap
from sap.agents.config import AgentsConfig, build_agents, prompt_hashes
from sap.api import slot_input
from sap.graphs.synthesis import SynthesisContext, synthesis_graph, toolset_hash
from sap.llm import Budget, BudgetExceeded, LLMClient, LLMRoleError
from sap.model import FSM, Toolset
from sap.store.runs import RunStore, StoreError

LEASE_SECONDS = 60.0
IDLE_POLL_SECONDS = 0.2  # PostgreSQL: how often an idle slot thread looks for a slot another worker gave up
_SQLITE_IDLE_WAIT = 5.0  # SQLite: only this process's slots end; the wait is woken by them, this is a backstop


class FingerprintMismatch(StoreError):
    """A run is resumed with settings, tool docs or a sap version other than those it started with."""


def fingerprint_parts(toolset: Toolset, config: dict[str, Any]) -> dict[str, Any]:
    """What a run's output depends on: its config (seed, target, mix, limits, agents), the tool docs, sap's version
    and, when LLM agents are configured, the hash of every prompt file."""
    parts = {"config": config, "tool_docs": toolset_hash(toolset), "sap_version": sap.__version__}
    if config.get("agents"):
        parts["prompts"] = prompt_hashes()
    return parts


def fingerprint(parts: dict[str, Any]) -> str:
    """The hash of the fingerprint parts."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def describe_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    """What differs between two fingerprint parts, in words (`n: 20 -> 30; tool docs changed`)."""
    changes = []
    for key in sorted(set(old["config"]) | set(new["config"])):
        a, b = old["config"].get(key), new["config"].get(key)
        if a != b:
            changes.append(f"{key}: {a!r} -> {b!r}")
    if old["tool_docs"] != new["tool_docs"]:
        changes.append(f"tool docs changed (hash {old['tool_docs']} -> {new['tool_docs']})")
    if old["sap_version"] != new["sap_version"]:
        changes.append(f"sap version {old['sap_version']} -> {new['sap_version']}")
    old_prompts, new_prompts = old.get("prompts", {}), new.get("prompts", {})
    changed = sorted(k for k in set(old_prompts) | set(new_prompts) if old_prompts.get(k) != new_prompts.get(k))
    if changed:
        changes.append(f"prompts changed: {', '.join(changed)}")
    return "; ".join(changes) or "nothing visible (fingerprint differs)"


def run_config(n: int, seed: int, mix: dict[str, float] | None, context: dict[str, Any],
               max_slots: int | None = None, agents: AgentsConfig | None = None) -> dict[str, Any]:
    """The settings a run is created with (and fingerprinted by); `agents` only when a role uses an LLM."""
    config = {"target": n, "seed": seed, "mix": mix, "context": context,
              "max_slots": max_slots if max_slots is not None else 5 * n + 20}
    if agents is not None and agents.uses_llm():
        config["agents"] = agents.public()
    return config


def start_run(store: RunStore, toolset: Toolset, config: dict[str, Any]) -> str:
    """Create a run: build and verify its FSM now with the configured FSM builder (rule or LLM), store it with
    the config and fingerprint (and, if the rule FSM stood in for an LLM draft, why); the run id."""
    builder, client = {}, LLMClient()
    if config.get("agents"):
        agents = build_agents(AgentsConfig.model_validate(config["agents"]), client)
        builder = {"fsm_builder": agents["fsm_builder"]}
    ctx = SynthesisContext(toolset=toolset, run_seed=config["seed"], **config["context"], **builder)
    _, fsm = ctx.fsm()
    stored = fsm.model_dump(mode="json", by_alias=True)
    if (note := ctx.fsm_fallback()) is not None:
        stored["fallback_note"] = note
    parts = fingerprint_parts(toolset, config)
    run_id = store.create_run(toolset.name, config, config["seed"], config["target"], fingerprint(parts), parts,
                              stored)
    if (usage := client.ledger.snapshot())["roles"]:  # the FSM builder's calls count toward the run's usage
        store.save_usage(run_id, "start_run", usage)
    return run_id


def find_resumable(store: RunStore, toolset: Toolset, config: dict[str, Any]) -> tuple[str | None, str | None]:
    """The run the same command continues: (run id, None) for the latest run of this toolset with the same
    fingerprint (unfinished or done, so repeating a command never duplicates work); (None, why) if instead an
    unfinished run of this toolset has other settings; (None, None) if a new run should start."""
    runs = [r for r in store.runs() if r.toolset == toolset.name]
    parts = fingerprint_parts(toolset, config)
    same = [r for r in runs if r.fingerprint == fingerprint(parts)]
    if same:
        return same[-1].id, None
    unfinished = [r for r in runs if r.status == "running"]
    if unfinished:
        latest = unfinished[-1]
        return None, (f"unfinished run {latest.id} has other settings: "
                      f"{describe_change(latest.fingerprint_parts, parts)}")
    return None, None


_DRIVERS = itertools.count(1)


def worker_name() -> str:
    """A new worker of this process: host, pid and a driver number (`host:pid#n`), so a driver started after
    another one in the same process stopped (an exception, Ctrl-C in a notebook) can take over its slots."""
    return f"{socket.gethostname()}:{os.getpid()}#{next(_DRIVERS)}"


class LeaseKeeper:
    """A daemon thread renewing a running slot's lease every lease/3; `lost` once another worker holds the slot."""

    def __init__(self, store: RunStore, run_id: str, index: int, worker: str, lease_seconds: float) -> None:
        self.store, self.run_id, self.index, self.worker = store, run_id, index, worker
        self.lease_seconds = lease_seconds
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease {run_id}:{index}", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        """Renew until stopped or until the slot turns out to be lost."""
        while not self._stop.wait(self.lease_seconds / 3):
            try:
                held = self.store.renew(self.run_id, self.index, self.worker, self.lease_seconds)
            except SQLAlchemyError:  # its own pooled connection; busy, full or unreachable: the next beat retries
                continue
            if not held:
                self.lost = True
                return


@dataclass
class RunProgress:
    """How far a run has got."""

    run_id: str
    accepted: int
    target: int
    slots: int
    status: str


class RunDriver:
    """Works on one stored run: claims slots in order, runs or resumes each slot's thread, stores outcomes."""

    def __init__(self, store: RunStore, run_id: str, toolset: Toolset, checkpointer: Any,
                 worker: str | None = None, lease_seconds: float = LEASE_SECONDS,
                 max_cost: float | None = None) -> None:
        self.store, self.run_id, self.toolset, self.checkpointer = store, run_id, toolset, checkpointer
        self.worker, self.lease_seconds = worker or worker_name(), lease_seconds
        self.lost: list[int] = []  # slots taken over by another worker mid-run: that worker stores the outcome
        run = store.run(run_id)
        self.config = run.config
        self.client = self._client(max_cost)
        agents = build_agents(AgentsConfig.model_validate(self.config["agents"]), self.client) \
            if self.config.get("agents") else {}
        stored_fsm = store.fsm(run_id)
        self.ctx = SynthesisContext(toolset=toolset, run_seed=run.seed, fsm_preset=FSM.model_validate(stored_fsm),
                                    fsm_note=stored_fsm.get("fallback_note"), **self.config["context"], **agents)
        self.graph = synthesis_graph(self.ctx, checkpointer=checkpointer)

    def _client(self, max_cost: float | None) -> LLMClient:
        """This worker's LLM client; its budget is what `max_cost` leaves after the run's usage so far."""
        spent = self.store.usage(self.run_id).spent_usd()
        return LLMClient(budget=Budget(max_cost - spent) if max_cost is not None else None)

    def check_fingerprint(self) -> None:
        """Refuse to continue if the tool docs or sap's version changed since the run started."""
        run = self.store.run(self.run_id)
        parts = fingerprint_parts(self.toolset, self.config)
        if fingerprint(parts) != run.fingerprint:
            raise FingerprintMismatch(f"run {self.run_id} cannot be resumed: "
                                      f"{describe_change(run.fingerprint_parts, parts)}")

    def _outcome(self, index: int) -> dict[str, Any]:
        """Run slot `index` to its end: from its checkpoint if it has one, else from the start."""
        cfg = {"configurable": {"thread_id": f"{self.run_id}:{index}"}}
        snap = self.graph.get_state(cfg)
        if snap.values and not snap.next and not snap.tasks and "record" in snap.values:
            return snap.values  # finished before the process stopped, outcome not yet stored
        if snap.values:
            return self.graph.invoke(None, cfg, durability="sync")
        return self.graph.invoke(self._slot_input(index), cfg, durability="sync")

    def _slot_input(self, index: int) -> dict[str, Any]:
        """The graph's input for a slot that has no checkpoint yet."""
        histogram = self.store.histogram_before(self.run_id, index)
        return slot_input(self.ctx.run_seed, index, histogram, self.config.get("mix"))

    def run(self, on_record: Callable[[dict[str, Any]], None] | None = None,
            on_slot: Callable[[int, str], None] | None = None, concurrency: int = 1) -> RunProgress:
        """Fill the run's target (or exhaust its slot budget) with `concurrency` slots in flight at once.

        At concurrency 1 slots run in index order and a run's bytes do not depend on interruptions; above 1
        the long-tail histogram H a slot starts from depends on which lower slots finished first (as with
        several workers), so records are valid and unique but not byte-identical to a sequential run."""
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.check_fingerprint()
        self.store.acquire(self.run_id, self.worker, self.lease_seconds)
        self._stop, self._status, self._callback_lock = threading.Event(), "running", threading.Lock()
        self._usage_lock = threading.Lock()
        self._slot_ends, self._ended = threading.Condition(), 0
        try:
            if concurrency == 1:
                self._work(on_record, on_slot)
            else:
                with ThreadPoolExecutor(concurrency, thread_name_prefix="sap-slot") as pool:
                    futures = [pool.submit(self._work, on_record, on_slot) for _ in range(concurrency)]
                    try:
                        wait(futures, return_when=FIRST_EXCEPTION)
                    finally:  # an error or Ctrl-C: the other threads start no new slot
                        self._stop.set()
                        self._wake_idle(every=True)
                    for future in futures:
                        future.result()
        finally:
            self.store.release(self.run_id, self.worker, self._status if self._status != "running" else None)
        counts = self.store.counts(self.run_id)
        return RunProgress(self.run_id, counts.get("accepted", 0), self.config["target"], sum(counts.values()),
                           self._status)

    def _end(self, status: str) -> None:
        """Record why the run stops and tell every slot thread to start no new slot."""
        self._status = status
        self._stop.set()
        self._wake_idle(every=True)

    def _wake_idle(self, every: bool = False) -> None:
        """Wake a slot thread waiting for a slot to end (a slot ending frees at most one claim), or `every` one
        when the run stops. Waking all on every end made 30 idle threads query the store after each slot."""
        with self._slot_ends:
            self._ended += 1
            if every:
                self._slot_ends.notify_all()
            else:
                self._slot_ends.notify()

    def _wait_idle(self, seen: int) -> None:
        """Wait until a slot ends after the `seen`-th end (or the run stops). A thread of this process storing an
        outcome wakes it; on PostgreSQL it also looks again every IDLE_POLL_SECONDS, for other workers' slots.
        Polling instead cost CPU under the GIL: run-store queries took 36 of 182 ms CPU per slot at concurrency 8
        (bench/llm_calls.py)."""
        timeout = _SQLITE_IDLE_WAIT if self.store.single_process else IDLE_POLL_SECONDS
        with self._slot_ends:
            self._slot_ends.wait_for(lambda: self._ended != seen or self._stop.is_set(), timeout)

    def _work(self, on_record: Callable[[dict[str, Any]], None] | None,
              on_slot: Callable[[int, str], None] | None) -> None:
        """One slot thread: claim, run and store slots until the run is complete, exhausted or stopped."""
        while not self._stop.is_set():
            counts = self.store.counts(self.run_id)
            target, limit = self.config["target"], self.config["max_slots"]
            if counts.get("accepted", 0) >= target:
                self._end("complete")
                return
            if sum(counts.values()) - counts.get("running", 0) - counts.get("pending", 0) >= limit:
                self._end("exhausted")
                return
            self.store.acquire(self.run_id, self.worker, self.lease_seconds)
            seen = self._ended
            index = self.store.next_slot(self.run_id, self.worker, self.lease_seconds)
            if index is None:  # other workers (or threads) hold the last slots the target needs: wait for them
                self._wait_idle(seen)
                continue
            try:
                with LeaseKeeper(self.store, self.run_id, index, self.worker, self.lease_seconds) as lease:
                    out = self._outcome(index)
            except BudgetExceeded:  # the slot goes back to pending; its checkpoint keeps what it has done
                self.store.unclaim(self.run_id, index, self.worker)
                self._end("budget")
                return
            except LLMRoleError as exc:  # the role gave up on this slot: recorded as failed, with the reason
                if exc.kind == "config":  # no API key: every slot would fail the same way
                    raise
                out = {"record": None, "drop_reason": str(exc), "status": "failed"}
            finally:  # one save at a time per process: concurrent first saves would both insert the worker's row,
                with self._usage_lock:  # and the snapshot taken last is the one stored
                    usage = self.client.ledger.snapshot()
                    if usage["roles"]:
                        self.store.save_usage(self.run_id, self.worker, usage)
            record = out.get("record")
            stored = not lease.lost and self.store.finish(
                self.run_id, index, self.worker, record, out.get("drop_reason"), out.get("verdict"),
                failed=out.get("status") == "failed")
            self._wake_idle()
            if not stored:
                self.lost.append(index)
                continue
            self.checkpointer.delete_thread(f"{self.run_id}:{index}")
            with self._callback_lock:
                if record is not None and on_record is not None:
                    on_record(record)
                if on_slot is not None:
                    on_slot(index, out.get("status", ""))
