"""The LangGraph checkpointer for a run database URL: SQLite (default) or PostgreSQL (extra `postgres`)."""
from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Any, Iterator

from sap.store.runs import SETUP_LOCK, StoreError, sqlite_path


def psycopg_errors() -> tuple[type[BaseException], ...]:
    """psycopg's connection-level errors (an empty tuple if psycopg is absent)."""
    try:
        import psycopg
    except ImportError:
        return ()
    return (psycopg.OperationalError,)


@contextmanager
def checkpointer_for(url: str, full_sync: bool = False) -> Iterator[Any]:
    """A checkpointer on the same database as the run store, closed on exit."""
    path = sqlite_path(url)
    if path is not None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(f"PRAGMA synchronous={'FULL' if full_sync else 'NORMAL'}")
                conn.execute("PRAGMA busy_timeout=5000")
                saver = SqliteSaver(conn)
                saver.setup()
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"{url}: cannot use this database for checkpoints: {exc}") from exc
            yield saver  # errors while the run uses the saver pass through as they are (disk full, locked)
        finally:
            conn.close()
        return
    if url.startswith(("postgresql", "postgres")):
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
        except ImportError:
            raise StoreError("PostgreSQL needs the postgres extra: pip install 'sap-synth[postgres]'") from None
        conninfo = url.replace("postgresql+psycopg://", "postgresql://")
        try:
            with PostgresSaver.from_conn_string(conninfo) as saver:
                with saver.conn.cursor() as cur:  # concurrent workers must not race to run the migrations
                    cur.execute(f"SELECT pg_advisory_lock({SETUP_LOCK + 1})")
                    try:
                        saver.setup()
                    finally:
                        cur.execute(f"SELECT pg_advisory_unlock({SETUP_LOCK + 1})")
                yield saver
        except psycopg_errors() as exc:
            raise StoreError(f"{url}: PostgreSQL is not usable: {exc}") from exc
        return
    raise StoreError(f"unsupported database URL {url!r}: use sqlite:///FILE or postgresql://...")
