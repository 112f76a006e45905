"""LocalHub: a local HTTP server that plays the few Hugging Face Hub endpoints `datasets`' `push_to_hub` calls
through huggingface_hub for a small dataset (repo info and creation, pre-upload, the LFS batch API with basic
uploads, tree and paths-info listings, file downloads and commits), keeping each dataset repo's files in memory."""
from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SHA_ZERO = "0" * 40


class LocalHub:
    """The Hub at `endpoint` (127.0.0.1, a free port): dataset repos by id, their committed files (path -> bytes),
    the token each request carried, and every request line not served (for a failing test to name)."""

    def __init__(self) -> None:
        self.repos: dict[str, dict[str, bytes]] = {}
        self.private: dict[str, bool] = {}
        self.created: list[dict[str, Any]] = []  # the create-repo request bodies
        self.commits: dict[str, list[str]] = {}
        self.uploads: dict[str, bytes] = {}  # LFS objects by sha256
        self.tokens: set[str] = set()
        self.unserved: list[str] = []
        self.lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        """The base URL to give huggingface_hub (HF_ENDPOINT)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def close(self) -> None:
        """Stop serving."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> LocalHub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def sha(self, repo: str) -> str:
        """The repo's head commit id."""
        return self.commits[repo][-1] if self.commits.get(repo) else SHA_ZERO

    def commit(self, repo: str, body: bytes) -> dict[str, Any]:
        """Apply an NDJSON commit (header, file, lfsFile, deletedFile lines) to `repo`; the commit's answer."""
        files = self.repos[repo]
        for line in body.splitlines():
            op = json.loads(line)
            value = op.get("value", {})
            if op["key"] == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif op["key"] == "lfsFile":
                files[value["path"]] = self.uploads[value["oid"]]
            elif op["key"] in ("deletedFile", "deletedFolder"):
                prefix = value["path"].rstrip("/")
                for path in [p for p in files if p == prefix or p.startswith(prefix + "/")]:
                    del files[path]
        oid = hashlib.sha1(body + self.sha(repo).encode()).hexdigest()
        self.commits.setdefault(repo, []).append(oid)
        return {"commitUrl": f"{self.endpoint}/datasets/{repo}/commit/{oid}", "commitOid": oid,
                "pullRequestUrl": None}

    def entries(self, repo: str, prefix: str, recursive: bool) -> list[dict[str, Any]]:
        """The tree entries under `prefix` (files and the folders on their paths), as the tree API lists them."""
        prefix = prefix.strip("/")
        out: dict[str, dict[str, Any]] = {}
        for path, data in sorted(self.repos[repo].items()):
            if prefix and not path.startswith(prefix + "/"):
                continue
            rest = path[len(prefix) + 1:] if prefix else path
            parts = rest.split("/")
            for depth in range(1, len(parts)):
                folder = "/".join(([prefix] if prefix else []) + parts[:depth])
                out.setdefault(folder, {"type": "directory", "path": folder, "oid": SHA_ZERO})
                if not recursive:
                    break
            if recursive or len(parts) == 1:
                out[path] = file_entry(path, data)
        return list(out.values())

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None,
                      raw: bytes | None = None) -> None:
                payload = raw if raw is not None else json.dumps(body if body is not None else {}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if raw is None else "application/octet-stream")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))

            def _route(self) -> None:
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Bearer "):
                    hub.tokens.add(auth[len("Bearer "):])
                path, _, query = self.path.partition("?")
                body = self._body() if self.command in ("POST", "PUT") else b""
                with hub.lock:
                    if not self._serve(path, query, body):
                        hub.unserved.append(f"{self.command} {self.path}")
                        self._send(404, {"error": f"LocalHub does not serve {self.command} {path}"},
                                   {"X-Error-Code": "EntryNotFound"})

            do_GET = do_POST = do_PUT = do_HEAD = _route

            def _serve(self, path: str, query: str, body: bytes) -> bool:
                """Answer the request if it is one of the Hub endpoints played here; False if it is not."""
                if self.command == "POST" and path == "/api/repos/create":
                    spec = json.loads(body)
                    hub.created.append(spec)
                    repo = f"{spec['organization']}/{spec['name']}" if spec.get("organization") else spec["name"]
                    hub.repos.setdefault(repo, {})
                    hub.private[repo] = spec.get("visibility") == "private" or bool(spec.get("private"))
                    self._send(200, {"url": f"{hub.endpoint}/datasets/{repo}", "name": repo, "id": repo})
                    return True
                if self.command == "POST" and path == "/api/validate-yaml":  # the README card's metadata
                    content = json.loads(body).get("content", "")
                    errors = [] if content.startswith("---\n") else [{"message": "no YAML header"}]
                    self._send(400 if errors else 200, {"errors": errors, "warnings": []})
                    return True
                if self.command == "PUT" and path.startswith("/lfs-upload/"):
                    oid = path.rsplit("/", 1)[1]
                    if hashlib.sha256(body).hexdigest() != oid:
                        self._send(400, {"error": "oid does not match the content"})
                    else:
                        hub.uploads[oid] = body
                        self._send(200)
                    return True
                if match := re.fullmatch(r"/datasets/(.+?/.+?)\.git/info/lfs/objects/batch", path):
                    request = json.loads(body)
                    self._send(200, {"transfer": "basic", "objects": [
                        {"oid": o["oid"], "size": o["size"], "authenticated": True,
                         "actions": {"upload": {"href": f"{hub.endpoint}/lfs-upload/{o['oid']}"}}}
                        for o in request["objects"]]}, {"Content-Type": "application/vnd.git-lfs+json"})
                    return True
                if match := re.fullmatch(r"/datasets/(.+?/.+?)/resolve/([^/]+)/(.+)", path):
                    repo, _, file = match.groups()
                    data = hub.repos.get(repo, {}).get(file)
                    if data is None:
                        self._send(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})
                    else:
                        self._send(200, raw=data, headers={"X-Repo-Commit": hub.sha(repo),
                                                           "ETag": f'"{hashlib.sha1(data).hexdigest()}"'})
                    return True
                match = re.fullmatch(r"/api/datasets/([^/]+/[^/]+)(?:/(\w[\w-]*)(?:/([^/]+))?(/.*)?)?", path)
                if not match:
                    return False
                repo, action, revision, rest = match.groups()
                if repo not in hub.repos:
                    self._send(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
                    return True
                if action in (None, "revision"):
                    self._send(200, {"id": repo, "sha": hub.sha(repo), "private": hub.private.get(repo, False),
                                     "siblings": [{"rfilename": p} for p in sorted(hub.repos[repo])]})
                elif action == "preupload":
                    files = json.loads(body)["files"]
                    self._send(200, {"files": [{"path": f["path"], "shouldIgnore": False,
                                                "uploadMode": "regular" if f["path"].endswith(".md") else "lfs"}
                                               for f in files]})
                elif action == "commit":
                    self._send(200, hub.commit(repo, body))
                elif action == "tree":
                    folder = (rest or "").strip("/")
                    if folder and not any(p.startswith(folder + "/") for p in hub.repos[repo]):
                        self._send(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})
                    else:
                        self._send(200, hub.entries(repo, folder, "recursive=true" in query.lower()))
                elif action == "paths-info":
                    paths = parse_paths(body, self.headers.get("Content-Type", ""))
                    files = hub.repos[repo]
                    found = [file_entry(p, files[p]) for p in paths if p in files]
                    found += [{"type": "directory", "path": p.strip("/"), "oid": SHA_ZERO} for p in paths
                              if p not in files and any(f.startswith(p.strip("/") + "/") for f in files)]
                    self._send(200, found)
                else:
                    return False
                return True

        return Handler


def file_entry(path: str, data: bytes) -> dict[str, Any]:
    """A tree / paths-info entry of one file."""
    return {"type": "file", "path": path, "size": len(data), "oid": hashlib.sha1(data).hexdigest(),
            "lfs": {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}}


def parse_paths(body: bytes, content_type: str) -> list[str]:
    """The `paths` of a paths-info request (form-encoded or JSON)."""
    if "json" in content_type:
        return list(json.loads(body).get("paths", []))
    from urllib.parse import parse_qs

    return parse_qs(body.decode()).get("paths", [])
