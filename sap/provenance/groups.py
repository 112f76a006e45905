"""Intra-turn parallel groups: consecutive calls of a turn with no prev_output edge between them."""
from __future__ import annotations

from sap.model import Tag, Turn


def group_calls(turn: Turn) -> Turn:
    """The turn with each call's `group` set: a new group starts when a call consumes a result of the current one.

    Groups keep the execution order (they are contiguous runs), so exporting a group as one assistant
    message with several tool_calls replays to the same results.
    """
    calls, group, members = [], 0, set()
    for i, call in enumerate(turn.calls):
        deps = {p.call for p in call.args_prov.values()
                if p.effective_tag() == Tag.prev_output and p.turn == turn.index and p.call is not None}
        if deps & members:
            group, members = group + 1, set()
        members.add(i)
        calls.append(call.model_copy(update={"group": group}))
    return turn.model_copy(update={"calls": calls})
