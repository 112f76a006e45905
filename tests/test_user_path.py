"""The user's path (issue 24): the Python API runs through RunDriver on a database and resumes; a run remembers its
output file and resume finishes it; -o refuses another run's file; settings are checked before a run exists, in the
user's own spelling; an interrupted run shows as such; SIGTERM stops like Ctrl-C; every option has help; `sap show`
prints dialogues; progress lines read well."""
from __future__ import annotations

import argparse
import io
import json
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import sap
from sap.cli.common import Progress
from sap.cli.main import build_parser, main
from sap.errors import UsageError
from sap.store import RunStore
from sap.toolsets import UnknownToolset
from sap.version import __version__

GATED = Path(__file__).with_name("gated_store_domain.py")  # a domain module: a run of it is resumed by its path


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the `sap` command in a subprocess."""
    return subprocess.run([sys.executable, "-m", "sap.cli", *args], capture_output=True, text=True, timeout=timeout)


def test_the_api_runs_on_a_database_and_resumes_to_the_records_of_one_call(tmp_path):
    reference = sap.synthesize("store", 4, seed=2)
    assert reference.accepted == 4 and reference.status == "complete"
    db = f"sqlite:///{tmp_path / 'api.db'}"
    seen: list[dict] = []
    run = sap.synthesize("store", 4, seed=2, db=db, on_record=seen.append)
    assert run.records == reference.records == seen and list(run) == run.records
    again = sap.synthesize("store", 4, seed=2, db=db)  # the same call continues (here: finds) the same run
    assert again.run_id == run.run_id and again.records == run.records
    assert sap.resume(run.run_id, db=db).records == run.records
    (row,) = sap.list_runs(db)
    assert row["id"] == run.run_id and row["status"] == "complete" and row["accepted"] == 4
    temporary = Path(reference.db.removeprefix("sqlite:///"))
    assert temporary.exists()
    del reference  # the temporary database goes with its handle
    assert not temporary.exists()


def test_the_apis_resume_command_names_the_domain_module_and_works_from_elsewhere(tmp_path, monkeypatch):
    db = f"sqlite:///{tmp_path / 'domain.db'}"

    def stop(record: dict) -> None:
        raise KeyboardInterrupt

    monkeypatch.chdir(GATED.parent)  # the module given by a relative path: the command names it from anywhere
    with pytest.raises(KeyboardInterrupt):
        sap.synthesize(GATED.name, 4, seed=1, db=db, on_record=stop)
    (row,) = sap.list_runs(db)
    assert row["status"] == "interrupted" and row["accepted"] == 1
    command = shlex.split(row["resume"])
    assert command[:5] == ["sap", "resume", row["id"], "--db", db] and command[5:] == ["--toolset", str(GATED)]
    monkeypatch.chdir(tmp_path)
    assert main(command[1:]) == 0
    run = sap.synthesize(str(GATED), 4, seed=1, db=db)  # the same call finds the finished run
    assert run.run_id == row["id"] and run.accepted == 4 and run.resume_command() == row["resume"]
    assert sap.resume(row["id"], db=db, toolset=str(GATED)).resume_command() == row["resume"]
    with pytest.raises(UnknownToolset, match=f"this run's: --toolset {GATED}"):  # data never names code to run,
        sap.resume(row["id"], db=db)  # but the error names the file the run was started from


def test_the_api_refuses_bad_settings_by_their_keyword_before_a_run_exists(tmp_path):
    db = tmp_path / "bad.db"
    with pytest.raises(UsageError, match="min_turns 9 is above max_turns 3"):
        sap.synthesize("store", 2, min_turns=9, max_turns=3, db=f"sqlite:///{db}")
    with pytest.raises(UsageError, match="concurrency must be at least 1"):
        sap.synthesize("store", 2, concurrency=0, db=f"sqlite:///{db}")
    with pytest.raises(TypeError, match="unknown setting 'max_turn'"):
        sap.synthesize("store", 2, max_turn=3)
    assert not db.exists()


def test_cli_errors_name_the_flags_and_create_no_run(tmp_path):
    db = tmp_path / "cli.db"
    out = tmp_path / "o.jsonl"
    done = _cli("synthesize", "--toolset", "store", "-n", "2", "-o", str(out), "--db", f"sqlite:///{db}",
                "--min-turns", "9", "--max-turns", "3")
    assert (done.returncode, done.stderr) == (2, "sap synthesize: error: --min-turns 9 is above --max-turns 3\n")
    done = _cli("synthesize", "--toolset", "store", "-n", "2", "-o", str(out), "--db", f"sqlite:///{db}",
                "--concurrency", "0")
    assert done.returncode == 2 and "--concurrency must be at least 1" in done.stderr
    assert not db.exists()


def test_resume_brings_the_remembered_file_to_the_full_count_and_o_refuses_another_runs_file(tmp_path):
    db, out = f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "data.jsonl"
    base = ["synthesize", "--toolset", "store", "-n", "12", "--seed", "4", "-o", str(out), "--db", db]
    proc = subprocess.Popen([sys.executable, "-m", "sap.cli", *base], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    store = RunStore(db)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        runs = store.runs()
        if runs and store.counts(runs[0].id).get("accepted", 0) >= 3:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be stopped"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    hint = err.strip().splitlines()[-1]
    assert hint.startswith("terminated (SIGTERM); nothing accepted is lost. Continue with: sap resume run-")
    (row,) = sap.list_runs(db)
    assert row["status"] == "interrupted" and row["resume"] == f"sap resume {row['id']} --db {db}"
    listed = _cli("runs", "--db", db)
    assert "interrupted" in listed.stdout and row["resume"] in listed.stdout
    command = hint.split("Continue with: ")[1].split(" (")[0].split()
    done = _cli(*command[1:])
    assert done.returncode == 0, done.stderr
    reference = tmp_path / "ref.jsonl"
    assert _cli(*base[:-4], "-o", str(reference), "--db", f"sqlite:///{tmp_path / 'ref.db'}").returncode == 0
    assert out.read_bytes() == reference.read_bytes() and len(out.read_text().splitlines()) == 12
    other = _cli("synthesize", "--toolset", "store", "-n", "2", "--seed", "5", "-o", str(out), "--db", db)
    assert other.returncode == 2 and f"-o {out} exists (run {row['id']}'s output)" in other.stderr
    assert len(out.read_text().splitlines()) == 12
    assert _cli("synthesize", "--toolset", "store", "-n", "2", "--seed", "5", "-o", str(out), "--db", db,
                "--overwrite").returncode == 0
    assert len(out.read_text().splitlines()) == 2


def test_drop_truncated_leaves_truncated_records_out_and_says_how_many(tmp_path):
    out = tmp_path / "d.jsonl"
    done = _cli("synthesize", "--toolset", "store", "-n", "10", "--seed", "1", "-o", str(out), "--db",
                f"sqlite:///{tmp_path / 'd.db'}", "--drop-truncated")  # seed 1: 3 of the 10 are truncated
    assert done.returncode == 0, done.stderr
    truncated = int(done.stdout.split("(")[1].split()[0])
    assert truncated > 0 and f"left out of {out} by --drop-truncated" in done.stdout
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 10 - truncated and not any(r["meta"]["truncated"] for r in records)


def _options(parser: argparse.ArgumentParser):
    """(command, action) for every option and positional of every command, nested ones included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _options(sub)
        elif not isinstance(action, argparse._HelpAction):
            yield parser, action


def test_every_option_of_every_command_has_help_and_every_command_an_example():
    missing = [(p.prog, a.option_strings or a.dest) for p, a in _options(build_parser()) if not a.help]
    assert missing == []
    commands = {p.prog: p for p, _ in _options(build_parser())}
    assert "sap show" in commands and "sap cache synthesize" in commands
    assert [prog for prog, p in commands.items() if not (p.epilog or "").startswith("examples:")] == []


def test_version_prints_the_version(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out == f"sap {__version__}\n"


def test_model_under_test_has_its_own_flag_and_model_stays_a_deprecated_alias(capsys):
    args = build_parser().parse_args(["eval", "--assistant-model", "openai/x", "--data", "d.jsonl"])
    assert args.model == "openai/x"
    args = build_parser().parse_args(["eval", "--model", "openai/y", "--data", "d.jsonl"])
    assert args.model == "openai/y" and "--model is deprecated here; use --assistant-model" in capsys.readouterr().err
    args = build_parser().parse_args(["synthesize", "--toolset", "s", "-n", "1", "-o", "o", "--api-key-env", "K"])
    assert args.api_key_env == "K"


def test_show_prints_a_record_as_a_dialogue_with_provenance(tmp_path, capsys):
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in sap.synthesize("store", 2, seed=1).records))
    assert main(["show", str(path), "-i", "1"]) == 0
    text = capsys.readouterr().out
    record = json.loads(path.read_text().splitlines()[1])
    call = record["provenance"][0]
    assert text.startswith(f"# record 1  {record['id']}  (store, base")
    assert f"assistant calls {call['name']}(" in text and f": {next(iter(call['args'].values()))['tag']}" in text
    assert main(["show", str(path), "-i", "5"]) == 2


def test_progress_shows_counts_rate_eta_and_spend_and_logs_without_a_terminal():
    now = [0.0]
    stream = io.StringIO()
    progress = Progress(10, accepted=2, every=30.0, stream=stream, clock=lambda: now[0])
    progress.spent = lambda: 0.5
    for i, status in enumerate(["accepted", "truncated", "rejected", "accepted"]):
        now[0] += 10.0
        progress.slot(i, status)
    assert stream.getvalue().splitlines()[0].endswith(
        "4/10 accepted (1 truncated), 1 dropped | 0.1 records/s | ETA 1m30s | $0.5000")
    assert len(stream.getvalue().splitlines()) == 1  # one line per 30 s: at 30 s, not at 40 s
    quiet = io.StringIO()
    Progress(10, verbosity=0, stream=quiet, clock=lambda: now[0]).slot(0, "accepted")
    assert quiet.getvalue() == ""


def _stop_at(command: list[str], db: str, accepted: int, sig: signal.Signals) -> str:
    """Start `sap COMMAND`, send `sig` once the run has `accepted` records, and return its stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "sap.cli", *command], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    store, deadline = RunStore(db), time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        runs = store.runs()
        if runs and store.counts(runs[0].id).get("accepted", 0) >= accepted:
            break
        time.sleep(0.02)
    assert proc.poll() is None, f"the run ended before {accepted} records: {proc.communicate()}"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGKILL: -9}[sig], err
    return err


def test_ctrl_c_sigterm_and_kill_9_then_the_printed_hint_alone_give_the_bytes_of_an_uninterrupted_run(tmp_path):
    """A 200-record run stopped by Ctrl-C, its printed hint stopped by SIGTERM, that hint killed -9 (the hint is then
    `sap runs`' resume command), each at a random count: the last hint alone brings -o to the uninterrupted bytes."""
    import random

    n, db, out = 200, f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "data.jsonl"
    first, second, third = sorted(random.Random().sample(range(5, n - 20), 3))
    err = _stop_at(["synthesize", "--toolset", "store", "-n", str(n), "--seed", "9", "-o", str(out), "--db", db],
                   db, first, signal.SIGINT)
    hint = shlex.split(err.strip().splitlines()[-1].split("Continue with: ")[1].split(" (")[0])
    err = _stop_at(hint[1:], db, second, signal.SIGTERM)
    hint = shlex.split(err.strip().splitlines()[-1].split("Continue with: ")[1].split(" (")[0])
    _stop_at(hint[1:], db, third, signal.SIGKILL)
    (row,) = sap.list_runs(db)
    assert row["status"] == "interrupted", (row, first, second, third)
    done = _cli(*shlex.split(row["resume"])[1:], timeout=600)
    assert done.returncode == 0, (done.stderr, first, second, third)
    reference = tmp_path / "ref.jsonl"
    assert _cli("synthesize", "--toolset", "store", "-n", str(n), "--seed", "9", "-o", str(reference), "--db",
                f"sqlite:///{tmp_path / 'ref.db'}", timeout=600).returncode == 0
    assert len(out.read_text().splitlines()) == n and out.read_bytes() == reference.read_bytes(), (first, second, third)


@pytest.mark.parametrize("code, at_once", [(130, True), (143, True), (0, False), (2, False)])
def test_an_interrupted_command_ends_at_once_without_joining_left_threads(monkeypatch, code, at_once):
    """`sap` after Ctrl-C or SIGTERM ends with os._exit (a thread pool's worker started as the signal arrived would
    hold the interpreter's exit forever); any other code is a normal exit."""
    from importlib import import_module

    cli = import_module("sap.cli.main")  # the module (sap.cli exports its `main` function under the same name)
    ended: list[int] = []
    monkeypatch.setattr(cli, "main", lambda: code)
    monkeypatch.setattr(cli.os, "_exit", ended.append)
    with pytest.raises(SystemExit) as exited:
        cli.run()
    assert exited.value.code == code and ended == ([code] if at_once else [])
