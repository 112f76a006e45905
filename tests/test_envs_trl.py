"""The TRL adapter with TRL installed: the environment methods render as the tool specs through transformers, and a
two-step GRPOTrainer run (marked trl_e2e) rolls out in the environments and logs the rewards they computed. The
environments driven as GRPOTrainer drives them, without TRL, are tested in tests/test_envs.py."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sap import synthesize
from sap.envs import TaskCatalog
from sap.envs.trl import env_reward, trl_environments
from sap.jsonutil import write_jsonl
from sap.toolsets import builtin_names


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> TaskCatalog:
    """3 synthesized records of each built-in toolset."""
    path = tmp_path_factory.mktemp("trl") / "records.jsonl"
    write_jsonl(path, [r for name in builtin_names()
                       for r in synthesize(name, 3, seed=5, mix={"base": 0.5, "miss_param": 0.5}).records])
    return TaskCatalog.from_file(path)



def test_methods_render_as_the_tool_specs(catalog: TaskCatalog) -> None:
    """transformers' get_json_schema (what TRL puts in the prompt) gives back each tool's name and parameters."""
    get_json_schema = pytest.importorskip("transformers.utils").get_json_schema
    factories, rows = trl_environments(catalog)
    for name, factory in factories.items():
        env = factory()
        task = catalog.get(index=next(r["task_index"] for r in rows if r["environment"] == name))
        for tool in task.tools:
            spec = tool["function"]
            schema = get_json_schema(getattr(env, spec["name"]))["function"]
            params = spec.get("parameters") or {}
            assert schema["name"] == spec["name"]
            assert set(schema["parameters"]["properties"]) == set(params.get("properties") or {})
            assert set(schema["parameters"].get("required", [])) == set(params.get("required") or [])
            for p, s in (params.get("properties") or {}).items():
                if s.get("type") in ("string", "integer", "number", "boolean", "array", "object"):
                    assert schema["parameters"]["properties"][p]["type"] == s["type"], (spec["name"], p)


# --- a real GRPOTrainer run ---


def tiny_model_and_tokenizer(texts: list[str]) -> tuple[Any, Any]:
    """A randomly initialised two-layer Qwen2 model and a byte-level BPE tokenizer trained on `texts`, with TRL's
    Qwen3 chat template (which renders tool calls, and whose responses TRL knows how to parse)."""
    from importlib.resources import files

    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>",
                "</tool_response>", "<think>", "</think>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=2000, special_tokens=specials,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        padding_side="left")
    tokenizer.chat_template = files("trl").joinpath("chat_templates", "qwen3.jinja").read_text(encoding="utf-8")
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32768,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    return Qwen2ForCausalLM(config), tokenizer


@pytest.mark.trl_e2e
def test_grpo_trainer_runs_in_the_environments(catalog: TaskCatalog, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    # two tasks of one toolset: a turn whose ground truth makes no call (a text answer earns 1.0 there), and a
    # task whose first turn needs calls (a text answer earns 0.0): the random model answers with text only
    quiet = next(t for t in catalog if any(not turn.gold for turn in t.turns))
    calls = next(t for t in catalog if t.meta["toolset"] == quiet.meta["toolset"] and t.turns[0].gold)
    answer_only = replace(quiet, id=f"{quiet.id}-answer-only", turns=[next(u for u in quiet.turns if not u.gold)])
    small = TaskCatalog([answer_only, calls], "two tasks")
    factory, rows = trl_environments(small, "progress")
    texts = [json.dumps(t.tools) + t.system + " ".join(turn.user for turn in t.turns) for t in small]
    model, tokenizer = tiny_model_and_tokenizer(texts)
    args = GRPOConfig(output_dir=str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=24, learning_rate=1e-3, logging_steps=1, report_to=[], use_cpu=True,
                      save_strategy="no", max_tool_calling_iterations=2, seed=0, bf16=False)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=args, train_dataset=Dataset.from_list(rows),
                          environment_factory=factory, reward_funcs=[env_reward("graduated")])
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert len(logs) == 2 and all(entry["tools/call_frequency"] == 0.0 for entry in logs)
    # one step per task (two rows, two steps): the environments scored the answer-only task 1.0, the other 0.0
    name = factory.__name__
    assert sorted(entry[f"rewards/{name}/mean"] for entry in logs) == [0.0, 1.0]
    assert sorted(entry["rewards/sap_graduated/mean"] for entry in logs) == [0.0, 1.0]
    pool = [env for envs in trainer._environment_pool.values() for env in envs]
    played = [env for env in pool if env.env is not None and env.env.done]
    assert played and {env.env.task.id for env in played} <= {t.id for t in small}
    last = logs[-1]  # the last step's logged reward is the mean of what its environments computed
    assert last[f"rewards/{name}/mean"] == pytest.approx(sum(e.get_reward() for e in played) / len(played))
