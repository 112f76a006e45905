"""sap.envs on 50 synthesized records of each built-in toolset: gold play scores 1.0 (through ToolEnv, and through the
TRL-facing classes called as GRPOTrainer calls them), wrong values and early stops score less, the HTTP server plays a
task to reward 1.0 for a plain httpx client, and bad input gets errors naming the field and value."""
from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sap import synthesize
from sap.envs import EnvServer, TaskCatalog, ToolEnv, gold_message
from sap.envs.tools import docstring, signature, typed_callable
from sap.envs.trl import SapTrlEnv, env_reward, environment_class, trl_environments, trl_factory
from sap.eval.rollout import run_gold
from sap.jsonutil import write_jsonl
from sap.toolsets import builtin_names

ROOT = Path(__file__).resolve().parents[1]
PER_TOOLSET = 50
MIX = {"base": 0.6, "miss_param": 0.2, "miss_func": 0.2}


@pytest.fixture(scope="module")
def records_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """50 synthesized records of each built-in toolset in one JSONL file."""
    rows = [r for name in builtin_names() for r in synthesize(name, PER_TOOLSET, seed=5, mix=MIX).records]
    path = tmp_path_factory.mktemp("envs") / "records.jsonl"
    write_jsonl(path, rows)
    return path


@pytest.fixture(scope="module")
def catalog(records_file: Path) -> TaskCatalog:
    return TaskCatalog.from_file(records_file)


def with_wrong_value(message: dict[str, Any], wrong: str) -> dict[str, Any]:
    """`message` with its first call's first string argument replaced by `wrong`."""
    first = message["tool_calls"][0]["function"]
    args = json.loads(first["arguments"])
    args[next(k for k, v in args.items() if isinstance(v, str))] = wrong
    first["arguments"] = json.dumps(args)
    return message


def play_gold(env: ToolEnv) -> dict[str, Any]:
    """Play the task's ground truth turn by turn through `step`; the final step's rewards."""
    env.reset()
    step = None
    for t, turn in enumerate(env.task.turns):
        if turn.gold:
            step = env.step(gold_message(env.task, t))
            assert not step.done
        step = env.step({"role": "assistant", "content": "Done."})
    assert step is not None and step.done
    return step.reward


def test_catalog_covers_every_builtin_toolset(catalog: TaskCatalog) -> None:
    toolsets = {row["toolset"] for row in catalog.summary()}
    assert toolsets == set(builtin_names())
    assert len(catalog) == PER_TOOLSET * len(builtin_names())
    assert any(len(t.turns) > 1 for t in catalog)


def test_gold_play_scores_one_on_every_task(catalog: TaskCatalog) -> None:
    for task in catalog:
        reward = play_gold(ToolEnv(task))
        assert (reward["progress"], reward["graduated"]) == (1.0, 1.0), (task.id, task.meta, reward)
        assert reward["turns_correct"] == len(task.turns)


def test_later_user_turns_are_fed_in_order(catalog: TaskCatalog) -> None:
    task = next(t for t in catalog if len(t.turns) > 2)
    env = ToolEnv(task)
    first = env.reset()
    assert [m["role"] for m in first] == ["system", "user"] and first[1]["content"] == task.turns[0].user
    for t in range(1, len(task.turns)):
        step = env.step({"role": "assistant", "content": "ok"})
        assert step.messages == [{"role": "user", "content": task.turns[t].user}]
        assert env.tools() == task.tools_at(t)


def test_one_wrong_value_scores_below_one(catalog: TaskCatalog) -> None:
    tasks = [t for t in catalog if t.turns[0].gold and any(isinstance(v, str) for v in t.turns[0].gold[0].args.values())]
    assert len(tasks) >= 20
    for task in tasks[:20]:
        env = ToolEnv(task)
        env.reset()
        env.step(with_wrong_value(gold_message(task, 0), "zz-not-a-value-zz"))
        env.step({"role": "assistant", "content": "Done."})
        for t in range(1, len(task.turns)):
            if task.turns[t].gold:
                env.step(gold_message(task, t))
            env.step({"role": "assistant", "content": "Done."})
        assert env.done
        assert env.reward["r_atomic"] < 1.0 and env.reward["graduated"] < 1.0, task.id


def test_stopping_after_the_first_call_earns_the_share_of_turns_done(catalog: TaskCatalog) -> None:
    """Turn 0 has one ground-truth call: playing it and stopping completes 1 of T turns."""
    tasks = [t for t in catalog if len(t.turns) > 1 and len(t.turns[0].gold) == 1]
    assert len(tasks) >= 10
    for task in tasks:
        env = ToolEnv(task)
        env.reset()
        env.step(gold_message(task, 0))
        reward = env.finish()
        assert reward["progress"] == pytest.approx(1 / len(task.turns)), task.id
        assert reward["turns_correct"] == 1 and reward["graduated"] < 1.0
        assert env.messages[-1]["role"] == "tool"  # no unseen user message left in the conversation


def test_calls_run_on_the_live_executor(catalog: TaskCatalog) -> None:
    """A tool result is the executor's real answer, and a failed call is reported and counted as failed."""
    task = next(t for t in catalog if t.turns[0].gold)
    env = ToolEnv(task)
    env.reset()
    g = task.turns[0].gold[0]
    ok = env.call(g.name, json.dumps(g.args))
    executor = task.executor_factory()
    executor.reset(task.c0)
    assert json.loads(ok["content"]) == json.loads(json.dumps(run_gold(executor, g).value, default=str))
    bad_json = env.call(g.name, "{not json")
    unknown = env.call("no_such_tool", {})
    assert "not valid JSON" in json.loads(bad_json["content"])["error"]
    assert json.loads(unknown["content"]) == {"error": "unknown tool 'no_such_tool'"}
    assert [c.ok for c in env.calls] == [True, False, False]


def test_hidden_tools_are_refused_at_their_turn(catalog: TaskCatalog) -> None:
    task = next(t for t in catalog for turn in t.turns if turn.hidden)
    t = next(i for i, turn in enumerate(task.turns) if turn.hidden)
    env = ToolEnv(task)
    env.reset()
    for _ in range(t):
        env.step({"role": "assistant", "content": "ok"})
    hidden = sorted(task.turns[t].hidden)[0]
    assert hidden not in {tool["function"]["name"] for tool in env.tools()}
    assert json.loads(env.call(hidden, {})["content"]) == {"error": f"unknown tool {hidden!r}"}


def test_step_cap_cuts_the_turn(catalog: TaskCatalog) -> None:
    task = next(t for t in catalog if len(t.turns) > 1 and t.turns[0].gold)
    env = ToolEnv(task, max_steps=2)
    env.reset()
    probe = gold_message(task, 0)
    probe["tool_calls"] = probe["tool_calls"][:1]
    assert [m["role"] for m in env.step(probe).messages] == ["tool"]
    step = env.step(probe)
    assert [m["role"] for m in step.messages] == ["tool", "user"] and env.turn == 1
    assert env.turns[0].answered is False and env.turns[0].steps == 2


@pytest.mark.parametrize("message, field", [
    ("hello", "message: expected dict"),
    ({"tool_calls": "x"}, "message.tool_calls: expected list"),
    ({"tool_calls": [{"id": "a"}]}, "message.tool_calls[0].function: expected dict"),
    ({"tool_calls": [{"function": {"arguments": "{}"}}]}, "message.tool_calls[0].function.name: expected str"),
])
def test_bad_messages_name_the_field(catalog: TaskCatalog, message: Any, field: str) -> None:
    env = ToolEnv(catalog.tasks[0])
    env.reset()
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        env.step(message)
    assert env.messages[-1]["role"] == "user" and not env.calls  # nothing of the bad message was taken


def test_episode_order_errors(catalog: TaskCatalog) -> None:
    env = ToolEnv(catalog.tasks[0])
    with pytest.raises(ValueError, match="reset the environment"):
        env.step({"content": "hi"})
    play_gold(env)
    with pytest.raises(ValueError, match="the episode is over"):
        env.step({"content": "hi"})
    assert env.reward["graduated"] == 1.0  # still readable
    assert play_gold(env)["graduated"] == 1.0  # a reset plays again from c0


def test_catalog_lookup_errors(records_file: Path, tmp_path: Path) -> None:
    catalog = TaskCatalog.from_file(records_file)
    first = catalog.tasks[0]
    assert catalog.get(index=3) is catalog.tasks[3]
    with pytest.raises(ValueError, match="index: 100000 is not a task position"):
        catalog.get(index=100000)
    with pytest.raises(KeyError, match="no task 'nope'"):
        catalog.get("nope")
    with pytest.raises(ValueError, match="exactly one"):
        catalog.get()
    doubled = TaskCatalog([first, first], "two")
    with pytest.raises(ValueError, match=r"names the tasks at positions \[0, 1\] of two; reset by index"):
        doubled.get(first.id)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty.jsonl: no records"):
        TaskCatalog.from_file(empty)


def test_catalog_from_a_stored_run(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'run.db'}"
    run = synthesize("store", 4, seed=2, db=db)
    catalog = TaskCatalog.from_run(db, run.run_id)
    assert [t.id for t in catalog] == [r["id"] for r in run.records]
    assert all(play_gold(ToolEnv(t))["graduated"] == 1.0 for t in catalog)
    with pytest.raises(Exception, match="no run 'run-nope'"):
        TaskCatalog.from_run(db, "run-nope")


def test_tool_signatures_follow_the_specs() -> None:
    tool = {"type": "function", "function": {"name": "book", "description": "Book a  room.", "parameters": {
        "type": "object", "required": ["hotel_id", "nights"],
        "properties": {"breakfast": {"type": "boolean", "description": "with breakfast"},
                       "hotel_id": {"type": "string", "description": "the hotel", "enum": ["h1", "h2"]},
                       "nights": {"type": "integer"}}}}}
    sig = signature(tool)
    assert list(sig.parameters) == ["hotel_id", "nights", "breakfast"]
    assert sig.parameters["nights"].annotation is int and sig.parameters["nights"].default is inspect.Parameter.empty
    assert sig.parameters["breakfast"].annotation == bool | None and sig.parameters["breakfast"].default is None
    assert docstring(tool).splitlines()[:5] == ["Book a room.", "", "Args:", "    breakfast: with breakfast",
                                                "    hotel_id: the hotel (one of h1, h2)"]
    seen = []
    fn = typed_callable(tool, lambda name, kwargs: seen.append((name, kwargs)) or "ok")
    assert fn(hotel_id="h1", nights=2) == "ok" and seen == [("book", {"hotel_id": "h1", "nights": 2})]
    bad = {"type": "function", "function": {"name": "f", "parameters": {"properties": {"from": {"type": "string"}}}}}
    with pytest.raises(ValueError, match="parameter of tool 'f': 'from' is not a Python identifier"):
        signature(bad)


# --- the TRL-facing environments, driven as GRPOTrainer drives them (no TRL needed) ---


def environments(catalog: TaskCatalog, reward: str = "graduated") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    factory, rows = trl_environments(catalog, reward)
    return (factory if isinstance(factory, dict) else {None: factory}), rows


def assert_groups(factories: dict[str, Any]) -> None:
    """One class per toolset for its full tool set, and one per MissFunc tool set (a tool left out), named after it."""
    assert set(builtin_names()) <= set(factories)
    assert all(re.fullmatch(rf"({'|'.join(builtin_names())})(_\d+)?", name) for name in factories), sorted(factories)


def play(env: SapTrlEnv, row: dict[str, Any], first_calls: int | None = None, wrong: str | None = None) -> None:
    """Reset `env` on `row` and call the gold tools as TRL does (method(**arguments)), then finish_turn per turn;
    `first_calls` makes only that many calls of the first turn and stops there (the rollout ends without
    finish_turn); `wrong` changes a value of the first call."""
    env.reset(**{k: v for k, v in row.items() if k != "environment"})
    task = env._episode().task
    for t in range(len(task.turns)):
        message = gold_message(task, t)
        if wrong and t == 0:
            message = with_wrong_value(message, wrong)
        for call in message["tool_calls"][:first_calls]:
            getattr(env, call["function"]["name"])(**json.loads(call["function"]["arguments"]))
        if first_calls is not None:
            return
        env.finish_turn("Done.")


def test_rows_and_classes_cover_every_toolset(catalog: TaskCatalog) -> None:
    factories, rows = environments(catalog)
    assert_groups(factories)
    assert len(rows) == PER_TOOLSET * len(builtin_names())
    row = next(r for r in rows[7:] if catalog.get(index=r["task_index"]).meta["kind"] != "miss_func")
    task = catalog.get(index=row["task_index"])
    assert row["prompt"] == [{"role": "system", "content": task.system},
                             {"role": "user", "content": task.turns[0].user}]
    assert row["task_id"] == task.id and row["environment"] == task.meta["toolset"]
    env = factories[row["environment"]]()
    public = sorted(n for n in dir(type(env)) if callable(getattr(env, n)) and not n.startswith("_"))
    assert public == sorted([t["function"]["name"] for t in task.tools] + ["finish_turn", "get_reward", "reset"])


def test_scripted_gold_policy_scores_one(catalog: TaskCatalog) -> None:
    for reward in ("graduated", "progress"):
        factories, rows = environments(catalog, reward)
        for row in rows:
            env = factories[row["environment"]]()
            play(env, row)
            assert env.get_reward() == 1.0, (row["task_id"], env.env.reward)


def test_trl_export_rows_alone_drive_the_environments(records_file: Path, tmp_path: Path) -> None:
    """`sap export --format trl`: loaded with datasets, the rows alone (no catalog) build the environment classes and
    reset them; gold play scores 1.0 on every row, a wrong value less, and the columns are the reset arguments."""
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "trl"
    done = subprocess.run([sys.executable, "-m", "sap.cli", "export", str(records_file), "--format", "trl",
                           "-o", str(out), "--split", "train=0.9,test=0.1"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    ds = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "cache"))
    assert set(ds) == {"train", "test"} and sum(len(ds[s]) for s in ds) == PER_TOOLSET * len(builtin_names())
    train = ds["train"]
    assert set(train.column_names) == {"prompt", "task_id", "task", "environment"}
    factory = trl_factory(train)
    factories = factory if isinstance(factory, dict) else {train[0]["environment"]: factory}
    assert_groups(factories)
    records = {json.loads(line)["id"]: json.loads(line) for line in records_file.read_text().splitlines()}
    for row in train:
        assert json.loads(row["task"]) == records[row["task_id"]]
        assert row["prompt"][1]["content"] == records[row["task_id"]]["messages"][1]["content"]
        env = factories[row["environment"]]()
        play(env, row)
        assert env.get_reward() == 1.0, row["task_id"]
    missfunc = [r for r in train if json.loads(r["task"])["meta"]["kind"] == "miss_func"]
    assert missfunc
    for row in missfunc:  # played up to the hidden tool's return, which is no method of its environment
        record = json.loads(row["task"])
        ((turn, (tool,)),) = record["meta"]["missed_function"].items()
        env = factories[row["environment"]]()
        env.reset(task=row["task"])
        assert not hasattr(env, tool) and len(env._episode().task.turns) == int(turn) + 1
    row = next(r for r in train if (calls := json.loads(r["task"])["messages"][2].get("tool_calls"))
               and any(isinstance(v, str) for v in json.loads(calls[0]["function"]["arguments"]).values()))
    env = factories[row["environment"]]()
    play(env, row, wrong="zz-not-a-value-zz")
    assert env.get_reward() < 1.0
    with pytest.raises(ValueError, match="no `task` column"):
        env.reset(prompt=row["prompt"])
    with pytest.raises(ValueError, match="task: not a sap record as JSON text"):
        env.reset(task="{not json")


def test_wrong_value_and_early_stop_score_below_one(catalog: TaskCatalog) -> None:
    factories, rows = environments(catalog)
    wrong = [r for r in rows if (t := catalog.get(index=r["task_index"])).turns[0].gold
             and any(isinstance(v, str) for v in t.turns[0].gold[0].args.values())]
    for row in wrong[:30]:
        env = factories[row["environment"]]()
        play(env, row, wrong="zz-not-a-value-zz")
        assert env.get_reward() < 1.0, row["task_id"]
    factories, rows = environments(catalog, "progress")
    stops = [r for r in rows if len((t := catalog.get(index=r["task_index"])).turns) > 1 and len(t.turns[0].gold) == 1]
    assert len(stops) >= 10
    for row in stops:
        env = factories[row["environment"]]()
        play(env, row, first_calls=1)  # the first call, then the rollout ends (no finish_turn)
        assert env.get_reward() == pytest.approx(1 / len(env._episode().task.turns)), row["task_id"]


def test_tool_errors_reach_the_model_as_results(catalog: TaskCatalog) -> None:
    factories, rows = environments(catalog)
    row = rows[0]
    env = factories[row["environment"]]()
    env.reset(**{k: v for k, v in row.items() if k != "environment"})
    name = catalog.get(index=0).tools[0]["function"]["name"]
    out = json.loads(getattr(env, name)(no_such_argument=1))
    assert "error" in out
    assert env.get_reward() < 1.0
    with pytest.raises(ValueError, match="the episode is over"):
        getattr(env, name)()  # TRL turns this into an {"error": ...} tool result


def test_reserved_and_bad_names_are_refused(catalog: TaskCatalog) -> None:
    tool = {"type": "function", "function": {"name": "reset", "parameters": {"properties": {}}}}
    with pytest.raises(ValueError, match="tool 'reset' has the name of an environment method"):
        environment_class("x", [tool], catalog, "graduated")
    with pytest.raises(ValueError, match="reward: 'loss' is not one of"):
        trl_environments(catalog, "loss")
    with pytest.raises(ValueError, match="reward: 'loss' is not one of"):
        env_reward("loss")


# --- the HTTP server, driven by a plain httpx client ---


@pytest.fixture()
def server(catalog: TaskCatalog) -> Iterator[EnvServer]:
    srv = EnvServer(catalog, max_sessions=3)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_http_client_plays_a_task_to_reward_one(server: EnvServer, catalog: TaskCatalog) -> None:
    with httpx.Client(base_url=server.url) as http:
        tasks = http.get("/tasks").json()["tasks"]
        assert len(tasks) == len(catalog)
        row = next(r for r in tasks if r["turns"] > 1)
        task = catalog.get(index=row["index"])
        opened = http.post("/reset", json={"index": row["index"]}).json()
        assert opened["messages"][-1] == {"role": "user", "content": task.turns[0].user}
        assert [t["function"]["name"] for t in opened["tools"]] == \
            [t["function"]["name"] for t in task.tools_at(0)]
        session, answer = opened["session"], None
        for t, turn in enumerate(task.turns):
            if turn.gold:
                answer = http.post("/step", json={"session": session, "message": gold_message(task, t)}).json()
                assert [m["role"] for m in answer["messages"]] == ["tool"] * len(turn.gold)
                assert not any("error" in json.loads(m["content"]) for m in answer["messages"]
                               if isinstance(json.loads(m["content"]), dict))
            answer = http.post("/step", json={"session": session, "message": {"role": "assistant",
                                                                                "content": "Done."}}).json()
        assert answer["done"] and answer["reward"]["graduated"] == 1.0 and answer["reward"]["progress"] == 1.0
        gone = http.post("/step", json={"session": session, "message": {"content": "again"}})
        assert gone.status_code == 404 and "no open session" in gone.json()["error"]


def test_http_errors_name_field_and_value(server: EnvServer) -> None:
    with httpx.Client(base_url=server.url) as http:
        cases = [
            (http.post("/reset", content=b"{oops"), 400, "body: not JSON"),
            (http.post("/reset", json=[1]), 400, "body: expected a JSON object, got list"),
            (http.post("/reset", json={"task_id": "nope"}), 404, "task_id: no task 'nope'"),
            (http.post("/reset", json={"index": -1}), 400, "index: -1 is not a task position"),
            (http.post("/reset", json={"index": 0, "max_steps": 0}), 400, "max_steps: 0 is not a positive integer"),
            (http.post("/step", json={"message": {}}), 400, "session: expected the id /reset returned, got None"),
            (http.post("/step", json={"session": "x", "message": {}}), 404, "session: no open session 'x'"),
            (http.post("/nowhere", json={}), 404, "path: no POST /nowhere"),
            (http.get("/reset"), 404, "path: no GET /reset"),
        ]
        for response, status, text in cases:
            assert response.status_code == status and text in response.json()["error"], (response.json(), text)
        session = http.post("/reset", json={"index": 0}).json()["session"]
        assert "message: missing" in http.post("/step", json={"session": session}).json()["error"]
        bad = http.post("/step", json={"session": session, "message": {"tool_calls": [{"function": {}}]}})
        assert bad.status_code == 400 and "message.tool_calls[0].function.name" in bad.json()["error"]
        # the session survives bad input: a good step still works
        assert http.post("/step", json={"session": session, "message": {"content": "hi"}}).status_code == 200
        opened = [session] + [http.post("/reset", json={"index": 0}).json()["session"] for _ in range(2)]
        full = http.post("/reset", json={"index": 0})
        assert full.status_code == 503 and "3 sessions are open" in full.json()["error"]
        assert http.post("/close", json={"session": opened[0]}).json() == {"closed": True}
        assert http.post("/reset", json={"index": 0}).status_code == 200


def test_serve_env_cli(records_file: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "sap.cli", "serve-env", "--data", str(records_file), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = proc.stdout.readline()
        assert line.startswith(f"serving {PER_TOOLSET * len(builtin_names())} tasks"), line + proc.stderr.read()
        url = line.split(" at ")[1].split()[0]
        assert len(httpx.get(f"{url}/tasks").json()["tasks"]) == PER_TOOLSET * len(builtin_names())
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    missing = subprocess.run([sys.executable, "-m", "sap.cli", "serve-env", "--data", str(tmp_path / "no.jsonl")],
                             capture_output=True, text=True, cwd=ROOT)
    assert missing.returncode == 2 and "no.jsonl" in missing.stderr
