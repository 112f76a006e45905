"""Shared fixtures: every test runs in its own empty working directory (the CLI's default run database lives
there); a fresh database on the PostgreSQL test server for tests that ask for one."""
from __future__ import annotations

import os
import secrets
from typing import Iterator

import pytest

PG_URL = os.environ.get("SAP_TEST_PG_URL")


@pytest.fixture(autouse=True)
def _own_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def pg_db() -> Iterator[str]:
    """The URL of a fresh database on the test server (SAP_TEST_PG_URL), dropped afterwards; skips without one."""
    if not PG_URL:
        pytest.skip("SAP_TEST_PG_URL is not set (no PostgreSQL server to test on)")
    import psycopg

    name = f"sap_test_{secrets.token_hex(4)}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield PG_URL.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
