"""Runs on a Ray cluster: Ray actors that are run drivers on a shared PostgreSQL run database (optional extra `ray`).

Ray places the actors and restarts them when they or their node fail; the run store, not Ray, decides which slot is
done: each actor claims slots under a lease, as `sap worker RUN` does, so a lost actor's slots go back to the queue once
their leases run out and the records stay exactly once, byte-identical to a single-process run with the same seed."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from sap.errors import UsageError
from sap.runs.driver import RunProgress
from sap.store.lease import LEASE_SECONDS
from sap.store.runs import RunStore

INSTALL_HINT = "--ray needs Ray, which is not installed: pip install 'sap-synth[ray]'"
POLL_SECONDS = 0.5  # how often the driver reads the run's counts for its progress bar
STOP_GRACE_SECONDS = 30.0  # once one actor has ended the run, how long the others get to finish their slots
LLM_CONCURRENCY = 8  # default slots in flight per actor when a role calls an LLM (the actor waits on the network)

ShowCounts = Callable[[dict[str, int]], None]


def import_ray() -> Any:
    """The ray module, or UsageError with the one line that says how to install it."""
    try:
        import ray
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    return ray


@dataclass(frozen=True)
class RayOptions:
    """How a run uses a Ray cluster: its address (None: the RAY_ADDRESS variable, a cluster started on this machine
    with `ray start`, or else a new local one), the number of actors and slots per actor (None: from the cluster's
    resources), the CPUs each actor asks Ray for, and the slot lease a lost actor's slots wait out."""

    address: str | None = None
    actors: int | None = None
    concurrency: int | None = None
    cpus_per_actor: float = 1.0
    lease_seconds: float = LEASE_SECONDS

    def check(self) -> None:
        """Refuse option values no cluster can use, naming the option."""
        if self.actors is not None and self.actors < 1:
            raise UsageError(f"--actors must be at least 1, got {self.actors}")
        if self.concurrency is not None and self.concurrency < 1:
            raise UsageError(f"--actor-concurrency must be at least 1, got {self.concurrency}")
        if self.lease_seconds <= 0:
            raise UsageError(f"--lease-seconds must be above 0, got {self.lease_seconds}")


def check_database(url: str) -> None:
    """A Ray run needs a run database every node reaches: PostgreSQL, not a SQLite file."""
    if not url.startswith("postgresql"):
        raise UsageError(f"--ray needs a PostgreSQL run database that every node reaches (--db postgresql://...), "
                         f"got {url}")


def default_actors(cluster_cpus: float, cpus_per_actor: float) -> int:
    """One actor per `cpus_per_actor` CPUs of the cluster, at least one."""
    return max(1, int(cluster_cpus // cpus_per_actor))


def default_concurrency(uses_llm: bool) -> int:
    """Slots in flight per actor: one for rule agents (CPU-bound), LLM_CONCURRENCY when a role waits on an LLM."""
    return LLM_CONCURRENCY if uses_llm else 1


class SlotActor:
    """A run driver in a Ray actor: claims, runs and stores slots of one run on the shared run database."""

    def __init__(self, db: str, run_id: str, toolset: Any, lease_seconds: float) -> None:
        """`toolset`: a built-in name or path every node can load, or a Toolset object (pickled by Ray); ignored by a
        cache run, whose cache and templates are in the database."""
        self.db, self.run_id, self.toolset, self.lease_seconds = db, run_id, toolset, lease_seconds

    def work(self, concurrency: int, max_cost: float | None) -> tuple[str, str | None]:
        """Drive the run until it is complete, exhausted or stopped; (status, why) as the driver ended it."""
        from sap.runs.cache import CacheRunDriver
        from sap.runs.driver import RunDriver
        from sap.store.checkpoint import checkpointer_for
        from sap.toolsets import load_toolset

        store = RunStore(self.db)
        cache = store.run(self.run_id).config.get("mode") == "cache"
        toolset = None if cache else load_toolset(self.toolset) if isinstance(self.toolset, str) else self.toolset
        with checkpointer_for(self.db) as saver:
            driver = (CacheRunDriver if cache else RunDriver)(store, self.run_id, toolset, saver,
                                                              lease_seconds=self.lease_seconds, max_cost=max_cost)
            done = driver.run(concurrency=concurrency)
        store.engine.dispose()
        return done.status, done.why


def run_on_ray(store: RunStore, run_id: str, toolset: Any, options: RayOptions, max_cost: float | None = None,
               show: ShowCounts | None = None, say: Callable[[str], None] | None = None) -> RunProgress:
    """Work on stored run `run_id` with Ray actors until one of them ends it (complete, exhausted, at its cost cap,
    paused or failing); `show` gets the run's slot counts every POLL_SECONDS (one progress bar for the whole run),
    `say` one line naming the cluster and the actors. Stopping (Ctrl-C, an error) kills the actors: the run stays
    in the database for `sap resume`."""
    check_database(store.url)
    options.check()
    ray = import_ray()
    if not ray.is_initialized():
        ray.init(address=options.address, logging_level="ERROR", log_to_driver=False)
    run = store.run(run_id)
    actors_n = options.actors or default_actors(ray.cluster_resources().get("CPU", 1.0), options.cpus_per_actor)
    concurrency = options.concurrency or default_concurrency(bool(run.config.get("agents")))
    remote = ray.remote(num_cpus=options.cpus_per_actor, max_restarts=-1, max_task_retries=-1,
                        scheduling_strategy="SPREAD")(SlotActor)
    actors = [remote.remote(store.url, run_id, toolset, options.lease_seconds) for _ in range(actors_n)]
    if say is not None:
        say(f"Ray: {actors_n} actors x {concurrency} slots on {len(ray.nodes())} nodes "
            f"({ray.cluster_resources().get('CPU', 0):g} CPUs)")
    try:
        pending = [actor.work.remote(concurrency, max_cost) for actor in actors]
        ended: tuple[str, str | None] | None = None
        deadline = float("inf")
        while pending and time.monotonic() < deadline:
            done, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_SECONDS)
            for ref in done:
                status = ray.get(ref)
                if ended is None or ended[0] == "running":
                    ended = status
                    deadline = time.monotonic() + STOP_GRACE_SECONDS  # actors Ray cannot place again never end
            if show is not None:
                show(store.counts(run_id))
    finally:
        for actor in actors:
            ray.kill(actor, no_restart=True)
    counts = store.counts(run_id)
    if show is not None:
        show(counts)
    status, why = ended or ("running", None)
    return RunProgress(run_id, counts.get("accepted", 0), run.target, sum(counts.values()), status, why)
