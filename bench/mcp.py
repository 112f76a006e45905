"""MCP executor speed: calls per second through an MCP server beside direct Python calls of the same work, the same
calls in recorded mode (made live and recorded, then answered from the recorded cache), and the cost of a reset per slot by each strategy (`restart`: fresh working directory and fresh server processes;
`directory`: the directory rebuilt under running servers).

The call figures use the echo tool of tests/mcp_servers/fake_server.py beside the same echo as a Python class run by
the PythonObjectExecutor; the reset figures use the filesystem and git servers over a git repository from c0 when
they are installed (tests/.mcp, mcp-server-git), else the fake server alone. Figures last, as one JSON line.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# this file is bench/mcp.py: run as a script, its directory must not shadow the `mcp` package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from sap.executors import PythonObjectExecutor  # noqa: E402 (after the path fix above)
from sap.model import Executor, ToolCall  # noqa: E402
from sap.toolsets import load_toolset  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FAKE = ROOT / "tests" / "mcp_servers" / "fake_server.py"
FS_SERVER = ROOT / "tests" / ".mcp" / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"


class Echo:
    """The fake server's echo tool as a Python class."""

    def echo(self, text: str) -> str:
        """Give the text back."""
        return text


def calls_per_s(ex: Executor, n: int) -> float:
    """Echo calls per second through `ex`."""
    ex.reset({})
    start = time.perf_counter()
    for i in range(n):
        ex.execute(ToolCall(call_id=str(i), name="echo", args_exec={"text": f"hello {i}"}, args_prov={}))
    return n / (time.perf_counter() - start)


def config(where: Path, servers: dict[str, Any], **own: Any) -> str:
    """An mcp: toolset name for a config file written in `where`."""
    path = where / f"servers-{len(list(where.iterdir()))}.json"
    path.write_text(json.dumps({"mcpServers": servers, "sap": own}))
    return f"mcp:{path}"


def reset_s(name: str, resets: int) -> float:
    """Mean seconds per reset (after the first) of an executor of toolset `name`, with one call after each."""
    toolset = load_toolset(name)
    ex = toolset.executor_factory()
    try:
        c0 = toolset.sample_config(0)
        ex.reset(c0)
        start = time.perf_counter()
        for _ in range(resets):
            ex.reset(c0)
        return (time.perf_counter() - start) / resets
    finally:
        ex.close()


def main() -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--resets", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        fake = {"fake": {"command": sys.executable, "args": [str(FAKE), "ok"]}}
        mcp_ex = load_toolset(config(where, fake, timeout=30)).executor_factory()
        try:
            through_mcp = calls_per_s(mcp_ex, args.calls)
        finally:
            mcp_ex.close()
        direct = calls_per_s(PythonObjectExecutor([Echo]), args.calls)
        recorded_ex = load_toolset(config(where, fake, timeout=30, record={"cache": "echo"})).executor_factory()
        try:  # the first pass goes live and records every call; the second is answered from the cache
            recording, replaying = calls_per_s(recorded_ex, args.calls), calls_per_s(recorded_ex, args.calls)
            counts = {"answered": recorded_ex.cache.answered, "live": recorded_ex.cache.live}
        finally:
            recorded_ex.close()
        real = FS_SERVER.is_file()
        if real:
            servers = {"fs": {"command": "node", "args": [str(FS_SERVER), "{workdir}"]},
                       "git": {"command": sys.executable, "args": ["-m", "mcp_server_git", "--repository", "{workdir}"]}}
            own = {"state": "git", "timeout": 30}
        else:
            servers, own = fake, {"state": "files", "timeout": 30}
        restart = reset_s(config(where, servers, **own, reset="restart"), args.resets)
        directory = reset_s(config(where, servers, **own, reset="directory"), args.resets)
    label = "filesystem+git" if real else "fake"
    print(f"echo through MCP   {through_mcp:>10,.0f} calls/s")
    print(f"echo direct Python {direct:>10,.0f} calls/s  ({direct / through_mcp:.0f}x)")
    print(f"recorded mode      {recording:>10,.0f} calls/s live and recorded, {replaying:,.0f} calls/s from the "
          f"cache ({replaying / through_mcp:.0f}x live; {counts['live']} live, {counts['answered']} from the cache)")
    print(f"reset per slot ({label}): restart {restart * 1000:.0f} ms, directory {directory * 1000:.0f} ms")
    print(json.dumps({"bench": "mcp", "mcp_calls_per_s": round(through_mcp), "direct_calls_per_s": round(direct),
                      "direct_over_mcp": round(direct / through_mcp, 1),
                      "recorded_live_calls_per_s": round(recording), "recorded_cache_calls_per_s": round(replaying),
                      "reset_servers": label,
                      "reset_restart_ms": round(restart * 1000, 1), "reset_directory_ms": round(directory * 1000, 1),
                      "calls": args.calls, "resets": args.resets}))


if __name__ == "__main__":
    main()
