"""A tiny MCP server over stdio (raw JSON-RPC lines) that misbehaves on demand: `fake_server.py MODE`, MODE one of
ok, hang (tools/call never answers), exit (dies mid-call), flood (writes non-JSON-RPC lines instead of answering),
malformed (tools/list gives a tool without an inputSchema)."""
from __future__ import annotations

import json
import os
import sys
import time

MODE = sys.argv[1]
ECHO = {"name": "echo", "description": "Echo a text back.", "annotations": {"readOnlyHint": True},
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}
BROKEN = {"name": "broken", "description": "No input schema."}


def send(message: dict) -> None:
    """Write one JSON-RPC message line."""
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request: dict) -> dict | None:
    """The result of one request (None: do not answer)."""
    method = request["method"]
    if method == "initialize":
        return {"protocolVersion": request["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": f"fake-{MODE}", "version": "1"}}
    if method == "tools/list":
        return {"tools": [ECHO, BROKEN] if MODE == "malformed" else [ECHO]}
    if method == "tools/call":
        if MODE == "hang":
            time.sleep(3600)
        if MODE == "exit":
            os._exit(3)
        if MODE == "flood":
            while True:
                sys.stdout.write("not json " * 100 + "\n")
        text = request["params"]["arguments"]["text"]
        return {"content": [{"type": "text", "text": text}], "isError": text == "fail"}
    return None


for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    result = answer(message)
    if result is None:
        send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "method not found"}})
    else:
        send({"jsonrpc": "2.0", "id": message["id"], "result": result})
