"""A tiny MCP server over stdio (raw JSON-RPC lines) that misbehaves on demand: `fake_server.py MODE`, MODE one of
ok, hang (tools/call never answers), exit (dies mid-call), flood (writes non-JSON-RPC lines instead of answering),
malformed (tools/list gives a tool without an inputSchema), catalog (a stateless web API: `search` finds a product
whose id `get_item` reads). With FAKE_CALL_LOG set, each tools/call is appended to that file as one JSON line (its
params), so a test can count the calls that reached the server."""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time

MODE = sys.argv[1]
ECHO = {"name": "echo", "description": "Echo a text back.", "annotations": {"readOnlyHint": True},
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}
BROKEN = {"name": "broken", "description": "No input schema."}
SEARCH = {"name": "search", "description": "Search the catalog for products matching a query.",
          "annotations": {"readOnlyHint": True},
          "inputSchema": {"type": "object", "properties": {"query": {"type": "string", "description": "Search words."}},
                          "required": ["query"]}}
GET_ITEM = {"name": "get_item", "description": "Get the details of one product by its item id.",
            "annotations": {"readOnlyHint": True},
            "inputSchema": {"type": "object", "properties": {"item_id": {"type": "string",
                                                                         "description": "The product's item id."}},
                            "required": ["item_id"]}}
TOOLS = {"malformed": [ECHO, BROKEN], "catalog": [SEARCH, GET_ITEM]}


def catalog(name: str, args: dict) -> dict | None:
    """The catalog's answer (a function of the arguments alone; None: no such product)."""
    if name == "search":
        item = hashlib.sha256(args["query"].encode()).hexdigest()[:8]
        return {"results": [{"item_id": f"item-{item}", "name": f"{args['query']} deluxe"}]}
    if not args["item_id"].startswith("item-"):
        return None
    digits = int(hashlib.sha256(args["item_id"].encode()).hexdigest()[:6], 16)
    return {"item_id": args["item_id"], "price": round(digits % 10000 / 100, 2), "in_stock": digits % 3 > 0}


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
        return {"tools": TOOLS.get(MODE, [ECHO])}
    if method == "tools/call":
        if MODE == "hang":
            time.sleep(3600)
        if MODE == "exit":
            os._exit(3)
        if MODE == "flood":
            while True:
                sys.stdout.write("not json " * 100 + "\n")
        if os.environ.get("FAKE_CALL_LOG"):
            with open(os.environ["FAKE_CALL_LOG"], "a", encoding="utf-8") as log:
                log.write(json.dumps(request["params"]) + "\n")
        if MODE == "catalog":
            value = catalog(request["params"]["name"], request["params"]["arguments"])
            return {"content": [{"type": "text", "text": json.dumps(value) if value else "no such product"}],
                    "isError": value is None}
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
