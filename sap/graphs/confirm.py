"""A written trajectory under its toolset's policy: each confirmed write gets its own exchange (the assistant
recaps the action and its details, the user answers yes in a turn of its own, then the write runs), and a
terminal call's turn ends with the declared hand-off message."""
from __future__ import annotations

import random

from sap.model import Tag, ToolCall, ToolSpec, Trajectory, Turn
from sap.provenance.policy import Policy, recap

CONFIRMATIONS = ("Yes, please go ahead.", "Yes, that's right, please proceed.", "Yes, I confirm.", "Yes.",
                 "Yes, go ahead.", "Yes, that's correct.")


def _chunks(turn: Turn, confirmed: frozenset[str]) -> list[list[int]]:
    """The turn's call indices cut before each confirmed call (the first chunk may be empty)."""
    chunks: list[list[int]] = [[]]
    for i, call in enumerate(turn.calls):
        if call.name in confirmed:
            chunks.append([])
        chunks[-1].append(i)
    return chunks


def confirm_writes(traj: Trajectory, policy: Policy, specs: dict[str, ToolSpec]) -> Trajectory:
    """`traj` with every turn cut before each confirmed call: the part before keeps the user's request and ends
    with the recap of the call; the part from the call opens with the user's yes and keeps the turn's reply.
    Provenance, virtual history and turn numbers follow the new turns."""
    confirmed = policy.confirmed()
    rng = random.Random(f"{traj.seed}:confirm")
    where: dict[tuple[int, int], tuple[int, int]] = {}  # old (turn, call) -> new (turn, call)
    opened: dict[int, int] = {}  # old turn -> the new turn holding its user message
    plan: list[tuple[Turn, list[int], int]] = []  # (old turn, its call indices, chunk number)
    for turn in traj.turns:
        chunks = _chunks(turn, confirmed)
        opened[turn.index] = len(plan)
        for k, chunk in enumerate(chunks):
            for j, i in enumerate(chunk):
                where[(turn.index, i)] = (len(plan), j)
            plan.append((turn, chunk, k))
    turns = []
    for new, (turn, chunk, k) in enumerate(plan):
        last = new + 1 == len(plan) or plan[new + 1][0].index != turn.index
        following = None if last else turn.calls[plan[new + 1][1][0]]
        calls = [_moved(turn.calls[i], where, opened) for i in chunk]
        reply = turn.assistant_message if last else recap(following, specs[following.name], rng)
        turns.append(Turn(index=new, state=turn.state, transition=turn.transition, calls=calls,
                          user_message=turn.user_message if k == 0 else rng.choice(CONFIRMATIONS),
                          assistant_message=reply,
                          prerequisites=[j for j, i in enumerate(chunk) if i in turn.prerequisites]))
    if policy.terminal and policy.terminal.message and turns and any(
            c.name in policy.terminal.tools for c in turns[-1].calls):
        turns[-1] = turns[-1].model_copy(update={"assistant_message": policy.terminal.message})
    virtual = [{**v, "turn": opened.get(v["turn"], v["turn"]),
                **({"used_at": opened[v["used_at"]]} if v.get("used_at") in opened else {})}
               for v in traj.virtual_history]
    return traj.model_copy(update={"turns": turns, "virtual_history": virtual})


def _moved(call: ToolCall, where: dict[tuple[int, int], tuple[int, int]], opened: dict[int, int]) -> ToolCall:
    """The call with its provenance pointing at the new turns."""
    prov = {}
    for name, p in call.args_prov.items():
        if p.turn is not None and p.call is not None and (p.turn, p.call) in where:
            turn, index = where[(p.turn, p.call)]
            p = p.model_copy(update={"turn": turn, "call": index})
        elif p.turn is not None and p.effective_tag() != Tag.prev_output and p.turn in opened:
            p = p.model_copy(update={"turn": opened[p.turn]})
        prov[name] = p
    return call.model_copy(update={"args_prov": prov})
