"""`sap serve-env`: sap tasks as live RL environments over HTTP (see sap.envs.server for the API); `sap verl-config`:
the tool and interaction config files of verl's multi-turn agent loop for a toolset (see sap.envs.verl)."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from sap.cli.common import db_url
from sap.errors import UsageError


def add_serve_env_args(p: argparse.ArgumentParser) -> None:
    """The options of `sap serve-env`."""
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", help="sap records (JSONL from sap synthesize) or a BFCL multi-turn question file")
    source.add_argument("--run", help="a run id: serve its accepted records from --db")
    p.add_argument("--db", type=db_url, default="sqlite:///sap.db", help="run database URL of --run")
    p.add_argument("--answers", help="BFCL possible_answer file (default: possible_answer/<same name> beside --data)")
    p.add_argument("--toolset", help="toolset of every sap record (default: each record's meta.toolset)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=int, default=8765, help="port to listen on (0: any free port)")
    p.add_argument("--max-sessions", type=int, default=1024, help="episodes open at once")
    p.add_argument("--max-steps", type=int, default=8, help="assistant messages per turn before the turn is cut")


def run_serve_env(args: argparse.Namespace) -> int:
    """Load the tasks and serve them until interrupted."""
    from sap.envs import EnvServer, TaskCatalog

    if args.run and args.answers:
        raise UsageError("--answers goes with --data (a BFCL question file), not --run")
    catalog = TaskCatalog.from_run(args.db, args.run, args.toolset) if args.run else \
        TaskCatalog.from_file(args.data, args.answers, args.toolset)
    server = EnvServer(catalog, args.host, args.port, args.max_sessions, args.max_steps)
    print(f"serving {len(catalog)} tasks of {catalog.source} at {server.url} "
          "(GET /tasks, POST /reset /step /close; Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.server_close()
    return 0


def run_verl_config(args: argparse.Namespace) -> int:
    """Write tool_config.yaml and interaction_config.yaml for the toolset (verl itself is not needed for this)."""
    from sap.envs.verl_config import write_verl_configs

    for path in write_verl_configs(args.toolset, args.output, args.reward):
        print(path)
    return 0


def add_commands(sub: Any) -> None:
    """Register `sap serve-env` and `sap verl-config`."""
    p = sub.add_parser("serve-env", help="serve sap tasks as RL environments over HTTP (reset, step, reward)")
    add_serve_env_args(p)
    p.set_defaults(fn=run_serve_env)
    p = sub.add_parser("verl-config", help="write verl's tool and interaction config files for a toolset")
    p.add_argument("--toolset", required=True, help="the toolset whose tools verl offers (built-in name or path)")
    p.add_argument("-o", "--output", required=True, help="directory for tool_config.yaml and interaction_config.yaml")
    p.add_argument("--reward", choices=("progress", "graduated"), default="progress",
                   help="the episode reward verl trains on (both are computed; default: progress)")
    p.set_defaults(fn=run_verl_config)
