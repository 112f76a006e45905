"""RODS active pool rules: zones, seeding (quota, nearest to 0.5, cool-down), the injection cap, every retirement
rule, protected seeds, persistence across a reload, and background synthesis feeding the queue."""
from __future__ import annotations

import random
import threading

import pytest
from pydantic import ValidationError

from sap.curriculum import ActivePool, PoolConfig
from sap.curriculum.online import OnlineSynthesis
from sap.store.runs import RunStore, StoreError

CFG = dict(window=4, min_rollouts=2, entry_rollouts=2, cooldown_steps=3, stale_steps=1000, variant_capacity=1000,
           seed_quota=2)


def pool(**over) -> ActivePool:
    return ActivePool(PoolConfig(**{**CFG, **over}))


def rate(p: ActivePool, task_id: str, mean: float, n: int = 4) -> None:
    """Report n rewards whose mean is `mean` (all equal)."""
    p.report(task_id, [mean] * n)


def test_zones_follow_the_thresholds_and_need_min_rollouts():
    p = pool()
    for i, mean in enumerate([0.9, 0.86, 0.85, 0.5, 0.2, 0.19, 0.0]):
        p.add_seed(f"t{i}", "a")
        rate(p, f"t{i}", mean)
    assert [p.zone(f"t{i}") for i in range(7)] == ["mastered", "mastered", "boundary", "boundary", "boundary",
                                                   "out_of_reach", "out_of_reach"]
    p.add_seed("fresh", "a")
    p.report("fresh", [0.5])
    assert p.zone("fresh") == "unrated"


def test_mean_is_over_the_recent_window_only():
    p = pool(window=4)
    p.add_seed("t", "a")
    p.report("t", [0.0] * 8)
    p.report("t", [1.0] * 3)
    assert p.mean("t") == pytest.approx(0.75)
    assert p.tasks["t"].rollouts == 11


def test_seeds_come_from_the_boundary_nearest_to_half_with_a_quota_per_type():
    p = pool(seed_quota=2)
    means = {"a1": 0.3, "a2": 0.56, "a3": 0.47, "a4": 0.95, "a5": 0.1, "b1": 0.7, "b2": 0.8, "b3": 0.52}
    for tid, mean in means.items():
        p.add_seed(tid, tid[0])
        rate(p, tid, mean)
    seeds = [t.id for t in p.select_seeds()]
    # type a: boundary a1 (0.3), a2 (0.56), a3 (0.47) -> a3, a2; type b: boundary b1 (0.7), b2 (0.8), b3 -> b3, b1
    assert seeds == ["a3", "a2", "b3", "b1"]


def test_cool_down_blocks_a_seed_until_it_has_passed():
    p = pool(cooldown_steps=3, seed_quota=1)
    p.add_seed("x", "a")
    p.add_seed("y", "a")
    rate(p, "x", 0.5)
    rate(p, "y", 0.4)
    assert [t.id for t in p.select_seeds()] == ["x"]
    assert [t.id for t in p.select_seeds()] == ["y"]  # x cools down, y is next
    assert p.select_seeds() == []
    for _ in range(2):
        p.sample_batch(1)
    assert p.select_seeds() == []  # 2 steps < 3
    p.sample_batch(1)
    assert [t.id for t in p.select_seeds()] == ["x"]


def test_unrated_tasks_are_not_seeds():
    p = pool()
    p.add_seed("x", "a")
    p.report("x", [0.5])
    assert p.select_seeds() == []


def test_injection_waits_for_the_epoch_end_and_is_capped_at_the_share_of_the_pool():
    p = pool(inject_share=0.2)
    for i in range(12):
        p.add_seed(f"s{i:02d}", "a")
    for i in range(5):
        assert p.offer(f"v{i}", "a", "s00")
    assert len(p.active()) == 12 and len(p.queue()) == 5
    report = p.end_epoch()
    assert report.injected == ["v0", "v1"]  # floor(0.2 * 12) = 2, oldest first
    assert len(p.active()) == 14 and [t.id for t in p.queue()] == ["v2", "v3", "v4"]
    assert p.end_epoch().injected == ["v2", "v3"]  # floor(0.2 * 14) = 2
    assert not p.offer("v0", "a", "s00")  # known ids are not queued again


def test_queue_drops_its_oldest_beyond_its_size():
    p = pool(queue_size=2)
    for i in range(3):
        p.offer(f"v{i}", "a", None)
    assert [t.id for t in p.queue()] == ["v1", "v2"] and p.counts["dropped_from_queue"] == 1


def _with_variant(p: ActivePool, n_seeds: int = 10, variant: str = "v") -> None:
    for i in range(n_seeds):
        p.add_seed(f"s{i}", "a")
    p.offer(variant, "a", "s0")
    assert p.end_epoch().injected == [variant]


def test_entry_screening_retires_a_new_task_below_the_threshold_at_its_first_rollouts():
    p = pool(entry_rollouts=2, entry_min_reward=0.1, min_rollouts=4, window=4)
    _with_variant(p, variant="weak")
    p.offer("ok", "a", "s0")
    p.end_epoch()
    p.report("weak", [0.0, 0.1])  # mean 0.05 < 0.1
    p.report("ok", [0.1, 0.2])
    assert p.end_epoch().retired == {"entry": ["weak"]}
    assert p.tasks["weak"].status == "retired" and p.tasks["ok"].screened
    p.report("ok", [0.5, 0.5])  # screened once: later rewards are judged by the zones only
    assert p.end_epoch().retired == {}


def test_boundary_drift_retires_variants_that_became_mastered_or_out_of_reach():
    p = pool(entry_min_reward=0.0)
    for i in range(15):
        p.add_seed(f"s{i:02d}", "a")
    for v in ("up", "down", "mid"):
        p.offer(v, "a", "s00")
    assert len(p.end_epoch().injected) == 3
    rate(p, "up", 0.95)
    rate(p, "down", 0.1)
    rate(p, "mid", 0.5)
    assert p.end_epoch().retired == {"drift": ["down", "up"]}



def test_no_retirement_ablation_keeps_drifted_and_over_capacity_variants():
    p = pool(entry_min_reward=0.5, retire=False, variant_capacity=16)
    for i in range(15):
        p.add_seed(f"s{i:02d}", "a")
    for v in ("up", "down", "mid"):
        p.offer(v, "a", "s00")
    p.end_epoch()
    rate(p, "up", 0.95)
    rate(p, "down", 0.1)
    rate(p, "mid", 0.5)
    assert p.end_epoch().retired == {} and len(p.active()) == 18


def test_binary_signal_counts_only_full_success():
    graded, binary = pool(), pool(signal="binary")
    for p in (graded, binary):
        p.add_seed("t", "a")
        p.report("t", [1.0, 0.6, 0.6, 0.6])
    assert graded.mean("t") == pytest.approx(0.7) and graded.zone("t") == "boundary"
    assert binary.mean("t") == pytest.approx(0.25) and binary.zone("t") == "boundary"
    binary.report("t", [0.9] * 4)
    assert binary.zone("t") == "out_of_reach"  # 0.9 is progress, not success: 0 under the binary signal

def test_staleness_retires_a_variant_not_sampled_for_stale_steps():
    p = pool(stale_steps=5, min_rollouts=4, window=4)
    _with_variant(p, n_seeds=5)
    last_seen = p.step
    for _ in range(200):
        batch = p.sample_batch(1)
        if batch[0].id == "v":
            last_seen = p.step - 1
        report = p.end_epoch()
        if p.step - last_seen >= 5:
            assert report.retired == {"stale": ["v"]}
            break
        assert report.retired == {}
    assert p.tasks["v"].retired_reason == "stale"


def test_capacity_retires_the_lowest_reward_variance_first():
    p = pool(variant_capacity=2, inject_share=1.0, entry_min_reward=0.0, min_rollouts=4, window=4)
    for i in range(10):
        p.add_seed(f"s{i}", "a")
    for v in ("flat", "mixed", "wide"):
        p.offer(v, "a", "s0")
    p.end_epoch()
    assert len(p.active()) == 13
    p.report("flat", [0.5, 0.5, 0.5, 0.5])
    p.report("mixed", [0.4, 0.6, 0.4, 0.6])
    p.report("wide", [0.2, 0.8, 0.2, 0.8])
    assert p.end_epoch().retired == {"capacity": ["flat"]}
    assert len(p.active()) == 12  # the ten seeds do not count against the variants' capacity


def test_variant_capacity_ignores_the_seed_count_and_reads_old_configs():
    p = pool(variant_capacity=3, inject_share=1.0, entry_min_reward=0.0, min_rollouts=4, window=4)
    for i in range(50):
        p.add_seed(f"s{i}", "a")
    for v in ("x", "y", "z"):
        p.offer(v, "a", "s0")
    p.end_epoch()
    for v in ("x", "y", "z"):
        p.report(v, [0.2, 0.8, 0.2, 0.8])
    assert p.end_epoch().retired == {}  # 53 active tasks, 3 variants: within capacity
    assert PoolConfig.model_validate({"max_size": 7}).variant_capacity == 7  # a pool stored before the rename


def test_original_seeds_are_never_retired():
    p = pool(stale_steps=1, variant_capacity=2, entry_min_reward=0.5)
    for i, mean in enumerate([0.99, 0.0, 0.5, 0.5]):
        p.add_seed(f"s{i}", "a")
        rate(p, f"s{i}", mean)
    p.step += 10
    for _ in range(3):
        assert p.end_epoch().retired == {}
    assert all(t.status == "active" for t in p.tasks.values())


def test_batches_are_reproducible_and_avoid_repeats():
    a, b = pool(seed=3), pool(seed=3)
    for p in (a, b):
        for i in range(8):
            p.add_seed(f"s{i}", "a")
    batches = [[t.id for t in a.sample_batch(5)] for _ in range(4)]
    assert batches == [[t.id for t in b.sample_batch(5)] for _ in range(4)]
    assert all(len(set(x)) == 5 for x in batches)
    assert len({tuple(x) for x in batches}) > 1
    assert len(a.sample_batch(20)) == 20  # more than the pool: every task, then repeats


def test_bad_rewards_and_unknown_tasks_are_refused_by_name():
    p = pool()
    p.add_seed("t", "a")
    with pytest.raises(ValueError, match="'t'.*\\[1.5\\]"):
        p.report("t", [0.5, 1.5])
    with pytest.raises(KeyError, match="nope"):
        p.report("nope", [0.5])
    assert p.tasks["t"].rollouts == 0  # nothing of the bad report was kept
    with pytest.raises(ValidationError, match="out_of_reach_below"):
        PoolConfig(out_of_reach_below=0.9, mastered_above=0.85)


def _drive(p: ActivePool, rng: random.Random, steps: int, log: list) -> None:
    """A trainer loop with random rewards and a variant offered per seed."""
    for step in range(steps):
        batch = p.sample_batch(6)
        log.append([t.id for t in batch])
        for t in batch:
            p.report(t.id, [round(rng.random() * rng.choice([0.3, 1.0]), 3) for _ in range(3)])
        if step % 5 == 4:
            report = p.end_epoch()
            log.append(report)
            for seed in report.seeds:
                p.offer(f"{seed}-v{step}", p.tasks[seed].type, seed, {"from": seed})


def test_a_pool_reloaded_from_the_database_behaves_identically(tmp_path):
    url = f"sqlite:///{tmp_path / 'pool.db'}"
    cfg = PoolConfig(window=6, min_rollouts=3, entry_rollouts=3, cooldown_steps=7, stale_steps=15, variant_capacity=24,
                     seed_quota=2, seed=5)
    stored, plain = ActivePool(cfg, store=RunStore(url), pool_id="p1"), ActivePool(cfg)
    for p in (stored, plain):
        for i in range(20):
            p.add_seed(f"s{i:02d}", "ab"[i % 2], {"record": i})
    log_a, log_b = [], []
    _drive(stored, random.Random(1), 23, log_a)
    _drive(plain, random.Random(1), 23, log_b)
    del stored
    reloaded = ActivePool.load(RunStore(url), "p1")
    assert reloaded.tasks == plain.tasks and reloaded.state() == plain.state()
    assert reloaded.payload("s03") == {"record": 3}
    _drive(reloaded, random.Random(2), 40, log_a)
    _drive(plain, random.Random(2), 40, log_b)
    assert log_a == log_b
    assert sum(len(r.retired.get("drift", [])) for r in log_b if not isinstance(r, list)) > 0
    assert ActivePool.load(RunStore(url), "p1").tasks == plain.tasks
    with pytest.raises(ValueError, match="ActivePool.load"):
        ActivePool(cfg, store=RunStore(url), pool_id="p1")
    with pytest.raises(StoreError, match="no pool 'p2'.*p1"):
        ActivePool.load(RunStore(url), "p2")


def test_background_synthesis_feeds_the_queue_without_blocking_the_trainer():
    release = threading.Event()

    def make(seed, payload):
        release.wait(10)
        return [(f"{seed.id}-variant", {"parent_payload": payload})]

    p = pool(inject_share=1.0)
    synth = OnlineSynthesis(p, make, workers=2)
    p.synthesis = synth
    for i in range(4):
        p.add_seed(f"s{i}", "a", i)
        rate(p, f"s{i}", 0.5)
    report = p.end_epoch()  # returns while the workers are still blocked
    assert report.seeds == ["s0", "s1"] and p.queue() == []
    p.sample_batch(2)  # the trainer goes on
    release.set()
    assert synth.drain(10)
    assert sorted(t.id for t in p.queue()) == ["s0-variant", "s1-variant"]  # in finishing order
    assert p.payload("s0-variant") == {"parent_payload": 0} and p.tasks["s0-variant"].parent == "s0"
    synth.close()


def test_a_failing_seed_is_recorded_and_the_others_still_arrive():
    def make(seed, payload):
        if seed.id == "s0":
            raise RuntimeError("executor gone")
        return [(f"{seed.id}-v", None)]

    p = pool()
    synth = OnlineSynthesis(p, make, workers=0)
    synth.submit([p.add_seed("s0", "a"), p.add_seed("s1", "a")])
    assert synth.errors == [("s0", "RuntimeError: executor gone")]
    assert [t.id for t in p.queue()] == ["s1-v"]
