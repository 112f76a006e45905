"""Graduated rewards (R_atomic, R_orch, their weighted sum) and the RODS progress reward: pure functions."""
from sap.rewards.calls import GoldCall, PredCall, arg_group, gold_turns, normalize_value, values_match
from sap.rewards.graded import (AtomicReward, CallScore, GraduatedReward, OrchReward, flatten, graduated_reward,
                                r_atomic, r_orch)
from sap.rewards.levels import CallLevels, call_levels
from sap.rewards.progress import TurnProgress, progress_reward

__all__ = ["AtomicReward", "CallLevels", "CallScore", "GoldCall", "GraduatedReward", "OrchReward", "PredCall",
           "TurnProgress", "arg_group", "call_levels", "flatten", "gold_turns", "graduated_reward", "normalize_value",
           "progress_reward", "r_atomic", "r_orch", "values_match"]
