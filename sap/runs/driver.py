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

from sap.agents.config import AgentsConfig, build_agents, prompt_hashes
from sap.drops import DropReason
from sap.graphs.synthesis import SynthesisContext, synthesis_graph, toolset_hash
from sap.llm import Budget, BudgetExceeded, LLMClient, LLMRoleError
from sap.llm.secrets import redact
from sap.model import FSM, Toolset
from sap.runs.health import RunHealth, is_infrastructure
from sap.runs.slots import ScheduledHistogram, histogram_bound, slot_input
from sap.store.lease import LEASE_SECONDS
from sap.store.runs import RunStore, StoreError, is_transient_db_error
from sap.version import __version__

DB_PAUSE_SECONDS = 1.0  # a slot whose checkpoint write found the database busy waits this long before going on
IDLE_POLL_SECONDS = 0.2  # PostgreSQL: how often an idle slot thread looks for a slot another worker gave up
_SQLITE_IDLE_WAIT = 5.0  # SQLite: only this process's slots end; the wait is woken by them, this is a backstop


class FingerprintMismatch(StoreError):
    """A run is resumed with settings, tool docs or a sap version other than those it started with."""


def fingerprint_parts(toolset: Toolset, config: dict[str, Any]) -> dict[str, Any]:
    """What a run's output depends on: its config (seed, target, mix, limits, agents), the tool docs, sap's version
    and, when LLM agents are configured, the hash of every prompt file."""
    parts = {"config": config, "tool_docs": toolset_hash(toolset), "sap_version": __version__}
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


def start_run(store: RunStore, toolset: Toolset, config: dict[str, Any], live: dict[str, Any] | None = None) -> str:
    """Create a run: build and verify its FSM now with the configured FSM builder (rule or LLM, or one in `live`,
    SynthesisContext objects given from Python), store it with the config and fingerprint (and, if the rule FSM
    stood in for an LLM draft, why); the run id."""
    builder, client = {}, LLMClient()
    if config.get("agents"):
        agents = build_agents(AgentsConfig.model_validate(config["agents"]), client)
        builder = {"fsm_builder": agents["fsm_builder"]}
    ctx = SynthesisContext(toolset=toolset, run_seed=config["seed"], **config["context"], **{**builder, **(live or {})})
    _, fsm = ctx.fsm()
    stored = fsm.model_dump(mode="json", by_alias=True)
    if (note := ctx.fsm_fallback()) is not None:
        stored["fallback_note"] = note
    parts = fingerprint_parts(toolset, config)
    run_id = store.create_run(toolset.name, config, config["seed"], config["target"], fingerprint(parts), parts,
                              stored, toolset.source)
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
    why: str | None = None  # why a run stopped before its end (paused by an outage, failing), else None


class RunDriver:
    """Works on one stored run: claims slots in order, runs or resumes each slot's thread, stores outcomes."""

    ready_below: Callable[[int], int] | None = staticmethod(histogram_bound)  # a new slot waits for the slots below

    def __init__(self, store: RunStore, run_id: str, toolset: Toolset, checkpointer: Any,
                 worker: str | None = None, lease_seconds: float = LEASE_SECONDS,
                 max_cost: float | None = None, live: dict[str, Any] | None = None) -> None:
        """`live`: SynthesisContext objects given from Python (agents, a timing dict), not stored with the run."""
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
                                    fsm_note=stored_fsm.get("fallback_note"), **self.config["context"],
                                    **{**agents, **(live or {})})
        self.graph = synthesis_graph(checkpointer)
        self.histogram = ScheduledHistogram(lambda lo, hi: store.tool_calls_between(run_id, lo, hi))

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

    def admit(self) -> None:
        """Check the fingerprint and hold the run (SQLite): FingerprintMismatch or RunConflict if this worker may
        not work on it; repeating it is harmless."""
        self.check_fingerprint()
        self.store.acquire(self.run_id, self.worker, self.lease_seconds)

    def _outcome(self, index: int) -> dict[str, Any]:
        """Run slot `index` to its end: from its checkpoint if it has one, else from the start."""
        cfg = {"configurable": {"thread_id": f"{self.run_id}:{index}"}}
        snap = self.graph.get_state(cfg)
        if snap.values and not snap.next and not snap.tasks and "record" in snap.values:
            return snap.values  # finished before the process stopped, outcome not yet stored
        if snap.values:
            return self.graph.invoke(None, cfg, context=self.ctx, durability="sync")
        return self.graph.invoke(self._slot_input(index), cfg, context=self.ctx, durability="sync")

    def _slot_input(self, index: int) -> dict[str, Any]:
        """The graph's input for a slot that has no checkpoint yet."""
        return slot_input(self.ctx.run_seed, index, self.histogram.for_slot(index), self.config.get("mix"))

    def run(self, on_record: Callable[[dict[str, Any]], None] | None = None,
            on_slot: Callable[[int, str], None] | None = None, concurrency: int = 1) -> RunProgress:
        """Fill the run's target (or exhaust its slot budget) with `concurrency` slots in flight at once.

        A slot's input depends only on the seed and on the slots below its histogram bound, which have all
        finished before it is made, so the records are byte-identical at any concurrency, with any number of
        workers and after any interruption."""
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.admit()
        self._stop, self._status, self._callback_lock = threading.Event(), "running", threading.Lock()
        self._usage_lock = threading.Lock()
        self._slot_ends, self._ended = threading.Condition(), 0
        self.health, self._why = RunHealth(), None
        self.store.set_status(self.run_id, "running")
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
                           self._status, self._why)

    def _end(self, status: str, why: str | None = None) -> None:
        """Record why the run stops and tell every slot thread to start no new slot."""
        if self._status == "running":  # the first reason to stop is the one reported
            self._status, self._why = status, why
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
        waited = False
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
            index = self.store.next_slot(self.run_id, self.worker, self.lease_seconds, self.ready_below)
            if index is None:  # other workers (or threads) hold the last slots the target needs, or the slots
                self._wait_idle(seen)  # a new slot's histogram reads: wait for them
                waited = True
                continue
            if waited:  # one slot's end wakes one idle thread: pass the wake on, a schedule gate may have opened
                self._wake_idle()
                waited = False
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
                if exc.kind == "transient":  # an outage is not the slot's fault: it goes back to pending
                    self.store.unclaim(self.run_id, index, self.worker)
                    self._wake_idle()
                    if (why := self.health.transient(str(exc), exc.timed_out)) is not None:
                        self._end("paused", why)
                    continue
                out = {"record": None, "drop_reason": str(exc), "drop_kind": DropReason.ROLE_FAILED.value,
                       "status": "failed"}
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM mid-slot: the slot goes back to pending, checkpoint kept
                self.store.unclaim(self.run_id, index, self.worker)
                raise
            except Exception as exc:  # a bug in this trajectory (a tool, sample_config, a role): only its slot fails
                if is_transient_db_error(exc):  # the checkpoints' database is busy: the slot waits, then continues
                    self.store.unclaim(self.run_id, index, self.worker)
                    self._wake_idle()
                    if (why := self.health.transient(f"run database: {exc}", False)) is not None:
                        self._end("paused", why)
                    self._stop.wait(DB_PAUSE_SECONDS)
                    continue
                if is_infrastructure(exc):
                    raise
                out = {"record": None, "drop_reason": redact(f"{type(exc).__name__}: {exc}"),
                       "drop_kind": DropReason.CRASHED.value, "status": "failed"}
            finally:  # one save at a time per process: concurrent first saves would both insert the worker's row,
                with self._usage_lock:  # and the snapshot taken last is the one stored
                    usage = self.client.ledger.snapshot()
                    if usage["roles"]:
                        self.store.save_usage(self.run_id, self.worker, usage)
            record = out.get("record")
            stored = not lease.lost and self.store.finish(
                self.run_id, index, self.worker, record, out.get("drop_reason"), out.get("verdict"),
                failed=out.get("status") == "failed", kind=out.get("drop_kind"))
            self._wake_idle()
            if not stored:
                self.lost.append(index)
                continue
            failed = out.get("drop_reason") if out.get("status") == "failed" else None
            if (why := self.health.finished(failed)) is not None:
                self._end("failing", why)
            self.checkpointer.delete_thread(f"{self.run_id}:{index}")
            with self._callback_lock:
                if record is not None and on_record is not None:
                    on_record(record)
                if on_slot is not None:
                    on_slot(index, out.get("status", ""))
