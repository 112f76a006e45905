"""`sap eval`: its options, and the run that prints the summary and writes the per-task rewards."""
from __future__ import annotations

import argparse
import json
from typing import Any

from sap.cli.common import DeprecatedAlias, LineWriter, check_writable, db_url, pct, request_args

# the reward a rollout is scored by: its (w_atomic, w_orch); the two single ones are the cache paper's ablations
REWARD_WEIGHTS = {"graduated": (0.5, 0.5), "r_atomic": (1.0, 0.0), "r_orch": (0.0, 1.0)}


def add_model_args(p: argparse.ArgumentParser) -> None:
    """The options of the model under test and its rollouts, shared by `sap eval` and `sap frontier`."""
    p.add_argument("--assistant-model", "--model", dest="model", required=True, action=DeprecatedAlias,
                   deprecated=("--model",), help="LiteLLM model string of the model under test (the assistant), e.g. "
                   "openai/qwen2.5-7b; --model is its deprecated alias")
    p.add_argument("-k", type=int, default=1, help="samples per task")
    p.add_argument("--api-base", help="base URL of an OpenAI-compatible server (vLLM, llama.cpp, Ollama, ...)")
    p.add_argument("--api-key-env", help="environment variable holding the API key (default: none for --api-base, "
                   "else LiteLLM's own variable for the provider)")
    p.add_argument("--temperature", type=float, default=0.7, help="the assistant's sampling temperature")
    p.add_argument("--max-tokens", type=int, default=1024, help="the assistant's longest answer, in tokens")
    request_args(p, who="the assistant", structured=False)  # it answers with tool calls, not a JSON schema
    p.add_argument("--max-steps", type=int, default=8, help="model requests per turn before the turn is cut")
    p.add_argument("--concurrency", type=int, default=4, help="rollouts in flight at once")
    p.add_argument("--w-atomic", type=float, default=None, help="weight of R_atomic in the graduated reward (0.5)")
    p.add_argument("--w-orch", type=float, default=None, help="weight of R_orch in the graduated reward (0.5)")
    p.add_argument("--reward", choices=REWARD_WEIGHTS, default="graduated", help="graduated (both, weighted), or "
                   "the cache paper's ablations r_atomic (R_atomic only) and r_orch (R_orch only)")
    p.add_argument("--toolset", help="toolset of every sap record (default: each record's meta.toolset)")


def reward_weights(args: argparse.Namespace) -> tuple[float, float]:
    """(w_atomic, w_orch) from --reward, or from --w-atomic/--w-orch under the graduated reward; weights beside an
    ablation are refused."""
    if args.reward != "graduated":
        if args.w_atomic is not None or args.w_orch is not None:
            raise ValueError(f"--reward {args.reward} fixes the weights; drop --w-atomic/--w-orch")
        return REWARD_WEIGHTS[args.reward]
    return (0.5 if args.w_atomic is None else args.w_atomic, 0.5 if args.w_orch is None else args.w_orch)


def model_config(args: argparse.Namespace) -> Any:
    """The assistant's ModelConfig from the options of `add_model_args`."""
    from sap.llm import ModelConfig

    return ModelConfig(model=args.model, api_base=args.api_base, api_key_env=args.api_key_env,
                       temperature=args.temperature, max_tokens=args.max_tokens, concurrency=args.concurrency,
                       **({"timeout": args.timeout} if args.timeout is not None else {}))


def add_eval_args(p: argparse.ArgumentParser) -> None:
    """The options of `sap eval`."""
    add_model_args(p)
    p.add_argument("--data", required=True, help="sap records (JSONL from sap synthesize) or a BFCL multi-turn "
                   "question file")
    p.add_argument("--answers", help="BFCL possible_answer file (default: possible_answer/<same name> beside --data)")
    p.add_argument("--db", type=db_url, default="sqlite:///sap.db", help="run database holding the caches that cache-mode records "
                   "(cache:NAME) play on")
    p.add_argument("-o", "--output", help="JSONL of per-task rewards: task_id, rewards (K progress rewards), mean, "
                   "graduated; one line per task as soon as its K rollouts are done")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def run_eval(args: argparse.Namespace) -> int:
    """Load the tasks, run K rollouts each, write each task's rewards as it finishes, print the summary."""
    from sap.eval import evaluate, load_tasks

    if args.output:
        check_writable(args.output)
    cfg = model_config(args)
    w_atomic, w_orch = reward_weights(args)
    tasks = load_tasks(args.data, args.answers, args.toolset, args.db)
    out = LineWriter(args.output) if args.output else None
    try:
        result = evaluate(tasks, cfg, k=args.k, max_steps=args.max_steps, concurrency=args.concurrency,
                          w_atomic=w_atomic, w_orch=w_orch, on_task=out.write if out else None)
    finally:
        if out:
            out.close()
    s = result.summary
    status = 1 if s["failed_rollouts"] == s["rollouts"] else 0  # the model never got through a dialogue
    if args.json:
        print(json.dumps(s))
        return status
    print(f"{s['tasks']} tasks x {s['samples']} samples = {s['rollouts']} rollouts of {args.model}"
          + (f" ({s['failed_rollouts']} ended by model errors)" if s["failed_rollouts"] else "")
          + (f" -> {args.output}" if args.output else ""))
    if s["first_failure"]:
        print(f"  first model error: {s['first_failure']}")
    print(f"  turn accuracy {pct(s['turn_accuracy'])}, call accuracy {pct(s['call_accuracy'])}")
    print(f"  reward {_num(s['reward'])} (R_atomic {_num(s['r_atomic'])}, R_orch {_num(s['r_orch'])}), "
          f"progress {_num(s['progress'])}")
    args_acc = s["arg_accuracy"]
    print(f"  argument accuracy: query-derived {pct(args_acc['query'])}, "
          f"dependency-propagated {pct(args_acc['dependent'])}")
    print("  errors: " + ", ".join(f"{k} {v}" for k, v in s["errors"].items()))
    usage = s["usage"]
    print(f"  LLM: {usage['calls']} calls, {usage['prompt_tokens']}+{usage['completion_tokens']} tokens, "
          f"${usage['cost_usd']:.4f}" + ("" if usage["priced"] else " (unpriced model: counted as 0)"))
    return status


def add_commands(sub: Any) -> None:
    """Register `sap eval`."""
    p = sub.add_parser("eval", help="run a model as the assistant on sap records or BFCL multi-turn files and score it")
    add_eval_args(p)
    p.set_defaults(fn=run_eval)
