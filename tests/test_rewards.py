"""Rewards on hand-made rollouts: R_atomic, R_orch, their sum (and both collapses), progress, the verl adapter."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import sap.rewards.verl as verl_adapter
from sap.rewards import (GoldCall, PredCall, TurnProgress, graduated_reward, normalize_value, progress_reward,
                         r_atomic, r_orch, values_match)

GOLD = [[
    GoldCall("find_user", {"name": "Ada Lovelace"}, {"name": "self_create"}),
    GoldCall("get_orders", {"user_id": "u1"}, {"user_id": "prev_output"}),
    GoldCall("cancel_order", {"order_id": "o7", "reason": "late"}, {"order_id": "prev_output", "reason": "self_create"}),
]]
PERFECT = [[PredCall("find_user", {"name": "ada  lovelace"}), PredCall("get_orders", {"user_id": "u1"}),
            PredCall("cancel_order", {"order_id": "o7", "reason": "Late"})]]
# every call is exactly right, but the workflow runs backwards
WRONG_WORKFLOW = [[PredCall("cancel_order", {"order_id": "o7", "reason": "late"}),
                   PredCall("get_orders", {"user_id": "u1"}), PredCall("find_user", {"name": "Ada Lovelace"})]]
# the right functions in the right order, with broken arguments
BROKEN_ARGS = [[PredCall("find_user", {"name": "Bob"}), PredCall("get_orders", {"user_id": "u9"}),
                PredCall("cancel_order", {"order_id": "o1", "reason": "late"})]]
BOTH_BROKEN = [[PredCall("cancel_order", {"order_id": "o1"}), PredCall("lookup", {"q": "Ada"})]]


def test_perfect_rollout_scores_one_everywhere():
    reward = graduated_reward(GOLD, PERFECT)
    assert (reward.atomic.score, reward.orch.score, reward.score) == (1.0, 1.0, 1.0)
    assert reward.atomic.group_hits == {"query": (2, 2), "dependent": (2, 2), "other": (0, 0)}


def test_perfect_calls_in_the_wrong_workflow_keep_atomic_high_and_orch_low():
    reward = graduated_reward(GOLD, WRONG_WORKFLOW)
    assert reward.atomic.score == 1.0
    # find_user is matched last, so get_orders and cancel_order cannot follow it: k=1, N=3, e=2
    assert (reward.orch.matched, reward.orch.steps, reward.orch.extra) == (1, 3, 2)
    assert reward.orch.score == pytest.approx(1 / 5)
    assert reward.score == pytest.approx(0.6)


def test_right_workflow_with_broken_arguments_keeps_orch_high_and_atomic_low():
    reward = graduated_reward(GOLD, BROKEN_ARGS)
    assert reward.orch.score == 1.0
    assert reward.atomic.score == pytest.approx((0 + 0 + 0.5) / 3)
    assert reward.atomic.group_hits == {"query": (1, 2), "dependent": (0, 2), "other": (0, 0)}
    assert reward.atomic.group_share("dependent") == 0.0 and reward.atomic.group_share("query") == 0.5
    assert [c.wrong_parameters for c in reward.atomic.calls] == [True, True, True]
    assert reward.score == pytest.approx((1 / 6 + 1) / 2)


def test_the_sum_pays_fully_only_for_both_and_is_low_when_both_break():
    perfect = graduated_reward(GOLD, PERFECT).score
    collapses = [graduated_reward(GOLD, WRONG_WORKFLOW), graduated_reward(GOLD, BROKEN_ARGS)]
    for reward in collapses:  # one part near 1 alone would call these rollouts good; the sum does not
        assert max(reward.atomic.score, reward.orch.score) == 1.0
        assert reward.score <= 0.6 < perfect
    both = graduated_reward(GOLD, BOTH_BROKEN)
    assert (both.atomic.score, both.orch.score, both.score) == (0.0, 0.0, 0.0)
    assert [c.wrong_function for c in both.atomic.calls] == [False, True]
    # the extra argument the model did not pass counts as a miss of its group
    assert both.atomic.calls[0].hits == {"order_id": ("dependent", False), "reason": ("query", False)}


def test_orch_penalizes_stopping_early_and_extra_calls():
    stopped = [PERFECT[0][:1]]
    assert r_orch(GOLD, stopped).score == pytest.approx(1 / 3)
    assert r_atomic(GOLD, stopped).score == 1.0
    repeated = [PERFECT[0] + [PredCall("get_orders", {"user_id": "u1"})]]
    assert r_orch(GOLD, repeated).score == pytest.approx(3 / 4)
    skipped = [[PERFECT[0][0], PERFECT[0][2]]]  # step 2 missing: progress stops at it
    assert (r_orch(GOLD, skipped).matched, r_orch(GOLD, skipped).extra) == (1, 1)


def test_rewards_are_taken_turn_by_turn():
    gold = [[GoldCall("a", {})], [GoldCall("b", {"x": 1}, {"x": "prev_user_msg"})]]
    # the call of turn 1 made in turn 0 is a wrong function there, and turn 1 misses it
    swapped = [[PredCall("a", {}), PredCall("b", {"x": 1})], []]
    assert r_atomic(gold, swapped).score == 0.5
    assert r_orch(gold, swapped).per_turn == [(1, 1, 1), (0, 1, 0)]
    assert r_atomic(gold, []).score == 0.0 and r_atomic([[]], []).score == 1.0
    assert r_orch([[]], [[]]).score == 1.0 and r_orch([[]], [[PredCall("a", {})]]).score == 0.0


def test_weights_are_checked_and_normalized():
    reward = graduated_reward(GOLD, BROKEN_ARGS, w_atomic=3, w_orch=1)
    assert reward.score == pytest.approx((3 * (1 / 6) + 1) / 4)
    with pytest.raises(ValueError, match="w_atomic=-1"):
        graduated_reward(GOLD, PERFECT, w_atomic=-1)


@pytest.mark.parametrize("gold, pred, same", [
    ("Ada  Lovelace ", "ada lovelace", True), (2, "2.0", True), (2, 2.5, False), (True, 1, False),
    (["x"], "x", True), ([1, 2], [2, 1], False), ({"a": "B"}, {"a": "b"}, True), (None, "None", False)])
def test_normalization(gold, pred, same):
    assert values_match(gold, pred) is same
    assert hash(normalize_value(gold)) is not None


def test_progress_reward_is_state_times_success_share_averaged_over_turns():
    turns = [TurnProgress(state_correct=True, calls=2, ok_calls=2, gold_calls=2),   # 1
             TurnProgress(state_correct=True, calls=4, ok_calls=3, gold_calls=3),   # 0.75: one failed attempt
             TurnProgress(state_correct=False, calls=1, ok_calls=1, gold_calls=1),  # 0: wrong state
             TurnProgress(state_correct=True, calls=0, ok_calls=0, gold_calls=1),   # 0: due calls not made
             TurnProgress(state_correct=True, calls=0, ok_calls=0, gold_calls=0)]   # 1: nothing to do
    assert progress_reward(turns) == pytest.approx((1 + 0.75 + 0 + 0 + 1) / 5)
    assert progress_reward([]) == 0.0


def _verl_style_load(path: Path, name: str):
    """Load a reward function the way verl's get_custom_reward_fn does: a module from a file path, then a name."""
    spec = importlib.util.spec_from_file_location("custom_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def test_verl_adapter_is_called_the_way_verl_calls_it():
    compute_score = _verl_style_load(Path(verl_adapter.__file__), "compute_score")
    ground_truth = verl_adapter.ground_truth_json(GOLD)
    calls = "".join(f'<tool_call>\n{json.dumps({"name": c.name, "arguments": c.args})}\n</tool_call>\n'
                    for c in BROKEN_ARGS[0])
    solution = f"I will look this up.\n{calls}Done."
    result = compute_score(data_source="sap", solution_str=solution, ground_truth=ground_truth, extra_info={"index": 0})
    assert result == pytest.approx({"score": (1 / 6 + 1) / 2, "r_atomic": 1 / 6, "r_orch": 1.0})
    assert isinstance(result["score"], float)
    # a JSON list of OpenAI messages works too, with arguments as JSON strings; one turn alone via extra_info
    messages = json.dumps([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "find_user", "arguments": '{"name": "Ada Lovelace"}'}}]}])
    two_turns = verl_adapter.ground_truth_json([GOLD[0][:1], GOLD[0][1:]])
    assert compute_score("sap", messages, json.loads(two_turns), {"turn": 0})["score"] == 1.0
    assert compute_score("sap", messages, two_turns)["r_orch"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="'turns' list"):
        compute_score("sap", messages, "[]")
