"""The LangGraph checkpointer for a run database URL: SQLite (default) or PostgreSQL (extra `postgres`)."""
from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Any, Iterator

from sap.store.runs import StoreError, sqlite_path


@contextmanager
def checkpointer_for(url: str, full_sync: bool = False) -> Iterator[Any]:
    """A checkpointer on the same database as the run store, closed on exit."""
    path = sqlite_path(url)
    if path is not None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={'FULL' if full_sync else 'NORMAL'}")
            conn.execute("PRAGMA busy_timeout=5000")
            saver = SqliteSaver(conn)
            saver.setup()
            yield saver
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{url}: cannot use this database for checkpoints: {exc}") from exc
        finally:
            conn.close()
        return
    if url.startswith(("postgresql", "postgres")):
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
        except ImportError:
            raise StoreError("PostgreSQL needs the postgres extra: pip install 'sap-synth[postgres]'") from None
        conninfo = url.replace("postgresql+psycopg://", "postgresql://")
        with PostgresSaver.from_conn_string(conninfo) as saver:
            saver.setup()
            yield saver
        return
    raise StoreError(f"unsupported database URL {url!r}: use sqlite:///FILE or postgresql://...")
