"""The `sap` command: its parser, built from the command families, and the one place errors become exit codes."""
from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any, Sequence

from sap.cli import cache, data, envs, frontier, runs
from sap.cli import eval as evaluation
from sap.cli.common import full_disk
from sap.errors import SapError
from sap.version import __version__


EXAMPLES = {
    "sap": "sap synthesize --toolset store -n 20 -o data.jsonl\nsap show data.jsonl -i 0\nsap runs",
    "sap toolsets": "sap toolsets\nsap toolsets --json",
    "sap synthesize": "sap synthesize --toolset store -n 20 -o data.jsonl\n"
                      "sap synthesize --toolset store -n 500 -o data.jsonl --model openai/gpt-4o-mini --dry-run\n"
                      "sap synthesize --toolset travel -n 100 -o travel.jsonl --mix base=0.6,miss_param=0.2,miss_func=0.2\n"
                      "sap synthesize --toolset store -n 50 -o llm.jsonl --model openai/gpt-4o-mini --max-cost 2\n"
                      "sap synthesize --toolset my_domain.py -n 20 -o mine.jsonl --model openai/qwen "
                      "--api-base http://127.0.0.1:8000/v1",
    "sap resume": "sap resume run-1a2b3c4d            # brings the run's own -o file to the full count\n"
                  "sap resume run-1a2b3c4d --db postgresql://host/sap -o copy.jsonl",
    "sap worker": "sap worker run-1a2b3c4d --db postgresql://host/sap   # one more worker on a shared run",
    "sap runs": "sap runs\nsap runs --json --db sqlite:///other.db",
    "sap variants": "sap variants data.jsonl -n 2 -o variants.jsonl --augment miss_param",
    "sap export": "sap export run-1a2b3c4d -o sft_dir --format messages --split train=0.95,test=0.05 --license cc-by-4.0\n"
                  "sap export data.jsonl -o sharegpt.jsonl --format sharegpt\n"
                  "sap export run-1a2b3c4d -o hf_dir --format hf\n"
                  "HF_TOKEN=hf_... sap export run-1a2b3c4d -o hf_dir --format parquet --push-to-hub me/my-data --private\n"
                  "sap export data.jsonl -o - | head -n 1",
    "sap validate": "sap validate data.jsonl\nsap validate mine.jsonl --toolset my_domain.py",
    "sap show": "sap show data.jsonl -i 0\nsap show data.jsonl | less",
    "sap stats": "sap stats data.jsonl\nsap stats bfcl/sap_multi_turn.json --json",
    "sap report": "sap report data.jsonl -o report_dir",
    "sap audit": "sap audit data.jsonl\nsap audit data.jsonl --json --fail-on ambiguous_reference=0.02,error_result=0",
    "sap eval": "sap eval --assistant-model openai/gpt-4o-mini --data data.jsonl -k 4 -o rewards.jsonl",
    "sap frontier": "sap frontier --assistant-model openai/qwen --api-base http://127.0.0.1:8000/v1 --data seeds.jsonl "
                    "-o frontier_dir",
    "sap serve-env": "sap serve-env --data data.jsonl --port 8765\nsap serve-env --run run-1a2b3c4d --db sqlite:///sap.db",
    "sap verl-config": "sap verl-config --toolset store -o verl_cfg\nsap verl-config --toolset travel -o verl_cfg --reward graduated",
    "sap cache": "sap cache list",
    "sap cache collect": "sap cache collect --toolset travel --templates templates.yaml",
    "sap cache import": "sap cache import ComplexFuncBench.jsonl --cache cfb",
    "sap cache list": "sap cache list --json",
    "sap cache synthesize": "sap cache synthesize --cache travel --templates templates.yaml -n 100 -o data.jsonl",
    "sap templates": "sap templates derive --toolset travel -o templates.yaml",
    "sap templates derive": "sap templates derive --toolset travel -o templates.yaml --max-steps 3",
}


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Help with every option's default shown (unless it is None or False, or the help says it) and the examples
    kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or action.default == argparse.SUPPRESS \
                or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class SapParser(argparse.ArgumentParser):
    """An argument parser of `sap` or one of its commands: defaults shown, and the command's examples as epilog."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        if self.epilog is None and self.prog in EXAMPLES:
            self.epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[self.prog].splitlines())


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `sap` command."""
    parser = SapParser(prog="sap", description="Synthesize multi-turn tool-use data with provenance.")
    parser.add_argument("--version", action="version", version=f"sap {__version__}", help="print sap's version")
    sub = parser.add_subparsers(dest="command", required=True)
    runs.add_commands(sub)
    data.add_commands(sub)
    evaluation.add_commands(sub)
    frontier.add_commands(sub)
    cache.add_commands(sub)
    envs.add_commands(sub)
    return parser


def one_line(exc: BaseException) -> str:
    """An error's message on one line: its first line, then any further lines joined by "; "."""
    head, *rest = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
    return f"{head} {'; '.join(rest)}" if rest else head


def closed_pipe() -> int:
    """A reader that stopped early (`sap export RUN -o - | head`): quiet, with the shell's exit code of a command
    killed by SIGPIPE. Standard output now points at /dev/null, so the interpreter's last flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # standard output is no file (captured): nothing is left to flush into a pipe
        pass
    return 128 + signal.SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; bad input and any SapError print one line and return 2; a closed pipe returns 141."""
    args = build_parser().parse_args(argv)
    try:
        code = args.fn(args)
        sys.stdout.flush()  # a pipe closed after the last write shows here, not in the interpreter's exit
        return code
    except BrokenPipeError:
        return closed_pipe()
    except (SapError, FileNotFoundError, IsADirectoryError, PermissionError, ValueError) as exc:
        print(f"sap {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # a full disk outside a run's slots: creating the run, exporting
        from sap.store.runs import is_disk_full

        if not is_disk_full(exc):
            raise
        print(f"sap {args.command}: error: {full_disk(args, exc)}", file=sys.stderr)
        return 2


def run() -> None:
    """The `sap` command: `main()`, then exit with its code. After an interrupt (130, 143) the process ends at once,
    without joining the threads a library left: a thread pool's worker started just as Ctrl-C arrived is never told
    to stop, and the interpreter's exit would wait on it forever (seen in tests/test_user_path.py). Everything the
    run accepted is committed and its files closed by then, as after kill -9."""
    code = main()
    if code in (130, 143):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
