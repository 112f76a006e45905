"""The pool's zones read the reward `PoolConfig.zone_reward` names: `sap frontier` reports that reward of each
rollout (progress by default, graduated on request)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

import sap.curriculum.frontier as frontier
from sap.curriculum import ActivePool, PoolConfig
from sap.eval.score import RolloutScore
from sap.llm import ModelConfig
from sap.rewards.graded import GraduatedReward


def _fake_evaluate(tasks, model, **_):
    """Two rollouts per task, each with progress 0.25 and graduated 0.75."""
    scores = [RolloutScore(t.id, s, GraduatedReward(0.75, None, None), progress=0.25, turns=1, turns_correct=0,
                           gold_calls=1, gold_calls_matched=0) for t in tasks for s in range(2)]
    return SimpleNamespace(scores=scores)


@pytest.mark.parametrize("config, mean", [(PoolConfig(window=4, min_rollouts=1), 0.25),
                                          (PoolConfig(window=4, min_rollouts=1, zone_reward="graduated"), 0.75)])
def test_frontier_reports_the_named_reward(monkeypatch, config, mean):
    monkeypatch.setattr(frontier, "task_from_record", lambda payload, toolset: SimpleNamespace(id=payload["id"]))
    monkeypatch.setattr(frontier, "evaluate", _fake_evaluate)
    pool = ActivePool(config)
    pool.add_seed("a", "store", {"id": "a"})
    frontier.run_frontier(pool, ModelConfig(model="openai/none"), frontier.FrontierSettings(steps=1, batch=1, k=2),
                          toolset=lambda _: None, client=object())
    assert pool.mean("a") == mean


def test_an_unknown_zone_reward_is_refused_by_name():
    with pytest.raises(ValueError, match="zone_reward"):
        PoolConfig(zone_reward="score")
