"""Rewards on hand-made rollouts: R_atomic, R_orch, their sum (and both collapses), progress, the verl adapter."""
from __future__ import annotations

import importlib.util
import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sap.rewards.verl as verl_adapter
from sap.rewards import (GoldCall, PredCall, TurnProgress, graduated_reward, normalize_value, progress_reward,
                         r_atomic, r_orch, values_match)
from sap.rewards.assign import max_weight_assignment
from sap.rewards.graded import flatten
from sap.rewards.levels import call_levels

# find_user -> get_orders -> cancel_order: each id is carried over from the previous call's result
GOLD = [[
    GoldCall("find_user", {"name": "Ada Lovelace"}, {"name": "self_create"}),
    GoldCall("get_orders", {"user_id": "u1"}, {"user_id": "prev_output"}, {"user_id": (0, 0)}),
    GoldCall("cancel_order", {"order_id": "o7", "reason": "late"}, {"order_id": "prev_output", "reason": "self_create"},
             {"order_id": (0, 1)}),
]]
FIND, ORDERS, CANCEL = (PredCall("find_user", {"name": "ada  lovelace"}), PredCall("get_orders", {"user_id": "u1"}),
                        PredCall("cancel_order", {"order_id": "o7", "reason": "Late"}))
PERFECT = [[FIND, ORDERS, CANCEL]]
BROKEN_ARGS = [[PredCall("find_user", {"name": "Bob"}), PredCall("get_orders", {"user_id": "u9"}),
                PredCall("cancel_order", {"order_id": "o1", "reason": "early"})]]
# two independent calls, and two calls of one function with different arguments
INDEPENDENT = [[GoldCall("get_weather", {"city": "Paris"}, {"city": "self_create"}),
                GoldCall("get_time", {"zone": "CET"}, {"zone": "self_create"})]]
SAME_FUNCTION = [[GoldCall("get_order", {"order_id": "o1"}, {"order_id": "initial_state"}),
                  GoldCall("get_order", {"order_id": "o2"}, {"order_id": "initial_state"})]]


def _failed(call: PredCall) -> PredCall:
    return PredCall(call.name, call.args, ok=False, error="boom")


# (case, gold, predicted turns, R_atomic, R_orch), every figure worked out by hand from the formulas in
# sap/rewards/graded.py and sap/rewards/levels.py (level = 0.1 + 0.1 S + A (0.6 + 0.2 E)); R = (R_atomic + R_orch) / 2
HAND_TABLE = [
    ("perfect", GOLD, PERFECT, 1.0, 1.0),
    # every call exact (atomic 3/3); only find_user is done: each edge's source comes after its target
    ("reversed", GOLD, [[CANCEL, ORDERS, FIND]], 1.0, 1 / 3),
    # 2 exact calls over max(2, 3) slots; cancel_order's source step is missing
    ("missing middle", GOLD, [[FIND, CANCEL]], 2 / 3, 1 / 3),
    ("stopped after the first call", GOLD, [[FIND]], 1 / 3, 1 / 3),
    # cancel_order: S = 1, A = 1/2 -> 0.1 + 0.1 + 0.5 * 0.8 = 0.6; reason is no edge, so the step is done
    ("one wrong value", GOLD, [[FIND, ORDERS, PredCall("cancel_order", {"order_id": "o7", "reason": "early"})]],
     2.6 / 3, 1.0),
    # find_user(name, limit): S = 1/2, A = 1/2 -> 0.1 + 0.05 + 0.5 * 0.8 = 0.55
    ("an extra argument", GOLD, [[PredCall("find_user", {"name": "Ada Lovelace", "limit": 5}), ORDERS, CANCEL]],
     2.55 / 3, 1.0),
    # get_orders(u9): S = 1, A = 0 -> 0.2; its edge carries the wrong value, cancel_order's edge is honoured
    ("a wrong dependent id", GOLD, [[FIND, PredCall("get_orders", {"user_id": "u9"}), CANCEL]], 2.2 / 3, 2 / 3),
    # the copy is not matched: 3 / max(4, 3); k = 3 over N + e = 3 + 1
    ("the first call repeated", GOLD, [[FIND, FIND, ORDERS, CANCEL]], 0.75, 0.75),
    # 0.2 each; find_user has no edge in and is done, the two dependent steps are not
    ("right functions, all arguments wrong", GOLD, BROKEN_ARGS, 0.2, 1 / 3),
    # 0.1 + 0.1 + 1 * 0.6 = 0.8 each; no step ran, so none is done
    ("correct arguments that all failed", GOLD, [[_failed(FIND), _failed(ORDERS), _failed(CANCEL)]], 0.8, 0.0),
    ("swapped independent calls", INDEPENDENT,
     [[PredCall("get_time", {"zone": "cet"}), PredCall("get_weather", {"city": "Paris"})]], 1.0, 1.0),
    # o1 matches the first step (1.0), its copy the second (S = 1, A = 0: 0.2): (1 + 0.2) / 2
    ("one call duplicated to cover two steps", SAME_FUNCTION,
     [[PredCall("get_order", {"order_id": "o1"}), PredCall("get_order", {"order_id": "o1"})]], 0.6, 1.0),
    ("empty answer", GOLD, [[]], 0.0, 0.0),
]


@pytest.mark.parametrize("case, gold, pred, atomic, orch", HAND_TABLE, ids=[row[0] for row in HAND_TABLE])
def test_hand_computed_rewards(case, gold, pred, atomic, orch):
    reward = graduated_reward(gold, pred)
    assert reward.atomic.score == pytest.approx(atomic)
    assert reward.orch.score == pytest.approx(orch)
    assert reward.score == pytest.approx((atomic + orch) / 2)


def test_no_gamed_rollout_reaches_the_perfect_score():
    for case, gold, pred, _, _ in HAND_TABLE:
        if case not in ("perfect", "swapped independent calls"):
            assert graduated_reward(gold, pred).score < 0.95, case


def test_group_hits_and_error_flags_follow_the_assignment():
    reward = graduated_reward(GOLD, BROKEN_ARGS)
    assert reward.atomic.group_hits == {"query": (0, 2), "dependent": (0, 2), "other": (0, 0)}
    assert reward.atomic.group_share("dependent") == 0.0
    assert [c.wrong_parameters for c in reward.atomic.calls] == [True, True, True]
    repeated = graduated_reward(GOLD, [[FIND, FIND, PredCall("lookup", {"q": "Ada"})]])
    # the copy of find_user is extra (no ground-truth call left for it), lookup is a wrong function
    assert [(c.gold_index, c.wrong_function) for c in repeated.atomic.calls] == [(0, False), (None, False),
                                                                                  (None, True)]
    assert repeated.atomic.calls[0].levels.score == 1.0
    assert (repeated.orch.matched, repeated.orch.steps, repeated.orch.extra) == (1, 3, 2)


def test_levels_grade_name_schema_values_and_execution():
    gold = GOLD[0][2]
    assert call_levels(gold, CANCEL).score == 1.0
    assert call_levels(gold, PredCall("get_orders", CANCEL.args)).score == 0.0
    # order_id given as a number: the schema level drops for it as well as the value level
    typed = call_levels(gold, PredCall("cancel_order", {"order_id": 7, "reason": "late"}))
    assert (typed.schema, typed.values) == (0.5, 0.5)
    assert typed.score == pytest.approx(0.1 + 0.05 + 0.5 * 0.8)
    assert call_levels(gold, _failed(CANCEL)).score == pytest.approx(0.8)


def test_edges_across_turns_and_turn_by_turn_scoring():
    gold = [[GoldCall("a", {})], [GoldCall("b", {"x": 1}, {"x": "prev_output"}, {"x": (0, 0)})]]
    assert graduated_reward(gold, [[PredCall("a", {})], [PredCall("b", {"x": 1})]]).score == 1.0
    # b made in turn 0 is a wrong function there and turn 1 misses it: 1 of max(2, 1) + max(0, 1) slots
    swapped = [[PredCall("a", {}), PredCall("b", {"x": 1})], []]
    assert r_atomic(gold, swapped).score == pytest.approx(1 / 3)
    assert r_orch(gold, swapped).per_turn == [(1, 1, 1), (0, 1, 0)]
    assert r_atomic(gold, []).score == 0.0 and r_atomic([[]], []).score == 1.0
    assert r_orch([[]], [[]]).score == 1.0 and r_orch([[]], [[PredCall("a", {})]]).score == 0.0
    # flattened for a response without turn boundaries, the edge points at the same call
    assert flatten(gold) == [[gold[0][0], GoldCall("b", {"x": 1}, {"x": "prev_output"}, {"x": (0, 0)})]]
    assert flatten([[GoldCall("a", {})], [GoldCall("c", {})], gold[1]])[0][2].sources == {"x": (0, 0)}


LEVEL_VALUES = st.sampled_from([0.0, 0.1, 0.2, 0.55, 0.6, 0.8, 1.0])


@settings(max_examples=60, deadline=None)
@given(st.tuples(st.integers(1, 5), st.integers(1, 5)).flatmap(
    lambda shape: st.lists(st.lists(LEVEL_VALUES, min_size=shape[1], max_size=shape[1]),
                           min_size=shape[0], max_size=shape[0])))
def test_assignment_is_one_to_one_and_optimal(weights):
    pairs = max_weight_assignment(weights)
    assert len(set(pairs.values())) == len(pairs) and all(weights[r][c] > 0 for r, c in pairs.items())
    rows, cols = len(weights), len(weights[0])
    best = max(sum(weights[r][c] for r, c in zip(order, range(cols)) if r is not None)
               for order in itertools.permutations(list(range(rows)) + [None] * cols, cols))
    assert sum(weights[r][c] for r, c in pairs.items()) == pytest.approx(best)


def test_weights_are_checked_and_normalized():
    reward = graduated_reward(GOLD, BROKEN_ARGS, w_atomic=3, w_orch=1)
    assert reward.score == pytest.approx((3 * 0.2 + 1 / 3) / 4)
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
    assert result == pytest.approx({"score": (0.2 + 1 / 3) / 2, "graduated": (0.2 + 1 / 3) / 2, "r_atomic": 0.2,
                                    "r_orch": 1 / 3})
    assert isinstance(result["score"], float)
    # a JSON list of OpenAI messages works too, with arguments as JSON strings; one turn alone via extra_info
    messages = json.dumps([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "find_user", "arguments": '{"name": "Ada Lovelace"}'}}]}])
    two_turns = verl_adapter.ground_truth_json([GOLD[0][:1], [
        GoldCall("get_orders", {"user_id": "u1"}, {"user_id": "prev_output"}, {"user_id": (0, 0)}),
        GoldCall("cancel_order", {"order_id": "o7", "reason": "late"}, {}, {"order_id": (1, 0)})]])
    assert compute_score("sap", messages, json.loads(two_turns), {"turn": 0})["score"] == 1.0
    assert compute_score("sap", messages, two_turns)["r_orch"] == pytest.approx(1 / 3)
    # the edges survive the JSON: flattened, cancel_order's source is get_orders, turn 1 alone keeps it too
    assert verl_adapter.parse_ground_truth(two_turns)[1][1].sources == {"order_id": (1, 0)}
    backwards = "".join(f'<tool_call>{json.dumps({"name": c.name, "arguments": c.args})}</tool_call>'
                        for c in [FIND, CANCEL, ORDERS])
    assert compute_score("sap", backwards, two_turns)["r_orch"] == pytest.approx(2 / 3)
    assert compute_score("sap", backwards.split("</tool_call>", 1)[1], two_turns, {"turn": 1})["r_orch"] == 0.5
    with pytest.raises(ValueError, match="'turns' list"):
        compute_score("sap", messages, "[]")
