"""The verl adapter without verl: a DataLoader-like loop over the curriculum sampler with DataProto-shaped
batches; rewards reach the pool per task, epochs end on schedule, injected tasks get stable new indices."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from sap.api import synthesize
from sap.curriculum import ActivePool, PoolConfig
from sap.curriculum.verl import PoolCurriculumSampler, register_pool
from sap.export.verl import verl_row


@pytest.fixture(scope="module")
def records():
    return synthesize("filesystem", 6, seed=2).records


def _batch(rows, indices, reward_of, key="progress"):
    """A DataProto-like batch as verl's trainer hands it over: the trained reward on the last token of each
    response, and the reward function's extra keys (here the zone reward under `key`) in `non_tensor_batch`."""
    scores = np.zeros((len(indices), 5))
    scores[:, -1] = 0.99  # the trained reward: not what the zones read
    extra = {key: np.array([reward_of(rows[i]["extra_info"]["task_id"]) for i in indices])}
    return SimpleNamespace(batch={"token_level_scores": scores}, non_tensor_batch={
        "extra_info": np.array([rows[i]["extra_info"] for i in indices], dtype=object), **extra})


def test_row_prompt_is_the_first_user_turn_and_names_the_task(records):
    row = verl_row("t1", records[0])
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert row["prompt"][1]["content"] == next(m["content"] for m in records[0]["messages"] if m["role"] == "user")
    assert row["extra_info"]["task_id"] == "t1" and row["data_source"] == "sap/filesystem"
    assert json.loads(row["extra_info"]["initial_config"]) == records[0]["initial_config"]


def test_sampler_drives_the_pool_like_a_verl_training_loop(records):
    pool = ActivePool(PoolConfig(window=4, min_rollouts=2, inject_share=0.5, cooldown_steps=0))
    for r in records:
        pool.add_seed(r["id"], "filesystem", r)
    rows = register_pool(pool, batch_size=3, epoch_steps=2, name="t")
    sampler = PoolCurriculumSampler(None, {"sap_pool": "t"})
    assert len(sampler) == 6
    reward = {r["id"]: 0.5 for r in records}
    indices = list(sampler)
    assert len(indices) == 6 and all(0 <= i < len(rows) for i in indices)
    for step in range(2):
        sampler.update(_batch(rows, indices[3 * step:3 * step + 3], reward.get))
    assert pool.epoch == 1 and pool.step == 2  # two updates ended one epoch
    assert all(pool.mean(rows.ids[i]) == 0.5 for i in indices)
    pool.offer("new", "filesystem", records[0]["id"], records[0])
    report = pool.end_epoch()
    assert report.injected == ["new"]
    before = list(rows.ids)
    next(iter(sampler))  # the next step indexes the injected task after the old ones
    assert rows.ids[:len(before)] == before and rows.ids[-1] == "new" and rows[len(before)]["extra_info"]["task_id"] == "new"
    with pytest.raises(ValueError, match="rewards must be numbers in \\[0, 1\\]"):
        sampler.update(_batch(rows, [0], lambda _: 3.0))


def test_the_zone_reward_is_read_by_its_name_from_the_batch(records):
    pool = ActivePool(PoolConfig(window=4, min_rollouts=1, zone_reward="graduated"))
    for r in records:
        pool.add_seed(r["id"], "filesystem", r)
    rows = register_pool(pool, batch_size=2, epoch_steps=5, name="g")
    sampler = PoolCurriculumSampler(None, {"sap_pool": "g"})
    indices = list(sampler)[:2]
    with pytest.raises(KeyError, match="no 'graduated' rewards.*batch keys: extra_info, progress"):
        sampler.update(_batch(rows, indices, lambda _: 0.3))
    assert all(pool.mean(rows.ids[i]) is None for i in indices)  # nothing was reported
    sampler.update(_batch(rows, indices, lambda _: 0.3, key="graduated"))
    assert [pool.mean(rows.ids[i]) for i in indices] == [0.3, 0.3]


def test_an_unregistered_pool_is_named():
    with pytest.raises(KeyError, match="'nope'"):
        PoolCurriculumSampler(None, {"sap_pool": "nope"})
