"""Shared fixtures: every test runs in its own empty working directory (the CLI's default run database lives there)."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _own_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
