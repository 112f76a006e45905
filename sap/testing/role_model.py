"""RoleModel: a deterministic stand-in for a competent LLM behind ScriptedLLMServer, answering sap's own role
prompts validly (keeps the planner's drafts, states every must-mention value, accepts in the judge, drafts a
phase FSM from the tool list, keeps code's repair suggestion, re-plans by a search over the listed transitions,
writes cache-mode queries stating every listed value verbatim and echoes exactly those)."""
from __future__ import annotations

import json
import re
from typing import Any, Callable

from sap.prompts import prompt
from sap.testing.scripted_llm import request_schema
from sap.text import describe_value

_OPEN_NEW = re.compile(r"^- (\w+) \(NEW, code's draft: (.*)\)$")
_OPEN_CHOOSE = re.compile(r"^- (\w+) \(CHOOSE one (?:index|value)\):$")
_PICK = re.compile(r"^(\d+): .*\(code's pick\)$")
_CALL = re.compile(r"^call (\d+): task: (.*)$")
_TURN_CALL = re.compile(r"^call (\d+): \w+: ")
_PREREQUISITE = re.compile(r"^step \d+ \(PREREQUISITE")
_VERBATIM = re.compile(r"^\[(?:NEW|FROM_CONFIG|FALLBACK from \w+)\] ([^:]+): (.*)$")
_REFERRED = re.compile(r"^\[(?:FROM_HISTORY|FOUND_BY_ASSISTANT|FALLBACK from \w+)\] ([^:]+): refer to it as (.*?)"
                       r"(?: \(say which one.*?\))?"
                       r"(?: \| its value, not to be restated: .*)?$")
_OWN_WORDS = re.compile(r'from your side \("(.*?)"\)')
_AHEAD = re.compile(r"^(?:Also state these values in this turn.*?: |also state, for later: )(.*)$")
_TOOL = re.compile(r"^- (\w+) \((\w+)(; needs login)?\): ")
_ARG = re.compile(r"^\s+(\w+): first turn (\w+|not possible); later (\w+)(?: \(from results of (.*)\))?")
_OPTION = re.compile(r"^\[(\d+)\] (\S+) -> (\S+): ")
_CHAIN_STEP = re.compile(r"^step \d+: (\w+): (.*); state verbatim: (\{.*\}); do not state \(comes from an earlier "
                         r"result\): (\{.*\})$")


_NARRATIVE = "A customer wants to get a few errands done, one after another."


def _planner(user: str, schema: dict[str, Any]) -> dict[str, Any]:
    """Code's draft for each NEW argument; code's pick (else the first option) for each CHOOSE one, as the
    schema asks for it: the option's value from its enum, or its index."""
    answer: dict[str, Any] = {}
    picks: dict[str, int] = {}
    choosing = None
    for line in (raw.strip() for raw in user.splitlines()):
        if m := _OPEN_NEW.match(line):
            answer[m.group(1)], choosing = json.loads(m.group(2)), None
        elif m := _OPEN_CHOOSE.match(line):
            choosing = m.group(1)
            picks[choosing] = 0
        elif choosing and (m := _PICK.match(line)):
            picks[choosing] = int(m.group(1))
    for name, index in picks.items():
        answer[name] = schema["properties"][name]["enum"][index]
    return answer


def _planner_turn(user: str, schema: dict[str, Any]) -> dict[str, Any]:
    """Per listed call, its open arguments as `_planner` answers them; the narrative when the schema asks for one."""
    blocks: dict[str, list[str]] = {}
    for line in user.split("Calls made so far", 1)[0].splitlines():
        if m := _TURN_CALL.match(line):
            blocks[f"call_{m.group(1)}"] = []
        elif blocks:
            blocks[list(blocks)[-1]].append(line)
    answer: dict[str, Any] = {key: _planner("\n".join(lines), schema["properties"][key])
                              for key, lines in blocks.items()}
    if "narrative" in schema["properties"]:
        answer["narrative"] = _NARRATIVE
    return answer


def _fragments(block: list[str]) -> tuple[dict[int, str], str]:
    """User fragments by call number, one per `call N: task:` line (the values a goal turn's `step N
    (PREREQUISITE ...)` needs go into the last fragment), and the ahead sentence, from a block of prompt lines."""
    fragments: dict[int, list[str]] = {}
    tasks: dict[int, str] = {}
    facts: list[str] = []
    current: list[str] | None = None
    ahead = ""
    for raw in block:
        line = raw.strip()
        if m := _CALL.match(line):
            tasks[int(m.group(1))] = m.group(2)
            current = fragments[int(m.group(1))] = []
        elif _PREREQUISITE.match(line):
            current = facts
        elif (m := _VERBATIM.match(line)) and current is not None:
            current.append(f"{m.group(1)} {m.group(2)}")
        elif (m := _REFERRED.match(line)) and current is not None:  # a found value in the user's own words only
            own = _OWN_WORDS.search(m.group(2)) if "[FOUND_BY_ASSISTANT]" in line else None
            current.append(own.group(1) if own else f"{m.group(1)}: {m.group(2)}")
        elif (m := _AHEAD.match(line)) and m.group(1) != "(none)":
            ahead = f" For later, note {m.group(1)}."
    if facts and fragments:
        fragments[max(fragments)] += facts
    return {i: f"Please {t} ({'; '.join(fragments[i])})." if fragments[i] else f"Please {t}."
            for i, t in tasks.items()}, ahead


def _plain(text: str) -> str:
    """A text as sap's answer schemas take it: single quotes for double ones, no backslash."""
    return text.replace('"', "'").replace("\\", "/")


def _messenger_turn(user: str) -> dict[str, Any]:
    fragments, ahead = _fragments(user.splitlines())
    fragments[max(fragments)] += ahead
    return {"fragments": {f"call_{i}": _plain(f) for i, f in fragments.items()},
            "assistant_message": "Done, here is what I found."}


def _messenger_global(user: str) -> dict[str, Any]:
    blocks: list[list[str]] = []
    for line in user.split("Turns:", 1)[1].splitlines():
        if re.match(r"^turn \d+:$", line.strip()):
            blocks.append([])
        elif blocks:
            blocks[-1].append(line)
    turns = {}
    for k, block in enumerate(blocks):
        fragments, ahead = _fragments(block)
        turns[f"turn_{k}"] = {"user_message": _plain(" ".join(fragments.values()) + ahead),
                              "assistant_message": "Done."}
    return {"turns": turns}


def _messenger_clarify(user: str) -> dict[str, Any]:
    """Asks for the listed values, or says the task cannot be done with the tools at hand."""
    need = re.search(r"^What the reply must do: (.*)$", user, re.M).group(1)
    if m := re.match(r"Ask the user for: (.*?)\. Do not", need):
        return {"assistant_message": f"Happy to help. First, could you tell me the {m.group(1)}?"}
    task = re.match(r"You have no tool that can (.*?)\. Say so", need)
    what = f"{task.group(1)} with what I have at hand" if task else "handle that with what I have at hand"
    return {"assistant_message": f"I'm sorry, I can't {what} right now."}


def _messenger_withhold(user: str) -> dict[str, Any]:
    """The request with only the values it keeps (as messenger_turn writes it), and a follow-up giving each value
    left out."""
    calls, missing = user.split("Values to leave out of user_message and give in follow_up:", 1)
    fragments, ahead = _fragments(calls.splitlines())
    given = [f"the {m.group(1)} is {m.group(2)}" for line in missing.splitlines()
             if (m := re.match(r"^- ([^:]+): (.*)$", line.strip()))]
    return {"user_message": _plain(" ".join(fragments.values()) + ahead),
            "follow_up": _plain(f"Sorry, {'; '.join(given)}.")}


def _fsm_draft(user: str) -> dict[str, Any]:
    """A phase FSM: login first when tools need it, lookups into `found`, actions into `done`, both final-bound."""
    tools: dict[str, dict[str, Any]] = {}
    for line in user.splitlines():
        if m := _TOOL.match(line):
            tools[m.group(1)] = {"kind": m.group(2), "gated": bool(m.group(3)), "first": {}, "later": {}, "feeds": set()}
        elif (m := _ARG.match(line)) and tools:
            tool = tools[list(tools)[-1]]
            tool["first"][m.group(1)], tool["later"][m.group(1)] = m.group(2), m.group(3)
            tool["feeds"] |= set((m.group(4) or "").split(", ")) - {""}
    auth = [n for n, t in tools.items() if t["kind"] == "auth"]
    hub = "authed" if auth and any(t["gated"] for t in tools.values()) else "start"
    edges: list[dict[str, Any]] = []

    def edge(src: str, dst: str, *names: str) -> None:
        tags = {n: tools[n]["first" if src == "start" else "later"] for n in names}
        if all("not possible" not in t.values() for t in tags.values()) and (
                src != "start" or all(not tools[n]["gated"] or n in auth for n in names)):
            edges.append({"from": src, "to": dst, "action": list(names), "tags": tags})

    for name in auth if hub == "authed" else []:
        edge("start", "authed", name)
    for src in dict.fromkeys([hub, "found", "done"]):
        for name, t in tools.items():
            if t["kind"] in ("read", "action"):
                edge(src, "found" if t["kind"] == "read" else "done", name)
            if t["kind"] == "read" and src != hub:
                edge(src, "end", name)
            if t["kind"] == "action" and src != "start":  # a lookup whose result the action uses, in one turn
                for feeder in sorted(f for f in t["feeds"] if f in tools and tools[f]["kind"] == "read")[:2]:
                    edge(src, "done", feeder, name)
    used = {e["from"] for e in edges} | {e["to"] for e in edges} | {"start"}
    types = {"start": "INITIAL", "authed": "AUTH_COMPLETED", "found": "FOUND", "done": "ACTION_COMPLETED",
             "end": "COMPLETED"}
    return {"states": [{"id": s, "type": k, "description": s} for s, k in types.items() if s in used],
            "initial": "start", "finals": [s for s in ("done", "end") if s in used], "transitions": edges}


def _repair(user: str) -> dict[str, Any]:
    suggestion = user.rsplit("Code's suggestion: ", 1)[1].strip()
    return {"patch": [] if suggestion == "(none)" else json.loads(suggestion), "reason": "as code suggests"}


def _replan(user: str) -> dict[str, Any]:
    """The first path in breadth-first order over the listed transitions that is long enough, ends final and, unless
    the kept turns did, holds a transition marked as changing something or using a result."""
    start = re.search(r"^Current state: (\S+)$", user, re.M).group(1)
    finals = set(re.search(r"^Final states: (.*)$", user, re.M).group(1).split(", "))
    lo, hi = map(int, re.search(r"between (\d+) and (\d+) transitions", user).groups())
    evolved = re.search(r"^The kept turns already change something or use a result: yes$", user, re.M) is not None
    options = [(int(m.group(1)), m.group(2), m.group(3), "(changes something" in line or "uses a result)" in line)
               for line in user.splitlines() if (m := _OPTION.match(line))]
    paths: list[tuple[str, list[int], bool]] = [(start, [], evolved)]
    seen = {(start, 0, evolved)}
    while paths:
        at, path, moved = paths.pop(0)
        if lo <= len(path) and at in finals and moved:
            return {"transitions": path}
        for i, src, dst, marked in options:
            step = (dst, len(path) + 1, moved or marked)
            if src == at and len(path) < hi and step not in seen:
                seen.add(step)
                paths.append((dst, path + [i], moved or marked))
    return {"transitions": []}


def _cache_query(user: str) -> dict[str, Any]:
    """One sentence per chain step: its task, its values to state (verbatim), the earlier results it uses."""
    sentences, echo = [], {}
    for line in user.splitlines():
        if m := _CHAIN_STEP.match(line.strip()):
            stated, taken = json.loads(m.group(3)), json.loads(m.group(4))
            details = [f"{p.replace('_', ' ')} {describe_value(v)}" for p, v in stated.items()]
            details += [f"the {p.replace('_', ' ')} from that result" for p in taken]
            sentences.append(f"Please {m.group(2)}" + (f" ({'; '.join(details)})." if details else "."))
            echo[f"step_{len(echo)}"] = {"function": m.group(1), "arguments": stated}
    return {"query": _plain(" Then ".join(sentences)), "echo": echo}


def _text_only(answer: Callable[[str], dict[str, Any]]) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """An answer that reads the request's user text only, as a table entry."""
    return lambda user, _schema: answer(user)


# each sap prompt the model answers, with its answer to the request's user text and response schema
ANSWERS: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]] = {
    "planner_turn": _planner_turn,
    "planner_bind": _planner,
    "planner_narrative": _text_only(lambda _: {"narrative": _NARRATIVE}),
    "messenger_turn": _text_only(_messenger_turn),
    "messenger_global": _text_only(_messenger_global),
    "messenger_clarify": _text_only(_messenger_clarify),
    "messenger_withhold": _text_only(_messenger_withhold),
    "judge": _text_only(lambda _: {"findings": []}),
    "fsm_draft": _text_only(_fsm_draft),
    "repair": _text_only(_repair),
    "replan": _text_only(_replan),
    "cache_query": _text_only(_cache_query),
}


def _which(system: str) -> str:
    """The sap prompt whose system text starts the request's system message."""
    for name in ANSWERS:
        if system.startswith(prompt(name).system):
            return name
    raise ValueError(f"not a sap role prompt: {system[:60]!r}")


def role_model(request: dict[str, Any]) -> str:
    """A ScriptedLLMServer responder: the JSON answer a competent model would give to this sap prompt."""
    messages = request["messages"]
    return json.dumps(ANSWERS[_which(messages[0]["content"])](messages[1]["content"], request_schema(request)))
