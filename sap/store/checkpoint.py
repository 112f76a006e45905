"""The LangGraph checkpointer for a run database URL: SQLite (default) or PostgreSQL (extra `postgres`, over a
connection pool that replaces dropped connections), reading checkpoints strictly (plain data only: a crafted row
cannot make a resume import and call code)."""
from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Any, Iterator

from sap.store.runs import SETUP_LOCK, SQLITE_BUSY_MS, StoreError, db_retry, psycopg_errors, sqlite_path

POOL_SIZE = 2  # the saver lets one thread at a time use the database; a second connection stands by for a reconnect


def strict_serde() -> Any:
    """LangGraph's serializer with msgpack extension types limited to its built-in safe list (datetime, UUID,
    Decimal, sets, ...). sap's graph state is plain JSON, so nothing it writes needs more; LangGraph's default
    would import and call any module attribute a checkpoint row names."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    return JsonPlusSerializer(allowed_msgpack_modules=None)


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
                conn.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
                saver = SqliteSaver(conn, serde=strict_serde())
                saver.setup()
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"{url}: cannot use this database for checkpoints: {exc}") from exc
            yield saver  # errors while the run uses the saver pass through as they are (disk full, locked)
        finally:
            conn.close()
        return
    if url.startswith(("postgresql", "postgres")):
        try:
            from psycopg import Connection
            from psycopg.rows import dict_row
            from psycopg_pool import ConnectionPool

            saver_class = retrying_postgres_saver()
        except ImportError:
            raise StoreError("PostgreSQL needs the postgres extra: pip install 'sap-synth[postgres]'") from None
        conninfo = url.replace("postgresql+psycopg://", "postgresql://")
        options = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        try:
            with Connection.connect(conninfo, **options) as conn:
                with conn.cursor() as cur:  # concurrent workers must not race to run the migrations
                    cur.execute(f"SELECT pg_advisory_lock({SETUP_LOCK + 1})")
                    try:
                        saver_class(conn, serde=strict_serde()).setup()
                    finally:
                        cur.execute(f"SELECT pg_advisory_unlock({SETUP_LOCK + 1})")
        except psycopg_errors() as exc:
            raise StoreError(f"{url}: PostgreSQL is not usable: {exc}") from exc
        # a connection the server dropped (restart, pg_terminate_backend) fails the check and is replaced
        with ConnectionPool(conninfo, min_size=1, max_size=POOL_SIZE, kwargs=options,
                            check=ConnectionPool.check_connection, name="sap-checkpoints") as pool:
            yield saver_class(pool, serde=strict_serde())
        return
    raise StoreError(f"unsupported database URL {url!r}: use sqlite:///FILE or postgresql://...")


def retrying_postgres_saver() -> type:
    """PostgresSaver whose reads and writes are retried with backoff while the database reconnects (each is
    idempotent: writes are upserts, deletes of a thread)."""
    from langgraph.checkpoint.postgres import PostgresSaver

    class RetryingPostgresSaver(PostgresSaver):
        """A PostgresSaver that outlives dropped connections."""

        get_tuple = db_retry(PostgresSaver.get_tuple)
        put = db_retry(PostgresSaver.put)
        put_writes = db_retry(PostgresSaver.put_writes)
        delete_thread = db_retry(PostgresSaver.delete_thread)

    return RetryingPostgresSaver
