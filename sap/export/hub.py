"""`sap export --push-to-hub NAME`: an export directory (hf, parquet or messages) pushed to the Hugging Face Hub
through `datasets`' own `push_to_hub`, with sap's dataset card committed first so that `datasets` merges its
configs and features into it. The Hub is huggingface_hub's endpoint (HF_ENDPOINT); the token comes from HF_TOKEN
or the variable `--hub-token-env` names, and is never printed or stored."""
from __future__ import annotations

import os
from pathlib import Path

from sap.errors import ExportError, UsageError
from sap.export.hf import require_datasets
from sap.llm.secrets import redact

PUSHED_FORMATS = ("hf", "parquet", "messages", "trl")
DEFAULT_TOKEN_ENV = "HF_TOKEN"


def hub_token(env_name: str | None) -> str:
    """The Hub token from the variable `env_name` (--hub-token-env), else HF_TOKEN; a UsageError naming the
    variable when it is unset."""
    name = env_name or DEFAULT_TOKEN_ENV
    token = os.environ.get(name)
    if not token:
        raise UsageError(f"--push-to-hub needs a Hub token in the environment variable {name}"
                         + ("" if env_name else " (or name another with --hub-token-env)"))
    return token


def push_export(out: Path, fmt: str, repo_id: str, token: str, private: bool) -> str:
    """Push the export directory `out` of format `fmt` to the dataset repo `repo_id` (created if missing, private
    with `private`): sap's card README.md first, then the splits as `datasets` loads them, through its
    push_to_hub; the URL of the last commit. Hub errors become one ExportError, the token redacted."""
    datasets = require_datasets()
    from huggingface_hub import HfApi
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()
    try:
        api = HfApi(endpoint=datasets.config.HF_ENDPOINT, token=token)
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        api.upload_file(path_or_fileobj=str(out / "README.md"), path_in_repo="README.md", repo_id=repo_id,
                        repo_type="dataset", commit_message="sap dataset card")
        data = datasets.load_from_disk(str(out)) if fmt == "hf" else datasets.load_dataset(str(out))
        commit = data.push_to_hub(repo_id, token=token, private=private, commit_message=f"sap export ({fmt})")
    except (OSError, ValueError) as exc:  # huggingface_hub's HTTP errors are OSErrors
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ExportError(redact(f"--push-to-hub {repo_id}: {type(exc).__name__}: {first}", token)) from None
    return commit.commit_url
