"""The RODS progress reward: per turn, state correct x share of successful calls, averaged over turns.

For turn t, with s_t = 1 if the executor state after the model's turn equals the state after the ground
truth's calls of that turn (both run from the same initial configuration, each on its own executor), else 0,
and c_t the model's calls in the turn of which o_t succeeded:

    q_t = o_t / c_t                     if c_t > 0,
    q_t = 1 if the ground truth has no call in turn t, else 0     if c_t = 0,
    progress = (1 / T) * sum_t s_t * q_t,   in [0, 1]; 0 for a dialogue of no turns.

A turn that reaches the right state through failed attempts earns less than a clean one; a turn that makes
no call where calls were due earns nothing, even when the due calls only read.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TurnProgress:
    """What the progress reward needs of one turn."""

    state_correct: bool
    calls: int
    ok_calls: int
    gold_calls: int

    def score(self) -> float:
        """s_t * q_t."""
        if not self.state_correct:
            return 0.0
        if self.calls:
            return self.ok_calls / self.calls
        return 1.0 if self.gold_calls == 0 else 0.0


def progress_reward(turns: Sequence[TurnProgress]) -> float:
    """The mean of s_t * q_t over the turns (see the module docstring)."""
    return sum(t.score() for t in turns) / len(turns) if turns else 0.0
