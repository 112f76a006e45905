"""Background synthesis for the active pool: boundary seeds handed over at epoch ends become variants on a thread
pool, and each kept variant is offered to the pool's candidate queue, so the trainer never waits on synthesis."""
from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Callable

from sap.curriculum.pool import ActivePool, PoolTask
from sap.graphs.variant import AUGMENT_KINDS, VariantContext, make_variants

# seed task and its payload -> (variant id, variant payload) pairs; an exception fails that seed only
VariantMaker = Callable[[PoolTask, Any], list[tuple[str, Any]]]
TypeOf = Callable[[Any], str]  # a variant's payload -> its task type


class OnlineSynthesis:
    """Runs `make_variants` for each submitted seed on `workers` threads (0: inline, for simulations and tests that
    need a fixed order) and offers the results to `pool`, each as the task type `type_of(payload)` says (without
    it, the seed's: a MissParam variant of a base seed is a miss_param task only if `type_of` reads it so). Attach
    it as `pool.synthesis`."""

    def __init__(self, pool: ActivePool, make_variants: VariantMaker, workers: int = 2,
                 type_of: TypeOf | None = None) -> None:
        if workers < 0:
            raise ValueError(f"workers must be 0 or more, got {workers}")
        self.pool, self.make_variants, self.type_of = pool, make_variants, type_of
        self.executor = ThreadPoolExecutor(workers, thread_name_prefix="rods-synth") if workers else None
        self.pending: set[Future] = set()
        self.errors: list[tuple[str, str]] = []  # (seed id, error) of seeds whose synthesis raised
        self.offered = 0
        self._lock = threading.Lock()

    def submit(self, seeds: list[PoolTask]) -> None:
        """Start making variants of every seed (returns at once unless inline)."""
        for seed in seeds:
            payload = self.pool.payload(seed.id)
            if self.executor is None:
                self._run(seed, payload)
                continue
            future = self.executor.submit(self._run, seed, payload)
            with self._lock:
                self.pending.add(future)
            future.add_done_callback(self._done)

    def _done(self, future: Future) -> None:
        with self._lock:
            self.pending.discard(future)

    def _run(self, seed: PoolTask, payload: Any) -> None:
        try:
            variants = self.make_variants(seed, payload)
        except Exception as exc:  # one seed's failure must not stop training or the other seeds
            with self._lock:
                self.errors.append((seed.id, f"{type(exc).__name__}: {exc}"))
            return
        for variant_id, variant_payload in variants:
            task_type = seed.type if self.type_of is None else self.type_of(variant_payload)
            if self.pool.offer(variant_id, task_type, seed.id, variant_payload):
                with self._lock:
                    self.offered += 1

    def drain(self, timeout: float | None = None) -> bool:
        """Wait for the submitted seeds (True if all finished within `timeout`)."""
        with self._lock:
            futures = set(self.pending)
        _, left = wait(futures, timeout=timeout)
        return not left

    def close(self) -> None:
        """Stop the workers after the submitted seeds finish."""
        if self.executor is not None:
            self.executor.shutdown(wait=True)


def variant_maker(ctx: VariantContext, per_seed: int = 2, augment: tuple[str, ...] = ()) -> VariantMaker:
    """A `VariantMaker` running the RODS variant graph: `per_seed` variants of the seed record (plus their
    augmentations), numbered from the step the seed was picked at, so a restarted run makes new ids. A variant
    keeps its seed's category: the variants of a MissParam or MissFunc seed are the same rewrite of each base
    variant (a variant whose rewrite the judge refused is left out), those of a base seed are base."""
    def make(seed: PoolTask, record: Any) -> list[tuple[str, Any]]:
        start = (seed.last_seeded or 0) * per_seed
        kind = record["meta"].get("kind", "base")
        if kind not in AUGMENT_KINDS:
            return [(rec["id"], rec) for out in make_variants(ctx, record, per_seed, augment, start=start)
                    for rec in out.records]
        outs = make_variants(ctx, record, per_seed, (kind,), start=start)
        return [(rec["id"], rec) for out in outs for rec in out.records if rec["meta"]["kind"] == kind]

    return make
