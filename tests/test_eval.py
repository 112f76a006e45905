"""The rollout harness against the scripted OpenAI-compatible server: known replies give known rewards and errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sap.cli import main
from sap.eval import evaluate, load_tasks, task_rewards
from sap.export.records import to_record
from sap.llm import ModelConfig
from sap.model import ArgProvenance, Tag, ToolCall, Trajectory, Turn
from helpers import replay_script
from sap.testing import Reply, ScriptedLLMServer, ToolCalls
from sap.toolsets import load_toolset

DOMAIN = str(Path(__file__).with_name("bank_domain.py"))
ROOT = Path(__file__).resolve().parents[1]


def _call(cid: str, name: str, args: dict, prov: dict[str, ArgProvenance]) -> ToolCall:
    return ToolCall(call_id=cid, name=name, args_exec=args, args_prov=prov)


def bank_record() -> dict:
    """Two turns: find Ada and list her accounts (customer_id from the first result); then move 30 from her
    first account (from_account from the listing) to b9 (to_account and amount from the request)."""
    toolset = load_toolset(DOMAIN)
    c0 = toolset.sample_config(0)
    turns = [
        Turn(index=0, state="found", transition=0, user_message="Find Ada Lovelace's accounts.",
             assistant_message="Ada has accounts a1 and a2.", calls=[
                 _call("t0c0", "find_customer", {"name": "Ada Lovelace"}, {"name": ArgProvenance(tag=Tag.self_create)}),
                 _call("t0c1", "list_accounts", {"customer_id": "c1"}, {"customer_id": ArgProvenance(
                     tag=Tag.prev_output, turn=0, call=0, path="$.customer_id")})]),
        Turn(index=1, state="done", transition=1, user_message="Move 30 from her first account to account b9.",
             assistant_message="Done.", calls=[
                 _call("t1c0", "transfer", {"from_account": "a1", "to_account": "b9", "amount": 30}, {
                     "from_account": ArgProvenance(tag=Tag.prev_output, turn=0, call=1, path="$.accounts[0].account_id"),
                     "to_account": ArgProvenance(tag=Tag.self_create), "amount": ArgProvenance(tag=Tag.self_create)})]),
    ]
    executor = toolset.executor_factory()
    executor.reset(c0)
    for turn in turns:
        for call in turn.calls:
            call.result = executor.execute(call).value
    traj = Trajectory(id="bank-1", toolset="bank", seed=0, c0=c0, turns=turns)
    return to_record(traj, toolset, {})  # meta.toolset "bank": the module's path comes from the caller


FIND = ToolCalls((("find_customer", {"name": "Ada Lovelace"}),))
LIST = ToolCalls((("list_accounts", {"customer_id": "c1"}),))
TRANSFER = ToolCalls((("transfer", {"from_account": "a1", "to_account": "b9", "amount": 30}),))
SCRIPT = [
    # sample 0: perfect
    FIND, LIST, Reply("Ada has a1 and a2."), TRANSFER, Reply("Done."),
    # sample 1: a wrong function in turn 0 (account_details instead of list_accounts)
    FIND, ToolCalls((("account_details", {"account_id": "a1"}),)), Reply("Ada has a1."), TRANSFER, Reply("Done."),
    # sample 2: a wrong dependency-propagated argument in turn 1 (from a2, not the first account a1)
    FIND, LIST, Reply("Ada has a1 and a2."),
    ToolCalls((("transfer", {"from_account": "a2", "to_account": "b9", "amount": 30}),)), Reply("Done."),
    # sample 3: a wrong query-derived amount fails, and the model gives up
    FIND, LIST, Reply("Ada has a1 and a2."),
    ToolCalls((("transfer", {"from_account": "a1", "to_account": "b9", "amount": 500}),)),
    Reply("Sorry, the transfer failed."),
]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "bank.jsonl"
    path.write_text(json.dumps(bank_record()) + "\n")
    return path


def config(server: ScriptedLLMServer) -> ModelConfig:
    return ModelConfig(model="openai/scripted", api_base=server.api_base, timeout=5, max_retries=0)


def test_known_rollouts_give_known_rewards_and_error_counts(data: Path):
    (task,) = load_tasks(data, toolset=DOMAIN)
    with ScriptedLLMServer(SCRIPT) as server:
        result = evaluate([task], config(server), k=4)
        requests = server.requests
    perfect, wrong_function, wrong_dependent, stopped = result.scores
    assert [s.sample for s in result.scores] == [0, 1, 2, 3]

    assert (perfect.reward.score, perfect.progress, perfect.turns_correct, perfect.gold_calls_matched) == (1, 1, 2, 3)
    assert sum(perfect.errors.values()) == 0

    # turn 0: find ok, account_details is a wrong function (2 exact calls over 3 slots); orch: only find is done,
    # since transfer's from_account comes from list_accounts, which never ran: k=1 of N=3 with e=1
    assert wrong_function.reward.atomic.score == pytest.approx(2 / 3)
    assert wrong_function.reward.orch.score == pytest.approx(1 / 4)
    assert wrong_function.reward.score == pytest.approx((2 / 3 + 1 / 4) / 2)
    assert wrong_function.progress == 1.0  # both turns end in the right state: the wrong call only read
    assert (wrong_function.turns_correct, wrong_function.gold_calls_matched) == (1, 2)
    assert {k: v for k, v in wrong_function.errors.items() if v} == {"wrong_function": 1, "missing_calls": 1}

    # transfer from a2: 2 of 3 arguments right (level 0.1 + 0.1 + 2/3 * 0.8), its edge carries the wrong value,
    # the state after turn 1 is wrong
    assert wrong_dependent.reward.atomic.score == pytest.approx((1 + 1 + 0.2 + 2 / 3 * 0.8) / 3)
    assert wrong_dependent.reward.orch.score == pytest.approx(2 / 3)
    assert wrong_dependent.progress == 0.5
    assert wrong_dependent.reward.atomic.group_hits == {"query": (3, 3), "dependent": (1, 2), "other": (0, 0)}
    assert {k: v for k, v in wrong_dependent.errors.items() if v} == {
        "wrong_parameters": 1, "dependent_param_errors": 1, "missing_calls": 1}

    # amount 500 fails on the executor (level 0.1 + 0.1 + 2/3 * 0.6, and no step done); the model answers
    assert stopped.reward.atomic.score == pytest.approx((1 + 1 + 0.2 + 2 / 3 * 0.6) / 3)
    assert stopped.reward.orch.score == pytest.approx(2 / 3)
    assert stopped.progress == 0.5
    assert stopped.reward.atomic.group_hits == {"query": (2, 3), "dependent": (2, 2), "other": (0, 0)}
    assert {k: v for k, v in stopped.errors.items() if v} == {
        "wrong_parameters": 1, "query_param_errors": 1, "missing_calls": 1, "stopped_after_error": 1}

    s = result.summary
    assert (s["tasks"], s["samples"], s["rollouts"], s["failed_rollouts"]) == (1, 4, 4, 0)
    assert s["turn_accuracy"] == 5 / 8 and s["call_accuracy"] == 9 / 12
    assert s["progress"] == pytest.approx(0.75)
    assert s["errors"] == {"wrong_function": 1, "wrong_parameters": 2, "query_param_errors": 1,
                           "dependent_param_errors": 1, "other_param_errors": 0, "missing_calls": 3,
                           "stopped_after_error": 1, "step_cap": 0}
    assert s["usage"]["calls"] == len(SCRIPT) == len(requests)
    assert task_rewards(result.scores) == [{"task_id": "bank-1", "rewards": [1.0, 1.0, 0.5, 0.5], "mean": 0.75,
                                            "graduated": [s.reward.score for s in result.scores]}]

    # what the model saw: the system prompt, the user turn, the tools; then each result fed back
    first, second = requests[0], requests[1]
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["messages"][1]["content"] == "Find Ada Lovelace's accounts."
    assert {t["function"]["name"] for t in first["tools"]} == {"find_customer", "list_accounts", "account_details",
                                                               "transfer"}
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "find_customer"
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_1_0", "name": "find_customer",
                                      "content": '{"customer_id": "c1"}'}
    failed = requests[len(SCRIPT) - 1]["messages"][-1]
    assert json.loads(failed["content"]) == {"error": "insufficient funds in a1"}


def test_bad_tool_calls_get_errors_and_a_turn_is_cut_at_the_step_cap(data: Path):
    (task,) = load_tasks(data, toolset=DOMAIN)
    script = [ToolCalls((("find_customer", "{not json"),)), ToolCalls((("drop_tables", {}),)), FIND,
              TRANSFER, Reply("Done.")]
    with ScriptedLLMServer(script) as server:
        result = evaluate([task], config(server), k=1, max_steps=3)
    (rollout,), (score,) = result.rollouts, result.scores
    assert [(c.name, c.ok) for c in rollout.turns[0].calls] == [
        ("find_customer", False), ("drop_tables", False), ("find_customer", True)]
    assert rollout.turns[0].calls[0].error.startswith("arguments are not valid JSON")
    assert rollout.turns[0].calls[1].error == "unknown tool 'drop_tables'"
    assert (rollout.turns[0].answered, rollout.turns[0].steps) == (False, 3)
    assert score.reward.atomic.score == pytest.approx((0 + 0 + 1 + 1) / 4)
    # turn 0: the valid find_customer is matched, the two failed attempts are extra; transfer's source never ran
    assert score.reward.orch.score == pytest.approx(1 / 5)
    assert score.progress == pytest.approx((1 / 3 + 1) / 2)  # turn 0: right (read-only) state, 1 of 3 calls ok
    assert {k: v for k, v in score.errors.items() if v} == {
        "wrong_function": 1, "wrong_parameters": 1, "query_param_errors": 1, "missing_calls": 1, "step_cap": 1}


def test_a_model_failure_ends_the_rollout_and_the_rest_counts_as_undone(data: Path):
    (task,) = load_tasks(data, toolset=DOMAIN)
    with ScriptedLLMServer([FIND]) as server:  # then the exhausted script answers 400
        result = evaluate([task], config(server), k=1)
    (rollout,), (score,) = result.rollouts, result.scores
    assert "rejected" in rollout.error and "exhausted" in rollout.error
    assert [(len(t.calls), t.state_correct, t.answered) for t in rollout.turns] == [(1, True, False), (0, False, False)]
    assert score.progress == 0.5 and score.errors["step_cap"] == 0 and score.errors["missing_calls"] == 2
    assert result.summary["failed_rollouts"] == 1 and result.summary["first_failure"] == rollout.error


def test_a_missing_key_stops_the_run_with_a_usage_error(data: Path, capsys, monkeypatch):
    monkeypatch.delenv("SAP_TEST_NO_SUCH_KEY", raising=False)
    with ScriptedLLMServer([]) as server:
        code = main(["eval", "--assistant-model", "openai/scripted", "--api-base", server.api_base, "--data", str(data),
                     "--toolset", DOMAIN, "--api-key-env", "SAP_TEST_NO_SUCH_KEY", "-k", "3"])
        assert server.requests == []
    assert code == 2
    assert "environment variable SAP_TEST_NO_SUCH_KEY is not set" in capsys.readouterr().err


def test_sap_eval_cli_exits_1_naming_the_error_when_no_rollout_gets_through(data: Path, capsys):
    with ScriptedLLMServer([]) as server:
        code = main(["eval", "--assistant-model", "openai/scripted", "--api-base", server.api_base, "--data", str(data),
                     "--toolset", DOMAIN])
    out = capsys.readouterr().out
    assert code == 1
    assert "1 tasks x 1 samples = 1 rollouts of openai/scripted (1 ended by model errors)" in out
    assert "first model error: LLM role 'assistant' (openai/scripted) failed, rejected" in out


def test_sap_eval_cli_writes_per_task_rewards(data: Path, tmp_path: Path):
    out = tmp_path / "rewards.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with ScriptedLLMServer(SCRIPT) as server:
        proc = subprocess.run([sys.executable, "-m", "sap.cli", "eval", "--assistant-model", "openai/scripted", "--api-base",
                               server.api_base, "--data", str(data), "--toolset", DOMAIN, "-k", "4", "--concurrency",
                               "1", "-o", str(out), "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["turn_accuracy"] == 5 / 8 and summary["errors"]["stopped_after_error"] == 1
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["task_id"], r["rewards"], r["mean"]) for r in rows] == [("bank-1", [1.0, 1.0, 0.5, 0.5], 0.75)]


def _broken_record() -> dict:
    record = bank_record()
    record["provenance"] = record["provenance"][1:]
    return record


@pytest.mark.parametrize("record, toolset, message", [
    ({"messages": [{"role": "user", "content": "hi"}]}, [], "{path}: OpenAI-messages records carry no executable"),
    ({**bank_record(), "meta": {}}, [], "{path}:1: record has no meta.toolset; pass --toolset"),
    (bank_record(), [], ("{path}:1: meta.toolset 'bank' is not a built-in toolset; for the data of a domain "
                         "module, pass the module's path: --toolset PATH")),
    (_broken_record(), ["--toolset", DOMAIN], "{path}:1: not a usable sap record: KeyError: 't0c0'"),
    ({"hello": 1}, [], "{path}:1: unknown record format"),
])
def test_sap_eval_cli_names_bad_input(tmp_path: Path, record: dict, toolset: list[str], message: str, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(record) + "\n")
    assert main(["eval", "--assistant-model", "openai/x", "--data", str(bad), *toolset]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sap eval: error: " + message.format(path=bad)), err


def _bfcl_files(tmp_path: Path, question: dict, ground_truth: list) -> Path:
    """A BFCL question file of one record, with its possible_answer file beside it."""
    (tmp_path / "possible_answer").mkdir()
    data = tmp_path / f"BFCL_v4_{question['id'].rsplit('_', 1)[0]}.json"  # named after the id's category
    data.write_text(json.dumps(question) + "\n")
    answer = {"id": question["id"], "ground_truth": ground_truth}
    (tmp_path / "possible_answer" / data.name).write_text(json.dumps(answer) + "\n")
    return data


def test_bfcl_question_file_runs_on_bfcl_backends(tmp_path: Path):
    pytest.importorskip("bfcl_eval")
    config_fs = {"GorillaFileSystem": {"root": {"alex": {"type": "directory", "contents": {
        "document": {"type": "directory", "contents": {
            "final_report.pdf": {"type": "file", "content": "b line\na line"}}}}}}}}
    question = {"id": "multi_turn_miss_func_0", "initial_config": config_fs, "involved_classes": ["GorillaFileSystem"],
                "missed_function": {"1": ["sort"]}, "question": [
                    [{"role": "user", "content": "Go into the document folder and create a directory temp."}],
                    [{"role": "user", "content": "Sort final_report.pdf for me."}]]}
    data = _bfcl_files(tmp_path, question, [["cd(folder='document')", "mkdir(dir_name='temp')"],
                                            ["sort('final_report.pdf')"]])

    (task,) = load_tasks(data)
    assert task.turns[1].gold[0].args == {"file_name": "final_report.pdf"}  # positional, named after the method
    assert task.turns[0].gold[0].tags == {"folder": "self_create"}
    script = [ToolCalls((("cd", {"folder": "document"}),)), ToolCalls((("mkdir", {"dir_name": "temp"}),)),
              Reply("Created."), ToolCalls((("sort", {"file_name": "final_report.pdf"}),)), Reply("Sorted.")]
    with ScriptedLLMServer(script) as server:
        result = evaluate([task], config(server), k=1)
        requests = server.requests
    (score,) = result.scores
    assert (score.reward.score, score.progress, score.turns_correct) == (1.0, 1.0, 2)
    offered = [{t["function"]["name"] for t in r["tools"]} for r in requests]
    assert "sort" not in offered[0] and "sort" in offered[3] and "mkdir" in offered[0]


def test_bfcl_record_with_an_unknown_class_is_named_with_its_file(tmp_path: Path, capsys):
    pytest.importorskip("bfcl_eval")
    data = _bfcl_files(tmp_path, {"id": "multi_turn_base_7", "initial_config": {}, "involved_classes": [
        "GorillaFileSystem", "WeatherAPI"], "question": [[{"role": "user", "content": "hi"}]]}, [["ls()"]])
    assert main(["eval", "--assistant-model", "openai/x", "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"sap eval: error: {data}: BFCL record multi_turn_base_7: involved_classes "
                          f"['GorillaFileSystem', 'WeatherAPI']: bad BFCL toolset 'bfcl/GorillaFileSystem+WeatherAPI': "
                          f"unknown class 'WeatherAPI'"), err


def test_every_bfcl_v4_multi_turn_ground_truth_call_replays_on_its_tasks_executor():
    """Every call replays except BFCL's own soft failures. Before the eval loader ran on BfclExecutor, 36 of these calls failed: mpmath numbers from `logarithm`
    and the Ellipsis closing the long-context watchlist were not JSON."""
    pytest.importorskip("bfcl_eval")
    from sap.eval.rollout import replay_gold
    from sap.toolsets.bfcl import data_dir

    failed, logarithms, watchlists, calls = [], [], [], 0
    for category in ("base", "miss_func", "miss_param", "long_context"):
        for task in load_tasks(data_dir() / f"BFCL_v4_multi_turn_{category}.json"):
            assert task.meta["toolset"].endswith(":long_context") == (category == "long_context")
            gold = [g for turn in task.turns for g in turn.gold]
            for g, result in zip(gold, replay_gold(task), strict=True):
                calls += 1
                if not result.ok:
                    failed.append((task.id, g.name, result.error))
                if g.name == "logarithm":
                    logarithms.append(result.value["result"])
                if g.name == "get_watchlist" and category == "long_context":
                    watchlists.append(result.value)
    # BFCL's own ground truth holds soft failures (a non-US passport to verify, an authentication that fails), which
    # fail as declared (BFCL_FAILURE_SHAPES); no call fails otherwise
    from sap.executors.bfcl import BFCL_FAILURE_SHAPES
    soft = tuple(f"{shape.field} is False" for shape in BFCL_FAILURE_SHAPES)
    assert [f for f in failed if not any(s in f[2] for s in soft)] == [] and calls > 4000
    assert 0 < len(failed) < 40
    assert len(logarithms) >= 16 and all(isinstance(v, float) for v in logarithms)
    assert len(watchlists) >= 20 and all(isinstance(w, list) and len(w) > 100 and "..." not in w for w in watchlists)


def test_replaying_synthesized_records_scores_one_on_everything(tmp_path: Path):
    from sap.api import synthesize

    records = synthesize("store", 2, seed=3, mix={"base": 0.5, "miss_param": 0.5}).records
    path = tmp_path / "store.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    tasks = load_tasks(path)
    with ScriptedLLMServer(replay_script(records)) as server:
        summary = evaluate(tasks, config(server)).summary
    assert (summary["turn_accuracy"], summary["call_accuracy"], summary["reward"], summary["progress"]) == (1, 1, 1, 1)
    assert sum(summary["errors"].values()) == 0
    assert summary["arg_accuracy"]["dependent"] == 1.0


def test_each_task_is_handed_over_when_its_samples_are_done_even_if_the_run_then_fails(data: Path):
    import dataclasses

    (task,) = load_tasks(data, toolset=DOMAIN)

    def broken_executor():
        raise RuntimeError("executor backend is down")

    broken = dataclasses.replace(task, id="bank-2", executor_factory=broken_executor)
    rows: list[dict] = []
    with ScriptedLLMServer(SCRIPT[:10]) as server:  # samples 0 and 1 of the first task
        with pytest.raises(RuntimeError, match="executor backend is down"):
            evaluate([task, broken], config(server), k=2, on_task=rows.append)
    assert rows == [{"task_id": "bank-1", "rewards": [1.0, 1.0], "mean": 1.0,
                     "graduated": [1.0, pytest.approx((2 / 3 + 1 / 4) / 2)]}]


def test_verl_ground_truth_from_an_eval_task_scores_the_records_own_calls_as_one(data: Path):
    from sap.rewards.verl import compute_score, ground_truth_json

    (task,) = load_tasks(data, toolset=DOMAIN)
    ground_truth = ground_truth_json([turn.gold for turn in task.turns])
    record = json.loads(data.read_text())
    solution = "\n".join(f"<tool_call>{json.dumps({'name': tc['function']['name'], 'arguments': tc['function']['arguments']})}"
                         f"</tool_call>" for m in record["messages"] for tc in m.get("tool_calls") or [])
    assert compute_score("sap", solution, ground_truth) == {"score": 1.0, "graduated": 1.0, "r_atomic": 1.0,
                                                                "r_orch": 1.0}
    assert json.loads(ground_truth)["turns"][1][0]["tags"] == {
        "from_account": "prev_output", "to_account": "self_create", "amount": "self_create"}


@pytest.mark.parametrize("reward, part", [("r_atomic", "r_atomic"), ("r_orch", "r_orch")])
def test_sap_eval_scores_by_one_reward_alone_when_asked(data: Path, capsys, reward: str, part: str):
    with ScriptedLLMServer(SCRIPT) as server:
        code = main(["eval", "--assistant-model", "openai/scripted", "--api-base", server.api_base, "--data", str(data),
                     "--toolset", DOMAIN, "-k", "4", "--concurrency", "1", "--reward", reward, "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["r_atomic"] != summary["r_orch"]
    assert summary["reward"] == pytest.approx(summary[part])
    assert main(["eval", "--assistant-model", "openai/scripted", "--data", str(data), "--toolset", DOMAIN,
                 "--reward", reward, "--w-atomic", "0.3"]) == 2
    assert f"--reward {reward} fixes the weights" in capsys.readouterr().err
