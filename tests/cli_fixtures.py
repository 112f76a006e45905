"""The `sap` command line as a subprocess, for the regression fixtures of tests/test_digests.py and
tests/test_checkpoint_compat.py.

Only the public surface is used, so that a refactor moving sap's modules changes nothing here: the console script
`sap` as this checkout's pyproject.toml declares it ([project.scripts]), run on this checkout's package
(PYTHONPATH=<repo root>, ahead of any installed copy), and the files it writes. Nothing from `sap` is imported.

Regeneration (only when the output is meant to change; say so in the commit):
    SAP_REGEN_DIGESTS=1 python -m pytest tests/test_digests.py
    SAP_REGEN_CHECKPOINT=1 python -m pytest tests/test_checkpoint_compat.py   (see that module's docstring first)
"""
from __future__ import annotations

import hashlib
import json
import operator
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"


def sap_argv(*args: str) -> list[str]:
    """The command line running `sap ARGS`: the entry point pyproject.toml declares for the `sap` script."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, attr = scripts["sap"].partition(":")
    operator.attrgetter(attr)  # a bad entry point fails here, not inside the child
    code = ("import operator, sys; from importlib import import_module; sys.argv[0] = 'sap'; "
            f"sys.exit(operator.attrgetter({attr!r})(import_module({module!r}))())")
    return [sys.executable, "-c", code, *args]


def sap_env() -> dict[str, str]:
    """The environment: this checkout's package first on the path (the venv may hold another editable copy)."""
    path = [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def sap(*args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run `sap ARGS` in `cwd` to its end; raise with its stderr if it fails."""
    done = subprocess.run(sap_argv(*args), cwd=cwd, env=sap_env(), capture_output=True, text=True, timeout=timeout,
                          check=False)
    if done.returncode != 0:
        raise AssertionError(f"sap {' '.join(args)} exited {done.returncode}\nstdout:\n{done.stdout}\n"
                             f"stderr:\n{done.stderr}")
    return done


def sap_popen(*args: str, cwd: Path) -> subprocess.Popen:
    """Start `sap ARGS` in `cwd` without waiting (its own process, so it can be killed by pid)."""
    return subprocess.Popen(sap_argv(*args), cwd=cwd, env=sap_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def fill(args: list[str], **values: str) -> list[str]:
    """`args` with each placeholder {name} replaced by values[name] (`{db}`, `{output}`, `{run}`)."""
    out = []
    for arg in args:
        for name, value in values.items():
            arg = arg.replace("{" + name + "}", value)
        out.append(arg)
    return out


def file_digests(path: Path, key: str | None) -> dict[str, Any]:
    """A JSONL file as {count, sha256: one per line (the line's bytes without its newline), keys: each line's
    `key` field (for telling which line differs)}. A file not ending in a newline is refused."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    if lines[-1] != b"":
        raise AssertionError(f"{path}: does not end with a newline")
    lines = lines[:-1]
    return {"count": len(lines), "sha256": [hashlib.sha256(line).hexdigest() for line in lines],
            "keys": [json.loads(line).get(key) for line in lines] if key else []}


def output_digests(output: Path) -> dict[str, Any]:
    """The digests of what `sap synthesize/resume -o OUTPUT` writes: OUTPUT (records, keyed by record id) and
    OUTPUT.rejections.jsonl (keyed by slot index)."""
    return {"records": file_digests(output, "id"),
            "rejections": file_digests(Path(f"{output}.rejections.jsonl"), "index")}


def assert_same_digests(actual: dict[str, Any], expected: dict[str, Any], what: str) -> None:
    """Equal line counts and per-line sha256, with the first differing line named in the failure."""
    for part in ("records", "rejections"):
        got, want = actual[part], expected[part]
        if got["sha256"] == want["sha256"] and got["count"] == want["count"]:
            continue
        first = next((i for i, (a, b) in enumerate(zip(got["sha256"], want["sha256"])) if a != b),
                     min(got["count"], want["count"]))
        key_got, key_want = (d["keys"][first] if first < len(d["keys"]) else "<none>" for d in (got, want))
        raise AssertionError(f"{what}: {part} differ: {got['count']} lines, expected {want['count']}; first "
                             f"difference at line {first} (got {key_got!r}, expected {key_want!r})")


def git_head() -> dict[str, Any]:
    """The commit the fixtures are generated from, and whether sap's sources differ from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

    return {"commit": git("rev-parse", "HEAD"),
            "sap_sources_clean": git("status", "--porcelain", "--", "sap", "pyproject.toml") == ""}


def write_json(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1) + "\n")
