"""The verl adapter (sap.envs.verl) against verl's own installed classes: the config files written for each built-in
toolset load through verl's tool and interaction registries, and rows of `sap export --format verl`, read back from
the parquet, are played as verl's ToolAgentLoop plays them (start_interaction with the row's interaction_kwargs;
per call create, execute with the trajectory's agent_data, release; generate_response when the model ends its turn).
Gold play scores progress and graduated 1.0, one wrong value less, and stopping after the first call the share of
turns done. verl is installed --no-deps in CI (.ci/run); without it these tests are skipped."""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

pytest.importorskip("verl.interactions.base", reason="verl 0.7.x is not installed (see .ci/run: pip install --no-deps "
                                                     "verl==0.7.1 and the few packages its tool modules import)")
pq = pytest.importorskip("pyarrow.parquet")

from verl.interactions.base import BaseInteraction  # noqa: E402
from verl.interactions.utils.interaction_registry import initialize_interactions_from_config  # noqa: E402
from verl.tools.base_tool import BaseTool  # noqa: E402
from verl.tools.schemas import ToolResponse  # noqa: E402
from verl.tools.utils.tool_registry import initialize_tools_from_config  # noqa: E402

from sap import synthesize  # noqa: E402
from sap.cli.main import main  # noqa: E402
from sap.envs.verl import SapInteraction, SapTool  # noqa: E402
from sap.envs.verl_config import write_verl_configs  # noqa: E402
from sap.export.verl import write_verl_parquet  # noqa: E402
from sap.rewards.verl import parse_ground_truth  # noqa: E402
from sap.toolsets import builtin_names, load_toolset  # noqa: E402

PER_TOOLSET = 6
MIX = {"base": 0.6, "miss_param": 0.2, "miss_func": 0.2}
WRONG = "zz-not-a-value-zz"


@dataclass
class Loop:
    """What verl's ToolAgentLoop holds for one toolset: its tools by name and its interactions by name."""

    tools: dict[str, BaseTool]
    interactions: dict[str, BaseInteraction]


@dataclass
class AgentData:
    """The part of verl's AgentData that tools read (verl's own class needs hydra and the rollout stack)."""

    request_id: str


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """6 synthesized records of each built-in toolset, exported to verl's parquet and read back."""
    records = [r for name in builtin_names() for r in synthesize(name, PER_TOOLSET, seed=5, mix=MIX).records]
    path = write_verl_parquet(records, tmp_path_factory.mktemp("verl") / "train.parquet")
    return pq.read_table(path).to_pylist()


@pytest.fixture(scope="module")
def loops(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Loop]:
    """Per built-in toolset: the tools and interactions verl builds from the config files sap writes."""
    out = {}
    for name in builtin_names():
        tools_yaml, interaction_yaml = write_verl_configs(name, tmp_path_factory.mktemp(name))
        tools = initialize_tools_from_config(str(tools_yaml))
        out[name] = Loop({t.name: t for t in tools}, initialize_interactions_from_config(str(interaction_yaml)))
    return out


async def play(loop: Loop, row: dict[str, Any], request_id: str, wrong: str | None = None,
               first_calls: int | None = None) -> tuple[list[tuple[bool, str, float, dict[str, Any]]], list[bool]]:
    """Play the row's gold calls as verl's agent loop would run them: every generate_response answer, and whether
    each call succeeded (the tool's metrics). `wrong` replaces the first string value of the first call;
    `first_calls` makes only that many calls of the first turn and stops (the loop is cut before the model ends its
    turn)."""
    kwargs = row["extra_info"]["interaction_kwargs"]
    interaction = loop.interactions[kwargs["name"]]
    assert await interaction.start_interaction(request_id, **kwargs) == request_id
    messages: list[dict[str, Any]] = list(row["prompt"])
    answers, oks = [], []
    for t, turn in enumerate(parse_ground_truth(row["reward_model"]["ground_truth"])):
        for i, gold in enumerate(turn[:first_calls]):
            args = dict(gold.args)
            if wrong is not None and t == 0 and i == 0:
                args[next(k for k, v in args.items() if isinstance(v, str))] = wrong
            tool = loop.tools[gold.name]
            instance_id, _ = await tool.create(create_kwargs={})
            response, step_reward, metrics = await tool.execute(instance_id, args, agent_data=AgentData(request_id))
            await tool.release(instance_id)
            assert isinstance(response, ToolResponse) and response.text and step_reward == 0.0
            oks.append(metrics["ok"])
            messages.append({"role": "tool", "content": response.text})
        if first_calls is not None:
            return answers, oks
        messages.append({"role": "assistant", "content": "Done."})
        answer = await interaction.generate_response(request_id, messages, **kwargs)
        answers.append(answer)
        messages.append({"role": "user", "content": answer[1]})
        if answer[0]:
            break
    return answers, oks


def _toolset(row: dict[str, Any]) -> str:
    return row["extra_info"]["toolset"]


def test_configs_load_through_verls_registries(loops: dict[str, Loop]) -> None:
    for name, loop in loops.items():
        specs = {s.name: s.to_openai()["function"] for s in load_toolset(name).tools}
        assert set(loop.tools) == set(specs)
        for tool_name, tool in loop.tools.items():
            assert isinstance(tool, SapTool) and isinstance(tool, BaseTool)
            schema = tool.get_openai_tool_schema().function
            params = specs[tool_name].get("parameters") or {}
            assert set(schema.parameters.properties) == set(params.get("properties") or {})
            assert set(schema.parameters.required) == set(params.get("required") or [])
        assert isinstance(loop.interactions["sap"], SapInteraction)
    # an optional parameter (anyOf [T, null]) keeps its type and enum; optional, it stays out of `required`
    status = loops["travel"].tools["list_bookings"].get_openai_tool_schema().function.parameters
    prop = status.properties["status"]
    assert (prop.type, prop.enum) == ("string", ["confirmed", "cancelled"])
    assert "status" not in status.required


def test_gold_play_scores_one_and_feeds_the_user_turns(rows: list[dict[str, Any]], loops: dict[str, Loop]) -> None:
    for row in rows:
        loop, request_id = loops[_toolset(row)], uuid4().hex
        answers, oks = asyncio.run(play(loop, row, request_id))
        assert [a[1] for a in answers[:-1]] == row["extra_info"]["user_turns"]
        assert [a[0] for a in answers] == [False] * (len(answers) - 1) + [True]
        done, _, score, rewards = answers[-1]
        assert score == 1.0 and (rewards["progress"], rewards["graduated"]) == (1.0, 1.0), (row["extra_info"], rewards)
        assert all(oks), (row["extra_info"]["task_id"], oks)
        interaction = loop.interactions["sap"]
        assert asyncio.run(interaction.calculate_score(request_id)) == 1.0
        assert asyncio.run(next(iter(loop.tools.values())).calc_reward(request_id)) == 1.0
        asyncio.run(interaction.finalize_interaction(request_id))
        with pytest.raises(KeyError, match="no sap episode"):
            asyncio.run(interaction.calculate_score(request_id))


def test_one_wrong_value_scores_below_one(rows: list[dict[str, Any]], loops: dict[str, Loop]) -> None:
    wrong = [r for r in rows if (turns := parse_ground_truth(r["reward_model"]["ground_truth"]))[0]
             and any(isinstance(v, str) for v in turns[0][0].args.values())]
    assert len(wrong) >= 8, len(wrong)
    for row in wrong:
        request_id = uuid4().hex
        answers, _ = asyncio.run(play(loops[_toolset(row)], row, request_id, wrong=WRONG))
        rewards = loops[_toolset(row)].interactions["sap"].rewards(request_id)
        assert answers[-1][3] == rewards and answers[-1][2] == rewards["progress"]
        assert rewards["graduated"] < 1.0 and rewards["r_atomic"] < 1.0, row["extra_info"]["task_id"]


def test_stopping_after_the_first_call_earns_the_share_of_turns_done(rows: list[dict[str, Any]],
                                                                     loops: dict[str, Loop]) -> None:
    """Turn 0 has one gold call: playing it, then the loop ending (length or turn limit), completes 1 of T turns."""
    stops = [r for r in rows if len(turns := parse_ground_truth(r["reward_model"]["ground_truth"])) > 1
             and len(turns[0]) == 1]
    assert len(stops) >= 4, len(stops)
    for row in stops:
        loop, request_id = loops[_toolset(row)], uuid4().hex
        asyncio.run(play(loop, row, request_id, first_calls=1))
        turns = len(parse_ground_truth(row["reward_model"]["ground_truth"]))
        assert asyncio.run(loop.interactions["sap"].calculate_score(request_id)) == pytest.approx(1 / turns)
        rewards = loop.interactions["sap"].rewards(request_id)
        assert rewards["turns_correct"] == 1 and rewards["graduated"] < 1.0


def test_trajectories_keep_their_own_state(rows: list[dict[str, Any]], loops: dict[str, Loop]) -> None:
    """Two trajectories of one row played at once (as verl gathers a batch): a wrong call in one leaves the other's
    episode untouched."""
    row = next(r for r in rows if (turns := parse_ground_truth(r["reward_model"]["ground_truth"]))[0]
               and any(isinstance(v, str) for v in turns[0][0].args.values()))
    loop = loops[_toolset(row)]

    async def both() -> tuple[Any, Any]:
        return await asyncio.gather(play(loop, row, "bad", wrong=WRONG), play(loop, row, "good"))

    bad, good = asyncio.run(both())
    assert good[0][-1][3]["graduated"] == 1.0 and bad[0][-1][3]["graduated"] < 1.0


def test_a_call_without_an_episode_is_refused_by_name(loops: dict[str, Loop]) -> None:
    tool = next(iter(loops["store"].tools.values()))
    with pytest.raises(KeyError, match="no sap episode for request 'nobody'.*interaction_kwargs"):
        asyncio.run(tool.execute("x", {}, agent_data=AgentData("nobody")))
    with pytest.raises(ValueError, match="interaction_kwargs: no 'record'"):
        asyncio.run(loops["store"].interactions["sap"].start_interaction("r1", name="sap"))


def test_bad_reward_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="config reward: 'bogus' is not one of progress, graduated"):
        write_verl_configs("store", tmp_path, reward="bogus")
    assert not any(tmp_path.iterdir())


def test_cli_writes_configs_verl_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verl-config", "--toolset", "travel", "-o", str(tmp_path), "--reward", "graduated"]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "tool_config.yaml"),
                                               str(tmp_path / "interaction_config.yaml")]
    interaction = initialize_interactions_from_config(str(tmp_path / "interaction_config.yaml"))["sap"]
    assert interaction.reward_name == "graduated" and interaction.toolset == "travel"
    tools = initialize_tools_from_config(str(tmp_path / "tool_config.yaml"))
    assert [t.name for t in tools] == [s.name for s in load_toolset("travel").tools]
