"""verl custom reward function: `compute_score(data_source, solution_str, ground_truth, extra_info=None)`.

Point verl at this file (`custom_reward_function.path=<site-packages>/sap/rewards/verl.py`,
`custom_reward_function.name=compute_score`); verl's reward manager calls it with keyword arguments for
every response and accepts a float or a dict whose "score" is the reward (other keys are logged).

- `solution_str`: the decoded response. Tool calls are read from Hermes-style blocks
  `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (the format of Qwen-family chat templates
  that verl's multi-turn rollouts use), or, if the whole string is a JSON list of OpenAI chat messages,
  from the assistant messages' `tool_calls`.
- `ground_truth`: `ground_truth_json(turns)` of the task, stored in the parquet's
  `reward_model.ground_truth` (a JSON string, or the decoded object).
- `extra_info`: optional; `{"turn": t}` scores against turn t alone (one row per turn), `{"w_atomic": a,
  "w_orch": o}` changes the weights. Without "turn", all ground-truth turns are one sequence, since the
  response carries no turn boundaries.

The returned score is the graduated reward (R_atomic and R_orch, equal weights by default) of
`sap.rewards.graded`, also under "graduated" (the key a pool with `zone_reward="graduated"` reads); the
progress reward needs executor states, which a response string does not have. `sap export --format verl`
writes rows whose `reward_model.ground_truth` this function reads.
"""
from __future__ import annotations

import json
import re
from typing import Any

from sap.rewards.calls import GoldCall, PredCall
from sap.rewards.graded import flatten, graduated_reward

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def ground_truth_json(turns: list[list[GoldCall]]) -> str:
    """The `ground_truth` string of a task: its calls per turn with arguments, provenance tags and the sources
    (`[turn, call]` per argument) of arguments carried over from earlier results."""
    return json.dumps({"turns": [[{"name": g.name, "arguments": g.args, "tags": g.tags,
                                   "sources": {a: list(src) for a, src in g.sources.items()}} for g in turn]
                                 for turn in turns]}, ensure_ascii=False)


def parse_ground_truth(ground_truth: str | dict[str, Any]) -> list[list[GoldCall]]:
    """The turns of a `ground_truth_json` string (or its decoded object)."""
    doc = json.loads(ground_truth) if isinstance(ground_truth, str) else ground_truth
    if not isinstance(doc, dict) or not isinstance(doc.get("turns"), list):
        raise ValueError("ground_truth must be a JSON object with a 'turns' list (see sap.rewards.verl.ground_truth_json)")
    return [[GoldCall(c["name"], dict(c.get("arguments") or {}), dict(c.get("tags") or {}),
                      {a: (int(src[0]), int(src[1])) for a, src in (c.get("sources") or {}).items()})
             for c in turn] for turn in doc["turns"]]


def _call(obj: Any) -> PredCall | None:
    """A predicted call from {"name", "arguments"} (arguments as an object or a JSON string); None if malformed."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            return PredCall(obj["name"], {}, ok=False, error="arguments are not JSON")
    return PredCall(obj["name"], args) if isinstance(args, dict) else PredCall(obj["name"], {}, ok=False,
                                                                                 error="arguments are not an object")


def parse_solution(solution_str: str) -> list[PredCall]:
    """The tool calls of a response, in order (see the module docstring); a malformed block is skipped."""
    try:
        messages = json.loads(solution_str)
    except (json.JSONDecodeError, TypeError):
        messages = None
    raw: list[Any] = []
    if isinstance(messages, list) and all(isinstance(m, dict) and "role" in m for m in messages):
        raw = [tc.get("function") for m in messages if m.get("role") == "assistant" for tc in m.get("tool_calls") or []]
    else:
        for block in _TOOL_CALL.findall(solution_str or ""):
            try:
                raw.append(json.loads(block))
            except json.JSONDecodeError:
                continue
    return [c for c in map(_call, raw) if c is not None]


def compute_score(data_source: str, solution_str: str, ground_truth: str | dict[str, Any],
                  extra_info: dict[str, Any] | None = None) -> dict[str, float]:
    """{"score" and "graduated": the graduated reward, "r_atomic": ..., "r_orch": ...} of one response (see the
    module docstring)."""
    extra_info = extra_info or {}
    turns = parse_ground_truth(ground_truth)
    if extra_info.get("turn") is not None:
        t = int(extra_info["turn"])  # edges from earlier turns count as met: those turns are not scored here
        gold = [[GoldCall(g.name, g.args, g.tags, {a: (0, c) for a, (st, c) in g.sources.items() if st == t})
                 for g in turns[t]]]
    else:
        gold = flatten(turns)
    reward = graduated_reward(gold, [parse_solution(solution_str)], float(extra_info.get("w_atomic", 0.5)),
                              float(extra_info.get("w_orch", 0.5)))
    return {"score": reward.score, "graduated": reward.score, "r_atomic": reward.atomic.score,
            "r_orch": reward.orch.score}
