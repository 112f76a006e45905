"""The RODS active task pool: per-task recent progress rewards, zones, boundary seed selection, a candidate queue
injected at epoch ends under a cap, and retirement (entry screening, boundary drift, capacity, staleness);
original seed tasks are never retired. State can live in the run store and survives a restart."""
from __future__ import annotations

import math
import random
import statistics
import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, Field

from sap.curriculum.config import PoolConfig

if TYPE_CHECKING:
    from sap.store.runs import RunStore

Zone = Literal["unrated", "mastered", "boundary", "out_of_reach"]
RetireReason = Literal["entry", "drift", "capacity", "stale"]


class PoolTask(BaseModel):
    """One task in the pool: identity, lineage, the record it stands for, and its reward history."""

    id: str
    type: str  # the seeding quota is per type (in sap frontier the category: base, miss_param, miss_func...)
    origin: Literal["seed", "variant"]
    parent: str | None = None  # the seed task a variant was made from
    status: Literal["candidate", "active", "retired"] = "active"
    rewards: list[float] = Field(default_factory=list)  # the most recent `window` progress rewards
    first_rewards: list[float] = Field(default_factory=list)  # the first `entry_rollouts` rewards (entry screening)
    rollouts: int = 0
    queued_at: int | None = None  # candidate queue order
    entered_step: int | None = None
    last_sampled: int | None = None
    last_seeded: int | None = None
    screened: bool = False
    retired_reason: RetireReason | None = None
    retired_step: int | None = None


class SeedSink(Protocol):
    """Where boundary seeds go at an epoch end (the background synthesis)."""

    def submit(self, seeds: list[PoolTask]) -> None:
        """Start making variants of `seeds`; they come back through `ActivePool.offer`."""


@dataclass
class EpochReport:
    """What one `end_epoch` did."""

    epoch: int
    retired: dict[str, list[str]] = field(default_factory=dict)  # reason -> task ids
    injected: list[str] = field(default_factory=list)
    seeds: list[str] = field(default_factory=list)
    size: int = 0


class ActivePool:
    """The trainer's task pool. Call `sample_batch(n)` once per training step, `report(task_id, rewards)` with each
    task's rollout rewards in [0, 1], and `end_epoch()` at each epoch end. Thread-safe (`offer` comes from
    synthesis workers). With a store, every change is written through and `ActivePool.load` restores the pool."""

    def __init__(self, config: PoolConfig | None = None, *, store: "RunStore | None" = None,
                 pool_id: str = "pool", synthesis: SeedSink | None = None, _loading: bool = False) -> None:
        self.config = config or PoolConfig()
        self.store, self.pool_id, self.synthesis = store, pool_id, synthesis
        if store is not None and not _loading and store.has_pool(pool_id):
            raise ValueError(f"{store.url} already holds pool {pool_id!r}; continue it with ActivePool.load")
        self.tasks: dict[str, PoolTask] = {}
        self.payloads: dict[str, Any] = {}  # task id -> the record (or any JSON) it stands for
        self.step = 0  # sample_batch calls so far
        self.epoch = 0
        self.queued = 0  # candidates ever queued (their queue order)
        self.counts: Counter = Counter()  # injected, dropped_from_queue, retired_<reason>
        self._lock = threading.RLock()
        self._dirty: set[str] = set()
        self._new: set[str] = set()

    # ---- membership
    def add_seed(self, task_id: str, task_type: str, payload: Any = None) -> PoolTask:
        """Add an original seed task (active at once, never retired)."""
        with self._lock:
            task = self._add(PoolTask(id=task_id, type=task_type, origin="seed", entered_step=self.step), payload)
            self._flush()
            return task

    def offer(self, task_id: str, task_type: str, parent: str | None, payload: Any = None) -> bool:
        """Queue a synthesized variant as a candidate; False if the id is already known. Beyond `queue_size`
        the oldest candidate is dropped."""
        with self._lock:
            if task_id in self.tasks:
                return False
            self._add(PoolTask(id=task_id, type=task_type, origin="variant", parent=parent, status="candidate",
                               queued_at=self.queued), payload)
            self.queued += 1
            queue = self.queue()
            for old in queue[:max(0, len(queue) - self.config.queue_size)]:
                del self.tasks[old.id]
                self.payloads.pop(old.id, None)
                self._new.discard(old.id)
                self._dirty.add(old.id)
                self.counts["dropped_from_queue"] += 1
            self._flush()
            return True

    def _add(self, task: PoolTask, payload: Any) -> PoolTask:
        if task.id in self.tasks:
            raise ValueError(f"pool {self.pool_id!r} already has a task {task.id!r}")
        self.tasks[task.id] = task
        self.payloads[task.id] = payload
        self._new.add(task.id)
        return task

    def active(self) -> list[PoolTask]:
        """Active tasks in id order."""
        return sorted((t for t in self.tasks.values() if t.status == "active"), key=lambda t: t.id)

    def queue(self) -> list[PoolTask]:
        """Candidates in queue order."""
        return sorted((t for t in self.tasks.values() if t.status == "candidate"), key=lambda t: t.queued_at or 0)

    def payload(self, task_id: str) -> Any:
        """The record a task stands for."""
        return self.payloads[self._task(task_id).id]

    def _task(self, task_id: str) -> PoolTask:
        task = self.tasks.get(task_id)
        if task is None:
            raise KeyError(f"pool {self.pool_id!r} has no task {task_id!r}")
        return task

    # ---- statistics
    def mean(self, task_id: str) -> float | None:
        """Mean progress reward over the task's recent rollouts (None before any)."""
        rewards = self._task(task_id).rewards
        return sum(rewards) / len(rewards) if rewards else None

    def variance(self, task_id: str) -> float | None:
        """Population variance of the recent rewards (None below two rollouts)."""
        rewards = self._task(task_id).rewards
        return statistics.pvariance(rewards) if len(rewards) >= 2 else None

    def zone(self, task_id: str) -> Zone:
        """mastered (mean > mastered_above), out_of_reach (< out_of_reach_below), boundary between, or unrated
        before `min_rollouts` rollouts."""
        task, cfg = self._task(task_id), self.config
        if len(task.rewards) < cfg.min_rollouts:
            return "unrated"
        mean = sum(task.rewards) / len(task.rewards)
        if mean > cfg.mastered_above:
            return "mastered"
        if mean < cfg.out_of_reach_below:
            return "out_of_reach"
        return "boundary"

    # ---- the trainer's calls
    def sample_batch(self, n: int) -> list[PoolTask]:
        """n active tasks for this training step, without repeats while the pool is large enough; the draw is
        derived from (seed, step), so a reloaded pool draws the same batch."""
        if n < 1:
            raise ValueError(f"batch size must be at least 1, got {n}")
        with self._lock:
            active = self.active()
            if not active:
                raise RuntimeError(f"pool {self.pool_id!r} has no active task to sample")
            rng = random.Random(f"{self.config.seed}:batch:{self.step}")
            batch = rng.sample(active, min(n, len(active)))
            batch += rng.choices(active, k=n - len(batch))
            for task in batch:
                task.last_sampled = self.step
                self._dirty.add(task.id)
            self.step += 1
            self._flush()
            return batch

    def report(self, task_id: str, rewards: list[float]) -> bool:
        """Record rollout rewards (each in [0, 1]) of a task, as 0/1 under the binary signal; rewards for a task
        retired meanwhile are ignored (False)."""
        bad = [r for r in rewards if not isinstance(r, (int, float)) or isinstance(r, bool) or not 0 <= r <= 1
               or math.isnan(r)]
        if bad:
            raise ValueError(f"task {task_id!r}: rewards must be numbers in [0, 1], got {bad[:3]}")
        with self._lock:
            task = self._task(task_id)
            if task.status != "active":
                return False
            cfg = self.config
            signal = [float(r) if cfg.signal == "graded" else float(r >= 1.0) for r in rewards]
            task.rewards = (task.rewards + signal)[-cfg.window:]
            room = cfg.entry_rollouts - len(task.first_rewards)
            if room > 0:
                task.first_rewards += signal[:room]
            task.rollouts += len(rewards)
            self._dirty.add(task.id)
            self._flush()
            return True

    def select_seeds(self) -> list[PoolTask]:
        """Boundary tasks out of cool-down, at most `seed_quota` per type, nearest to 0.5 first; each chosen
        task's cool-down starts now. (With `seeding="random"`: the quota drawn at random among rated tasks.)"""
        with self._lock:
            cfg = self.config
            wanted = ("boundary",) if cfg.seeding == "boundary" else ("boundary", "mastered", "out_of_reach")
            by_type: dict[str, list[PoolTask]] = defaultdict(list)
            for task in self.active():
                cooling = task.last_seeded is not None and self.step - task.last_seeded < cfg.cooldown_steps
                if not cooling and self.zone(task.id) in wanted:
                    by_type[task.type].append(task)
            seeds: list[PoolTask] = []
            rng = random.Random(f"{cfg.seed}:seeds:{self.step}")
            for kind in sorted(by_type):
                if cfg.seeding == "random":
                    seeds += rng.sample(by_type[kind], min(cfg.seed_quota, len(by_type[kind])))
                    continue
                ranked = sorted(by_type[kind], key=lambda t: (abs(self.mean(t.id) - 0.5), t.id))
                seeds += ranked[:cfg.seed_quota]
            for task in seeds:
                task.last_seeded = self.step
                self._dirty.add(task.id)
            self._flush()
            return seeds

    def end_epoch(self) -> EpochReport:
        """Retire (entry screening, drift, staleness), inject queued candidates (at most `inject_share` of the
        pool), retire over capacity (lowest reward variance first), then pick boundary seeds and hand them to the
        synthesis, if one is attached."""
        with self._lock:
            cfg = self.config
            report = EpochReport(epoch=self.epoch)
            for task in self.active():
                if task.origin == "seed" or not cfg.retire:
                    continue
                if not task.screened and len(task.first_rewards) >= cfg.entry_rollouts:
                    task.screened = True
                    self._dirty.add(task.id)
                    if sum(task.first_rewards) / len(task.first_rewards) < cfg.entry_min_reward:
                        self._retire(task, "entry", report)
                        continue
                if self.zone(task.id) in ("mastered", "out_of_reach"):
                    self._retire(task, "drift", report)
                    continue
                seen = task.last_sampled if task.last_sampled is not None else task.entered_step or 0
                if self.step - seen >= cfg.stale_steps:
                    self._retire(task, "stale", report)
            room = math.floor(cfg.inject_share * len(self.active()))
            for task in self.queue()[:room]:
                task.status, task.entered_step, task.queued_at = "active", self.step, None
                self._dirty.add(task.id)
                report.injected.append(task.id)
            self.counts["injected"] += len(report.injected)
            variants = [t for t in self.active() if t.origin == "variant"]
            excess = len(variants) - cfg.variant_capacity
            if excess > 0 and cfg.retire:
                rated = [t for t in variants if self.variance(t.id) is not None]
                rated.sort(key=lambda t: (self.variance(t.id), t.entered_step or 0, t.id))
                for task in rated[:excess]:
                    self._retire(task, "capacity", report)
            report.seeds = [t.id for t in self.select_seeds()]
            self.epoch += 1
            report.size = len(self.active())
            self._flush()
        if self.synthesis is not None and report.seeds:
            self.synthesis.submit([self.tasks[i] for i in report.seeds])
        return report

    def _retire(self, task: PoolTask, reason: RetireReason, report: EpochReport) -> None:
        task.status, task.retired_reason, task.retired_step = "retired", reason, self.step
        report.retired.setdefault(reason, []).append(task.id)
        self.counts[f"retired_{reason}"] += 1
        self._dirty.add(task.id)

    # ---- persistence
    def state(self) -> dict[str, Any]:
        """The pool's own counters (the tasks are stored row by row)."""
        return {"step": self.step, "epoch": self.epoch, "queued": self.queued, "counts": dict(self.counts)}

    def _flush(self) -> None:
        """Write new and changed tasks and the counters to the store, in one transaction."""
        if self.store is None:
            self._dirty.clear()
            self._new.clear()
            return
        new = [(t.id, t.status, t.model_dump(mode="json"), self.payloads.get(t.id))
               for i in sorted(self._new) if (t := self.tasks.get(i)) is not None]
        changed = [(i, self.tasks[i].status, self.tasks[i].model_dump(mode="json")) if i in self.tasks else (i, None, None)
                   for i in sorted(self._dirty - self._new)]
        self.store.save_pool(self.pool_id, self.config.model_dump(mode="json"), self.state(), new, changed)
        self._dirty.clear()
        self._new.clear()

    @classmethod
    def load(cls, store: "RunStore", pool_id: str = "pool", synthesis: SeedSink | None = None) -> "ActivePool":
        """The pool as last written to `store`."""
        config, state, rows = store.load_pool(pool_id)
        pool = cls(PoolConfig.model_validate(config), store=store, pool_id=pool_id, synthesis=synthesis, _loading=True)
        pool.step, pool.epoch, pool.queued = state["step"], state["epoch"], state["queued"]
        pool.counts = Counter(state["counts"])
        for task, payload in rows:
            pool.tasks[task["id"]] = PoolTask.model_validate(task)
            pool.payloads[task["id"]] = payload
        return pool
