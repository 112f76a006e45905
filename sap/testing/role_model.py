"""RoleModel: a deterministic stand-in for a competent LLM behind ScriptedLLMServer, answering sap's own role
prompts validly (keeps the planner's drafts, states every must-mention value, accepts in the judge)."""
from __future__ import annotations

import json
import re
from typing import Any

from sap.prompts import prompt

_OPEN_NEW = re.compile(r"^- (\w+) \(NEW, code's draft: (.*)\)$")
_OPEN_CHOOSE = re.compile(r"^- (\w+) \(CHOOSE one index\):$")
_PICK = re.compile(r"^(\d+): .*\(code's pick\)$")
_CALL = re.compile(r"^call \d+: task: (.*)$")
_VERBATIM = re.compile(r"^\[(?:NEW|FROM_CONFIG|FALLBACK from \w+)\] ([^:]+): (.*)$")
_REFERRED = re.compile(r"^\[(?:FROM_HISTORY|FALLBACK from \w+)\] ([^:]+): refer to it")
_AHEAD = re.compile(r"^(?:Also state these values in this turn.*?: |also state, for later: )(.*)$")


def _which(system: str) -> str:
    """The sap prompt whose system text starts the request's system message."""
    for name in ("planner_bind", "planner_narrative", "messenger_turn", "messenger_global", "judge"):
        if system.startswith(prompt(name).system):
            return name
    raise ValueError(f"not a sap role prompt: {system[:60]!r}")


def _planner(user: str) -> dict[str, Any]:
    values, choices = {}, {}
    choosing = None
    for line in (raw.strip() for raw in user.splitlines()):
        if m := _OPEN_NEW.match(line):
            values[m.group(1)], choosing = json.loads(m.group(2)), None
        elif m := _OPEN_CHOOSE.match(line):
            choosing = m.group(1)
            choices[choosing] = 0
        elif choosing and (m := _PICK.match(line)):
            choices[choosing] = int(m.group(1))
    return {"values": values, "choices": choices}


def _fragments(block: list[str]) -> tuple[list[str], str]:
    """User fragments, one per `call N: task:` line, and the ahead sentence, from a block of prompt lines."""
    fragments: list[list[str]] = []
    tasks: list[str] = []
    ahead = ""
    for raw in block:
        line = raw.strip()
        if m := _CALL.match(line):
            tasks.append(m.group(1))
            fragments.append([])
        elif (m := _VERBATIM.match(line)) and fragments:
            fragments[-1].append(f"{m.group(1)} {m.group(2)}")
        elif (m := _REFERRED.match(line)) and fragments:
            fragments[-1].append(f"the {m.group(1)} from before")
        elif (m := _AHEAD.match(line)) and m.group(1) != "(none)":
            ahead = f" For later, note {m.group(1)}."
    return [f"Please {t} ({'; '.join(d)})." if d else f"Please {t}." for t, d in zip(tasks, fragments)], ahead


def _messenger_turn(user: str) -> dict[str, Any]:
    fragments, ahead = _fragments(user.splitlines())
    fragments[-1] += ahead
    return {"fragments": fragments, "assistant_message": "Done, here is what I found."}


def _messenger_global(user: str) -> dict[str, Any]:
    blocks: list[list[str]] = []
    for line in user.split("Turns:", 1)[1].splitlines():
        if re.match(r"^turn \d+:$", line.strip()):
            blocks.append([])
        elif blocks:
            blocks[-1].append(line)
    turns = []
    for block in blocks:
        fragments, ahead = _fragments(block)
        turns.append({"user_message": " ".join(fragments) + ahead, "assistant_message": "Done."})
    return {"turns": turns}


def role_model(request: dict[str, Any]) -> str:
    """A ScriptedLLMServer responder: the JSON answer a competent model would give to this sap prompt."""
    messages = request["messages"]
    name = _which(messages[0]["content"])
    user = messages[1]["content"]
    answer: dict[str, Any]
    if name == "planner_bind":
        answer = _planner(user)
    elif name == "planner_narrative":
        answer = {"narrative": "A customer wants to get a few errands done, one after another."}
    elif name == "messenger_turn":
        answer = _messenger_turn(user)
    elif name == "messenger_global":
        answer = _messenger_global(user)
    else:
        answer = {"findings": []}
    return json.dumps(answer)
