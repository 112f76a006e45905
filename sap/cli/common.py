"""What every `sap` command shares: usage errors, output files, progress, the run loop, common options."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, TextIO

from sap.agents.roles import ROLES
from sap.errors import StoreError, UsageError
from sap.jsonutil import write_jsonl


def check_owner(store: Any, output: str, overwrite: bool, run_id: str | None) -> None:
    """Refuse to replace a non-empty `output` that is not the file of run `run_id` (None: a new run), unless
    `overwrite`; `store` None: no database yet, so no run owns it."""
    path = Path(output)
    if overwrite or not path.is_file() or path.stat().st_size == 0:
        return
    owner = store.output_owner(output) if store is not None else None
    if owner is not None and owner == run_id:
        return
    whose = f"run {owner}'s output" if owner else "not written by a run of this database"
    raise UsageError(f"-o {output} exists ({whose}); pass --overwrite to replace it, or choose another file")


def check_writable(path: str) -> None:
    """Refuse an output path that cannot be written, before any work is done."""
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"output path {path} is a directory")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"output directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise UsageError(f"output path {path} is not writable")


class Progress:
    """A run's progress on stderr: one rewritten line on a terminal, else a log line every `every` seconds; with
    `verbosity` 0 nothing, with 2 also a line per slot."""

    def __init__(self, target: int, accepted: int = 0, verbosity: int = 1, every: float = 30.0,
                 stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.target, self.accepted, self.start_accepted = target, accepted, accepted
        self.dropped = self.truncated = 0
        self.verbosity, self.every, self.clock = verbosity, every, clock
        self.stream = stream or sys.stderr
        self.live = verbosity > 0 and self.stream.isatty()
        self.started = self.last = clock()
        self.spent: Callable[[], float] | None = None  # the run's LLM spend so far, once a driver exists

    def slot(self, index: int, status: str) -> None:
        """Count one finished slot and show the progress if it is time to."""
        kept = status in ("accepted", "truncated")
        self.accepted += kept
        self.truncated += status == "truncated"
        self.dropped += not kept
        if self.verbosity > 1:
            self._write(f"slot {index}: {status}\n")
        self._tick()

    def show(self, counts: dict[str, int]) -> None:
        """Set the whole run's slot counts (several workers on it, e.g. Ray actors) and show them if it is time to."""
        self.accepted = counts.get("accepted", 0)
        self.dropped = counts.get("rejected", 0) + counts.get("failed", 0)
        self._tick()

    def _tick(self) -> None:
        """Rewrite the terminal line (at most every 0.1 s), or log a line every `every` seconds without one."""
        now = self.clock()
        if self.live and now - self.last >= 0.1:
            self._write(f"\r{self.line()}\x1b[K")
            self.last = now
        elif not self.live and self.verbosity > 0 and now - self.last >= self.every:
            self._write(f"{time.strftime('%H:%M:%S')} {self.line()}\n")
            self.last = now

    def line(self) -> str:
        """`232/500 accepted (12 truncated), 40 dropped | 3.1 records/s | ETA 1m26s | $0.0123`."""
        elapsed = max(self.clock() - self.started, 1e-9)
        rate = (self.accepted - self.start_accepted) / elapsed
        left = max(self.target - self.accepted, 0)
        eta = f"ETA {duration(left / rate)}" if rate > 0 else "ETA --"
        text = (f"{self.accepted}/{self.target} accepted ({self.truncated} truncated), {self.dropped} dropped | "
                f"{rate:.1f} records/s | {eta}")
        return text + (f" | ${self.spent():.4f}" if self.spent is not None else "")

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def close(self) -> None:
        """End the display: the last line stays on the terminal."""
        if self.live:
            self._write(f"\r{self.line()}\x1b[K\n")


def duration(seconds: float) -> str:
    """`86` -> `1m26s`, `4000` -> `1h06m`."""
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so a run stops as on Ctrl-C."""


def raise_terminated(signum: int, frame: Any) -> None:
    """The SIGTERM handler of a run: stop as on Ctrl-C."""
    raise Terminated()


class LineWriter:
    """A JSONL file written a whole line at a time, unbuffered; a failed write is cut back to the last whole line."""

    def __init__(self, path: str) -> None:
        self.file = open(path, "wb", buffering=0)
        self.size = 0

    def write(self, row: dict[str, Any]) -> None:
        """Append `row` as one line, or leave the file as it was and raise."""
        line = (json.dumps(row, ensure_ascii=False) + "\n").encode()
        rest = memoryview(line)
        try:
            while rest:
                rest = rest[self.file.write(rest):]
        except OSError:
            self.file.truncate(self.size)
            self.file.seek(self.size)
            raise
        self.size += len(line)

    def close(self) -> None:
        self.file.close()


def one_line_of(exc: BaseException) -> str:
    """An exception's type and the first line of its message."""
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"


def full_disk(args: argparse.Namespace, exc: BaseException) -> str:
    """Which disk is full, in words: the output file's (ENOSPC) or the run database's."""
    from sap.store.runs import sqlite_path

    if isinstance(exc, OSError):
        return f"output {args.output}: disk is full"
    return f"database {sqlite_path(args.db) or args.db}: disk is full"


def open_store(args: argparse.Namespace, create: bool = True):
    """The run store of --db; with `create` False (read-only commands) a missing SQLite file is a StoreError rather
    than a new, empty database."""
    from sap.store.runs import RunStore, existing_store

    return RunStore(args.db, full_sync=getattr(args, "full_sync", False)) if create else existing_store(args.db)


def drive(args: argparse.Namespace, store: Any, run_id: str, toolset: Any, output: str | None,
           driver_cls: Any = None) -> int:
    """Work on a stored run until its target is met, writing `output` as it goes and in slot order at the end
    (with `driver_cls`, e.g. the cache mode's driver, instead of RunDriver)."""
    from sap.runs.driver import RunDriver
    from sap.runs.slots import reason_kind
    from sap.runs.tally import RecordTally
    from sap.store.checkpoint import checkpointer_for
    from sap.store.runs import is_disk_full, is_transient_db_error

    def is_database_fault(exc: BaseException) -> bool:
        """A database that stayed busy, locked or unreachable past its retries (not a full disk)."""
        return is_transient_db_error(exc) and not is_disk_full(exc)

    run = store.run(run_id)
    resume = store.resume_command(run_id, output)
    progress = Progress(run.target, store.counts(run_id).get("accepted", 0), getattr(args, "verbosity", 1),
                        getattr(args, "progress_every", 30.0))
    kept = (lambda r: not r["meta"].get("truncated")) if getattr(args, "drop_truncated", False) else (lambda r: True)
    out = None
    on_term = signal.signal(signal.SIGTERM, raise_terminated) \
        if threading.current_thread() is threading.main_thread() else None
    try:
        with checkpointer_for(args.db, full_sync=getattr(args, "full_sync", False)) as saver:
            driver = (driver_cls or RunDriver)(store, run_id, toolset, saver, max_cost=getattr(args, "max_cost", None))
            driver.admit()  # refused (another process holds the run, settings changed) before -o is touched
            out = LineWriter(output) if output else None
            for record in filter(kept, store.iter_records(run_id)):
                if out:
                    out.write(record)
            if getattr(args, "ray", None) is not None:  # Ray actors work on the run; -o is written at the end
                store.release(run_id, driver.worker)
                done = drive_on_ray(args, store, run_id, toolset, progress)
            else:
                if (client := getattr(driver, "client", None)) is not None:
                    progress.spent = lambda: client.ledger.snapshot()["total"]["cost_usd"]
                done = driver.run(on_record=(lambda r: kept(r) and out.write(r)) if out else None,
                                  on_slot=progress.slot, concurrency=getattr(args, "concurrency", 1))
        rejections = store.rejections(run_id)
        if output:  # in slot order: several workers accept slots out of order
            write_jsonl(output, filter(kept, store.iter_records(run_id)))
            write_jsonl(f"{output}.rejections.jsonl", rejections)
    except KeyboardInterrupt as exc:
        progress.close()
        why = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        print(f"{why}; nothing accepted is lost. Continue with: {store.resume_command(run_id)}"
              + (f" (it brings {output} to the full count)" if output else ""), file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    except Exception as exc:
        if is_database_fault(exc):
            progress.close()
            raise StoreError(f"database {args.db} keeps failing: {one_line_of(exc)} (run {run_id} is kept; once the "
                             f"database is back: {resume})") from exc
        if not is_disk_full(exc):
            raise
        progress.close()
        accepted = store.counts(run_id).get("accepted", 0)
        raise StoreError(f"{full_disk(args, exc)} (run {run_id} stopped; {accepted} accepted records are kept; "
                         f"free space and run: {resume})") from exc
    finally:
        if out:
            out.close()
        if on_term is not None:
            signal.signal(signal.SIGTERM, on_term)
    progress.close()
    tally = RecordTally.of(store.iter_records(run_id))
    left_out = f", left out of {output} by --drop-truncated" if output and getattr(args, "drop_truncated", False) else ""
    print(f"run {run_id}: accepted {done.accepted}/{done.target} ({tally.truncated} truncated at a failing turn"
          f"{left_out}) from {done.slots} slots" + (f" -> {output}" if output else ""))
    print(f"  P_f rate {tally.fallback_rate:.1%} of {tally.arguments} arguments (fallbacks: declared source "
          f"unusable); "
          f"{len(rejections)} rejections with reasons" + (f" -> {output}.rejections.jsonl" if output else ""))
    print("  kinds: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.kinds.items())))
    if tally.unkept_rewrites:
        print(f"  {tally.unkept_rewrites} requested rewrites were not kept (their base records were exported "
              f"instead)")
    for reason, count in Counter(reason_kind(r) for r in rejections).most_common():
        print(f"  dropped {count}: {reason}")
    usage = store.usage(run_id).snapshot()
    if usage["roles"]:
        total = usage["total"]
        print(f"  LLM: {total['calls']} calls, {total['prompt_tokens']}+{total['completion_tokens']} tokens, "
              f"${total['cost_usd']:.4f}" + ("" if total["priced"] else " (some models have no price: counted as 0)"))
    if done.status == "budget":
        print(f"stopped at the cost cap (--max-cost {args.max_cost}); raise it and run: {resume} --max-cost N",
              file=sys.stderr)
    elif done.status == "paused":
        print(f"run {run_id} paused, no slot lost: {done.why}; once the server answers again: {resume}",
              file=sys.stderr)
    elif done.status == "failing":
        print(f"run {run_id} stopped early: {done.why}; fix the cause, then retry those slots: {resume} "
              f"--retry-failed", file=sys.stderr)
    elif done.status == "exhausted":
        print(f"run {run_id} is exhausted: its {done.slots} slots (--max-slots) gave {done.accepted} of "
              f"{done.target} records; retry its failed slots with {resume} --retry-failed, or start over with "
              f"sap synthesize --new-run and a larger --max-slots", file=sys.stderr)
    return 0 if done.accepted >= done.target else 1


def drive_on_ray(args: argparse.Namespace, store: Any, run_id: str, toolset: Any, progress: Progress) -> Any:
    """Work on a stored run with Ray actors (`--ray [ADDRESS]`), showing the whole run's counts on `progress`."""
    from sap.runs.ray_cluster import RayOptions, run_on_ray

    options = RayOptions(address=args.ray or None, actors=args.actors, concurrency=args.ray_concurrency,
                         lease_seconds=args.lease_seconds)
    spec = getattr(args, "toolset_spec", None) or (toolset.name if toolset is not None else None)
    return run_on_ray(store, run_id, spec, options, max_cost=getattr(args, "max_cost", None), show=progress.show,
                      say=lambda line: print(line, file=sys.stderr, flush=True))


def check_ray_args(args: argparse.Namespace) -> None:
    """With --ray: Ray installed, a PostgreSQL --db and usable Ray options, before any run is created or touched."""
    if getattr(args, "ray", None) is None:
        return
    from sap.runs.ray_cluster import RayOptions, check_database, import_ray

    RayOptions(actors=args.actors, concurrency=args.ray_concurrency, lease_seconds=args.lease_seconds).check()
    check_database(args.db)
    import_ray()


def ray_args(p: argparse.ArgumentParser) -> None:
    """--ray [ADDRESS], --actors, --actor-concurrency and --lease-seconds: the run's slots on a Ray cluster."""
    from sap.store.lease import LEASE_SECONDS

    g = p.add_argument_group("Ray", "run the slots on a Ray cluster (extra `ray`; needs a PostgreSQL --db)")
    g.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS", help="run on Ray actors: the "
                   "cluster at ADDRESS (host:6379, ray://host:10001, auto), else RAY_ADDRESS, a cluster started "
                   "here with `ray start`, or a new local one")
    g.add_argument("--actors", type=int, help="Ray actors, each a worker on the run (default: one per cluster CPU)")
    g.add_argument("--actor-concurrency", dest="ray_concurrency", type=int, metavar="N", help="slots in flight per "
                   "actor (default: 1 for rule agents, 8 when a role calls an LLM)")
    g.add_argument("--lease-seconds", type=float, default=LEASE_SECONDS, help="a lost actor's slots go back to the "
                   f"queue once their lease runs out (default {LEASE_SECONDS:g})")


def db_url(text: str) -> str:
    """A --db value as a database URL: a URL as given, a bare file path as the SQLite file it names."""
    return text if "://" in text else f"sqlite:///{text}"


def db_args(p: argparse.ArgumentParser) -> None:
    """--db and --full-sync, shared by every command that touches runs."""
    p.add_argument("--db", type=db_url, default="sqlite:///sap.db",
                   help="run database: a SQLite file (PATH or sqlite:///PATH) or postgresql://...")
    p.add_argument("--full-sync", action="store_true", help="SQLite synchronous=FULL (slower, survives power loss)")


def agents_args(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """Which implementation and LiteLLM model each agent role uses; `prefix` goes before --model, --api-base,
    --api-key-env, --temperature, --max-tokens, --structured and --timeout (`sap frontier`'s own ones are the model
    under test's)."""
    g = p.add_argument_group("agents", "rule agents by default; a model makes the roles LLM roles")
    g.add_argument("--agents", choices=["rule", "llm"], help="implementation of every role (default: llm if a model "
                   "is given, else rule)")
    g.add_argument("--agents-config", help="TOML file of per-role agents and models (see docs/architecture.md)")
    g.add_argument(f"--{prefix}model", help="LiteLLM model string for every LLM role, e.g. openai/gpt-4o-mini")
    for role in ROLES:
        g.add_argument(f"--{role.replace('_', '-')}-model", dest=f"{role}_model", help=f"model of the {role} alone")
    g.add_argument(f"--{prefix}api-base", help="base URL of an OpenAI-compatible server (vLLM, llama.cpp, Ollama, ...)")
    g.add_argument(f"--{prefix}api-key-env", help="environment variable holding the API key (keys are never stored; "
                   "default: LiteLLM's own variable for the provider)")
    g.add_argument(f"--{prefix}temperature", type=float, help="sampling temperature of every LLM role (default: 0.7, "
                   "or the TOML file's)")
    g.add_argument(f"--{prefix}max-tokens", type=int, help="longest answer of every LLM role, in tokens (default: "
                   "1024, or the TOML file's)")
    g.add_argument("--message-mode", choices=["per_turn", "global"], help="messenger: one call per turn, or all "
                   "turns at once from the planner's narrative")
    request_args(g, prefix, "every LLM role", toml=True)


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0 seconds, got {text}")
    return value


def request_args(g: Any, prefix: str = "", who: str = "every LLM role", structured: bool = True,
                 toml: bool = False) -> None:
    """--structured (how structured answers are asked for) and --timeout (seconds per request), with `prefix`; both
    default to ModelConfig's values (with `toml`: the --agents-config file's first)."""
    from sap.llm.defaults import DEFAULT_STRUCTURED, DEFAULT_TIMEOUT

    or_toml = ", or the TOML file's" if toml else ""
    if structured:
        g.add_argument(f"--{prefix}structured", choices=["auto", "json_schema", "json_object"], help=(
            f"how requests of {who} ask for JSON answers: json_schema (OpenAI structured output), json_object (the schema in "
            "the prompt and response_format json_object, for llama.cpp's server), or auto: one tiny json_schema "
            "request per server, json_object if the server refuses it (default: "
            f"{DEFAULT_STRUCTURED}{or_toml})"))
    g.add_argument(f"--{prefix}timeout", type=positive_seconds, metavar="SECONDS", help=(
        f"seconds to wait for one request of {who}; a request that times out twice fails (default: "
        f"{DEFAULT_TIMEOUT:g}{or_toml})"))


def agents_config(args: argparse.Namespace, prefix: str = "") -> Any:
    """The AgentsConfig of the options `agents_args(p, prefix)` added."""
    from sap.agents.config import build_agents_config

    key = prefix.replace("-", "_")
    return build_agents_config(
        args.agents_config, agents=args.agents, message_mode=args.message_mode,
        model_overrides={name: getattr(args, key + name)
                         for name in ("model", "api_base", "api_key_env", "temperature", "max_tokens", "structured",
                                      "timeout")},
        role_models={role: getattr(args, f"{role}_model") for role in ROLES})


def run_args(p: argparse.ArgumentParser) -> None:
    """--max-cost (a run's LLM spending cap) and --concurrency (slots in flight in this process)."""
    p.add_argument("--max-cost", type=float, help="stop cleanly once the run's LLM cost reaches this many USD")
    p.add_argument("--concurrency", type=int, default=1, help="slots run at once in this process (LLM agents "
                   "wait on the network); the records are the same at any concurrency")
    p.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=0, default=1,
                   help="no progress display or log lines")
    p.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=2,
                   help="also one line per finished slot")
    p.add_argument("--progress-every", type=float, default=30.0, metavar="SECONDS",
                   help="with no terminal (nohup, Slurm, CI): seconds between progress log lines")


class DeprecatedAlias(argparse.Action):
    """Store a value; an option string listed in `deprecated` also prints a note naming the option to use."""

    def __init__(self, *args: Any, deprecated: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deprecated = deprecated

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if option_string in self.deprecated:
            print(f"{parser.prog}: note: {option_string} is deprecated here; use {self.option_strings[0]}",
                  file=sys.stderr)
        setattr(namespace, self.dest, values)


def check_run_args(args: argparse.Namespace) -> None:
    """Refuse a negative --max-cost and a --concurrency below 1, before any work is done."""
    if args.max_cost is not None and args.max_cost < 0:
        raise UsageError(f"--max-cost must be at least 0, got {args.max_cost}")
    if args.concurrency < 1:
        raise UsageError(f"--concurrency must be at least 1, got {args.concurrency}")


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"
