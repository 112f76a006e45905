"""`sap cache synthesize` with the LLM query writer and LLM judge against the scripted server answering as a
competent model: records validate, usage is counted per role, a wrong echo is fed back and fixed, and a chain whose
echo stays wrong is rejected with the reason."""
from __future__ import annotations

import json

import pytest

from sap.cache.templates import load_templates
from sap.cli import main
from helpers import travel_cache
from sap.store import RunStore
from sap.testing.role_model import role_model
from sap.testing.scripted_llm import ScriptedLLMServer
from sap.toolsets import load_toolset


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    """Templates and a database holding a small travel cache."""
    return travel_cache(tmp_path_factory.mktemp("cachellm"), seeds=1)


def _is_query(request: dict) -> bool:
    return "step 0:" in request["messages"][1]["content"] and "echo" in request["messages"][0]["content"]


def _misread(answer: str) -> str:
    """The answer with its first echoed value misread (a number off by one, text with a typo)."""
    doc = json.loads(answer)
    args = next(e["arguments"] for e in doc["echo"].values() if e["arguments"])
    name = next(iter(args))
    args[name] = args[name] + 1 if isinstance(args[name], int) else args[name] + "x"
    return json.dumps(doc)


def _synthesize(root, templates, db, server, name: str, n: int) -> tuple[int, str]:
    out = root / f"{name}.jsonl"
    code = main(["cache", "synthesize", "--cache", "travel", "--templates", str(templates), "-n", str(n),
                 "-o", str(out), "--db", f"sqlite:///{db}", "--seed", str(n),
                 "--model", "openai/scripted", "--judge-model", "openai/scripted", "--api-base", server.api_base])
    return code, str(out)


def test_llm_writer_run_validates_counts_usage_and_fixes_a_wrong_echo(collected, capsys):
    root, templates, db = collected
    misread = {"n": 0}

    def responder(request):
        answer = role_model(request)
        if _is_query(request) and len(request["messages"]) == 2 and misread["n"] < 2:
            misread["n"] += 1  # the first two queries come back with a misread echo, then the fix
            return _misread(answer)
        return answer

    with ScriptedLLMServer(responder=responder) as server:
        code, out = _synthesize(root, templates, db, server, "fixed", 4)
        requests = server.requests
    assert code == 0
    records = [json.loads(line) for line in open(out)]
    assert len(records) == 4 and all(r["meta"]["query_writer"] == r["meta"]["judge_agent"] == "llm"
                                     and r["meta"]["judge"]["decision"] == "accept" for r in records)
    for r in records:  # the echo kept is the calls' stated (self_create) arguments, step by step
        calls = [c["function"] for m in r["messages"] if m.get("tool_calls") for c in m["tool_calls"]]
        stated = [{"function": c["name"], "arguments": {p: v for p, v in json.loads(c["arguments"]).items()
                                                         if prov["args"][p]["tag"] == "self_create"}}
                  for c, prov in zip(calls, r["provenance"], strict=True)]
        assert r["meta"]["echo"] == stated
    fed_back = [q for q in requests if len(q["messages"]) == 4]
    assert len(fed_back) == 2 and all("Your answer was invalid: echo step" in q["messages"][3]["content"]
                                      and "sampled" in q["messages"][3]["content"] for q in fed_back)
    capsys.readouterr()
    assert main(["validate", out, "--db", f"sqlite:///{db}"]) == 0
    assert "4 records, 0 failed" in capsys.readouterr().out
    run = RunStore(f"sqlite:///{db}").runs()[-1]
    usage = RunStore(f"sqlite:///{db}").usage(run.id).snapshot()["roles"]
    queries = sum(_is_query(q) for q in requests)
    assert usage["query_writer"]["calls"] == queries and usage["query_writer"]["validation_failures"] == 2
    assert usage["judge"]["calls"] == len(requests) - queries >= 4
    assert usage["query_writer"]["prompt_tokens"] > 0 and usage["judge"]["completion_tokens"] > 0


def test_a_chain_whose_echo_stays_wrong_is_rejected_with_the_reason(collected):
    root, templates, db = collected
    specs = {t.name: t for t in load_toolset("travel").tools}
    first = load_templates(templates, specs)[0].steps[0].function  # slot 0's template starts with it

    def responder(request):
        answer = role_model(request)
        if _is_query(request) and f"step 0: {first}:" in request["messages"][1]["content"]:
            return _misread(answer)
        return answer

    with ScriptedLLMServer(responder=responder) as server:
        code, out = _synthesize(root, templates, db, server, "stubborn", 3)
    assert code == 0 and len(open(out).read().splitlines()) == 3
    store = RunStore(f"sqlite:///{db}")
    rejected = store.rejections(store.runs()[-1].id)
    assert rejected and rejected[0]["index"] == 0
    reason = rejected[0]["reason"]
    assert "query_writer" in reason and "no valid answer after 3 attempts" in reason and "echo step" in reason
