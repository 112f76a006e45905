"""`sap frontier` against a scripted model that solves some seeds, half-solves others and fails the rest: the zones,
which seeds make variants, the variants' validity and topology, and a second invocation continuing the pool."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from sap.cli import main
from sap.curriculum.frontier import pool_id_for
from sap.export.records import record_to_trajectory
from sap.provenance.topology import topology_difference
from sap.store.runs import RunStore
from sap.testing import Reply, ScriptedLLMServer, ToolCalls
from sap.testing.role_model import role_model
from sap.validate import validate_file

MODEL = "openai/scripted"
POLICIES = ("solve", "solve", "half", "half", "fail", "fail")  # by seed position
POOL = {"window": 4, "min_rollouts": 2, "entry_rollouts": 2, "inject_share": 0.5, "cooldown_steps": 100,
        "seed_quota": 2, "stale_steps": 1000}


@pytest.fixture(scope="module")
def seeds() -> list[dict]:
    from sap.api import synthesize

    # seeds whose variant pipeline keeps a variant in one go, so each boundary seed makes one per epoch end
    return list(synthesize("store", len(POLICIES), seed=4, min_turns=2, max_turns=4).records)


class Oracle:
    """A model that knows every task's answers: it replays the record's own assistant messages on the turns its
    policy solves and answers with text on the others. Seeds have a policy each; a variant (read from the pool in
    the database when first seen) has its seed's."""

    def __init__(self, seeds: list[dict], db: str) -> None:
        self.db, self.pool_id = db, pool_id_for(MODEL, seeds)
        self.policy = {r["id"]: p for r, p in zip(seeds, POLICIES)}
        self.by_message = {self._first_user(r["messages"]): r for r in seeds}

    @staticmethod
    def _first_user(messages: list[dict]) -> str:
        return next(m["content"] for m in messages if m["role"] == "user")

    def _policy(self, record: dict) -> str:
        while record["id"] not in self.policy:
            parent = record["meta"]["rods"]["seed_id"]
            record = next(r for r in self.by_message.values() if r["id"] == parent)
        return self.policy[record["id"]]

    def _record(self, first_user: str) -> dict:
        if first_user not in self.by_message:
            _, _, rows = RunStore(self.db).load_pool(self.pool_id)
            self.by_message.update({self._first_user(payload["messages"]): payload for _, payload in rows})
        return self.by_message[first_user]

    def __call__(self, request: dict[str, Any]) -> Reply | ToolCalls:
        messages = request["messages"]
        record = self._record(self._first_user(messages))
        turn = sum(m["role"] == "user" for m in messages) - 1
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
        step = sum(m["role"] == "assistant" for m in messages[last_user:])
        turns: list[list[dict]] = []
        for m in record["messages"]:
            if m["role"] == "user":
                turns.append([])
            elif m["role"] == "assistant":
                turns[-1].append(m)
        policy = self._policy(record)
        solved = {"solve": len(turns), "half": math.ceil(len(turns) / 2), "fail": 0}[policy]
        if turn >= solved:
            return Reply("I cannot do that.")
        reply = turns[turn][step]
        if reply.get("tool_calls"):
            return ToolCalls(tuple((tc["function"]["name"], tc["function"]["arguments"]) for tc in reply["tool_calls"]))
        return Reply(reply["content"] or "Done.")


def _frontier(server: ScriptedLLMServer, data: Path, out: Path, db: str, steps: int, pool_config: Path) -> list[str]:
    return ["frontier", "--assistant-model", MODEL, "--api-base", server.api_base, "--data", str(data), "-o", str(out),
            "--db", db, "--steps", str(steps), "--batch", "6", "-k", "2", "--epoch-steps", "2", "--per-seed", "1",
            "--synthesis-workers", "0", "--concurrency", "4", "--pool-config", str(pool_config), "--json"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, seeds: list[dict]) -> tuple[Path, Path]:
    """The seed file and the pool config file."""
    root = tmp_path_factory.mktemp("inputs")
    data = root / "seeds.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in seeds))
    pool_config = root / "pool.json"
    pool_config.write_text(json.dumps(POOL))
    return data, pool_config


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory, seeds: list[dict], setup) -> Path:
    """The output directory of one uninterrupted 5-step run: variants are made at the step-2 epoch end, injected
    at the step-4 one and measured in step 4."""
    data, pool_config = setup
    root = tmp_path_factory.mktemp("whole")
    db = f"sqlite:///{root / 'whole.db'}"
    with ScriptedLLMServer(responder=Oracle(seeds, db)) as server:
        assert main(_frontier(server, data, root / "out", db, 5, pool_config)) == 0
    return root / "out"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_zones_boundary_seeds_and_isomorphic_valid_variants(seeds: list[dict], whole: Path):
    out = whole
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 5 and summary["run"]["rollouts"] == 5 * 6 * 2
    assert summary["ablations"] == {"reward": "graduated", "signal": "graded", "retire": True, "generation": "dual_repair"}
    ids = [r["id"] for r in seeds]
    policy = dict(zip(ids, POLICIES))
    tasks = {row["id"]: row for row in _rows(out / "tasks.jsonl")}
    zone_of = {"solve": "mastered", "half": "boundary", "fail": "out_of_reach"}
    assert {i: tasks[i]["zone"] for i in ids} == {i: zone_of[policy[i]] for i in ids}
    turns = {r["id"]: sum(m["role"] == "user" for m in r["messages"]) for r in seeds}
    half = {i: math.ceil(turns[i] / 2) / turns[i] for i in ids}  # the share of turns the oracle solves
    assert {i: tasks[i]["mean"] for i in ids} == {i: {"solve": 1.0, "fail": 0.0}.get(policy[i], half[i]) for i in ids}
    assert all(tasks[i]["graduated"] == 1.0 for i in ids if policy[i] == "solve")
    assert summary["boundary_seeds"] == sorted(i for i in ids if policy[i] == "half")
    assert summary["seed_zones"] == {"mastered": 2, "boundary": 2, "out_of_reach": 2, "unrated": 0}

    variants = _rows(out / "variants.jsonl")
    assert variants and summary["variants"]["made"] == len([t for t in tasks.values() if t["origin"] == "variant"])
    assert summary["variants"]["injected"] > 0 and summary["variants"]["retired"] == 0
    by_id = {r["id"]: r for r in seeds + variants}
    for variant in variants:
        parent = variant["meta"]["rods"]["seed_id"]
        assert tasks[parent]["zone"] == "boundary"  # made from a boundary task only
        assert tasks[variant["id"]]["seed"] in summary["boundary_seeds"]
        if not variant["meta"]["rods"]["substitutions"]:
            assert topology_difference(record_to_trajectory(by_id[parent]), record_to_trajectory(variant)) is None
    assert any(not v["meta"]["rods"]["substitutions"] for v in variants)
    assert {row["zone"] for row in tasks.values() if row["origin"] == "variant" and row["rollouts"]} == {"boundary"}
    count, problems = validate_file(out / "variants.jsonl")
    assert (count, problems) == (len(variants), [])


def test_a_second_invocation_continues_the_pool(tmp_path: Path, seeds: list[dict], setup, whole: Path, capsys):
    data, pool_config = setup
    db, out = f"sqlite:///{tmp_path / 'split.db'}", tmp_path / "split"
    with ScriptedLLMServer(responder=Oracle(seeds, db)) as server:
        assert main(_frontier(server, data, out, db, 3, pool_config)) == 0
        first = json.loads(capsys.readouterr().out.splitlines()[-1])
        assert main(_frontier(server, data, out, db, 5, pool_config)) == 0
        printed = capsys.readouterr().out
    assert f"continuing pool {pool_id_for(MODEL, seeds)}" in printed and "step 3/5" in printed
    second = json.loads(printed.splitlines()[-1])
    assert second == json.loads((out / "summary.json").read_text())
    assert (first["steps"], second["steps"]) == (3, 5)
    # the first run ended the step-2 epoch (variants queued), the second the step-4 one (they were injected)
    assert [(r["run"]["epochs_ended"], r["run"]["injected"]) for r in (first, second)] == [(1, 0), (1, 2)]
    # the second run did only the remaining steps, on the same pool: its counts go on from the first run's
    assert second["run"]["rollouts"] + first["run"]["rollouts"] == json.loads(
        (whole / "summary.json").read_text())["run"]["rollouts"]
    # and the stopped-and-continued pool ends exactly where an uninterrupted one does
    assert _rows(out / "tasks.jsonl") == _rows(whole / "tasks.jsonl")
    assert _rows(out / "variants.jsonl") == _rows(whole / "variants.jsonl")
    assert [r["task_id"] for r in _rows(out / "rollouts.jsonl")] == [r["task_id"] for r in _rows(whole / "rollouts.jsonl")]
    # a finished pool is not stepped again
    with ScriptedLLMServer(responder=Oracle(seeds, db)) as server:
        assert main(_frontier(server, data, out, db, 5, pool_config)) == 0
        assert server.requests == []
    # nor continued under other pool rules
    other = tmp_path / "other.toml"
    other.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in {**POOL, "window": 8}.items()))
    with ScriptedLLMServer(responder=Oracle(seeds, db)) as server:
        assert main(_frontier(server, data, out, db, 6, other)) == 2
        assert server.requests == []
    assert "was started with another pool config (differs in window)" in capsys.readouterr().err


def test_agents_options_put_llm_roles_in_the_variant_pipeline_apart_from_the_model(tmp_path: Path, seeds: list[dict],
                                                                                   setup, capsys):
    data, pool_config = setup
    db, out = f"sqlite:///{tmp_path / 'llm.db'}", tmp_path / "llm"
    with ScriptedLLMServer(responder=Oracle(seeds, db)) as server, ScriptedLLMServer(responder=role_model) as roles:
        assert main(_frontier(server, data, out, db, 2, pool_config)
                    + ["--agents-model", "openai/roles", "--agents-api-base", roles.api_base]) == 0
        model_requests, role_requests = server.requests, roles.requests
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert role_requests and all("tools" in r for r in model_requests)  # rollouts and roles each on their own server
    assert summary["run"]["agents_usage"]["calls"] == len(role_requests)
    assert summary["run"]["usage"]["calls"] == len(model_requests)
    variants = _rows(out / "variants.jsonl")
    assert len(variants) == summary["variants"]["made"] == 2  # one per boundary seed at the step-2 epoch end
    assert {role["model"] for v in variants for role in v["meta"]["agents"]["roles"].values()
            if role["agents"] == "llm"} == {"openai/roles"}
    assert validate_file(out / "variants.jsonl") == (2, [])


def test_bad_input_is_named(tmp_path: Path, seeds: list[dict], setup, capsys):
    data, pool_config = setup
    bad_config = tmp_path / "bad.json"
    bad_config.write_text(json.dumps({"window": 0}))
    db = f"sqlite:///{tmp_path / 'b.db'}"
    assert main(["frontier", "--assistant-model", MODEL, "--data", str(data), "-o", str(tmp_path / "o"), "--db", db,
                 "--pool-config", str(bad_config)]) == 2
    assert f"--pool-config {bad_config}: field window:" in capsys.readouterr().err
    twice = tmp_path / "twice.jsonl"
    twice.write_text(2 * (json.dumps(seeds[0]) + "\n"))
    assert main(["frontier", "--assistant-model", MODEL, "--data", str(twice), "-o", str(tmp_path / "o"), "--db", db]) == 2
    assert f"{twice}:2: seed id {seeds[0]['id']!r} repeats line 1" in capsys.readouterr().err
    bfcl = tmp_path / "bfcl.jsonl"
    bfcl.write_text(json.dumps({"id": "multi_turn_base_0", "question": [[{"role": "user", "content": "hi"}]]}) + "\n")
    assert main(["frontier", "--assistant-model", MODEL, "--data", str(bfcl), "-o", str(tmp_path / "o"), "--db", db]) == 2
    assert f"no possible_answer file for {bfcl}" in capsys.readouterr().err  # a BFCL file needs its answers
    assert not (tmp_path / "o").exists() and not (tmp_path / "b.db").exists()  # checked before anything is made


def test_rollouts_ended_by_model_errors_are_not_rewards_and_stop_the_run(tmp_path: Path, setup, capsys):
    data, pool_config = setup
    db, out = f"sqlite:///{tmp_path / 'down.db'}", tmp_path / "down"
    with ScriptedLLMServer([]) as server:  # no script, no responder: every request gets a 400
        assert main(_frontier(server, data, out, db, 4, pool_config)) == 1
    captured = capsys.readouterr()
    assert "every rollout of step 0 ended by a model error" in captured.err
    summary = json.loads(captured.out.splitlines()[-1])
    assert summary["steps"] == 1 and summary["run"]["failed_rollouts"] == summary["run"]["rollouts"] == 12
    tasks = _rows(out / "tasks.jsonl")
    assert {(t["zone"], t["rollouts"]) for t in tasks} == {("unrated", 0)}  # not mistaken for out of reach
    assert [r["failed"] for r in _rows(out / "rollouts.jsonl")] == [2] * 6
