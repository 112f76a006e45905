"""The run store: runs, slots, records and rejections in SQLAlchemy on the run's database URL."""
from __future__ import annotations

import errno
import os
import secrets
import shlex
import socket
import sqlite3
import threading
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterator

from sqlalchemy import and_, create_engine, delete, event, func, inspect, or_, select, text, update
from sqlalchemy.exc import DatabaseError, DBAPIError, OperationalError
from sqlalchemy.orm import Session, sessionmaker
from tenacity import retry, retry_if_exception, stop_after_delay, wait_exponential

from sap.drops import DropReason
from sap.errors import StoreError
from sap.llm.usage import UsageLedger
from sap.store.schema import (
    SCHEMA_VERSION,
    Base,
    FSMRow,
    PoolRow,
    PoolTaskRow,
    RecordRow,
    RejectionRow,
    RunOutputRow,
    RunRow,
    RunSourceRow,
    SchemaInfo,
    SlotRow,
    UsageRow,
)

DB_RETRY_SECONDS = 120.0  # a busy, locked or reconnecting database is retried this long before the run stops
RECORD_BATCH = 20  # records fetched at a time by iter_records (a decoded record takes 100-250 KB)
SQLITE_BUSY_MS = 30_000  # SQLite waits this long for another connection's lock before a retry
# tables that may share a run database with sap's: LangGraph's checkpointer
CHECKPOINT_TABLES = frozenset({"checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations",
                               "writes"})
SETUP_LOCK = 7_253_010  # PostgreSQL advisory locks held while creating tables: this key (run store), +1 (checkpointer)


class RunConflict(StoreError):
    """Another worker holds the run (SQLite allows one process per run at a time)."""


def _now() -> datetime:
    """The current UTC time without tzinfo (stored the same way on every backend)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _worker_alive(worker: str) -> bool:
    """False only when `worker` (host:pid, or host:pid#n) is a process of this host that no longer exists."""
    host, _, pid = worker.partition("#")[0].rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(int(pid))


def _is_zombie(pid: int) -> bool:
    """Whether process `pid` has exited but not been reaped yet (Linux /proc: state Z); False where unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether `exc` or an error it wraps (`orig`, `__cause__`) is SQLITE_FULL, PostgreSQL's 53100 or ENOSPC."""
    while exc is not None:
        code = getattr(exc, "sqlite_errorcode", None)
        if ((isinstance(exc, OSError) and exc.errno == errno.ENOSPC) or getattr(exc, "sqlstate", None) == "53100"
                or (code is not None and code & 0xFF == sqlite3.SQLITE_FULL)):
            return True
        exc = getattr(exc, "orig", None) or exc.__cause__
    return False


def psycopg_errors() -> tuple[type[BaseException], ...]:
    """psycopg's connection-level errors, subclasses included (AdminShutdown, a pool's PoolTimeout); an empty
    tuple if psycopg is absent."""
    try:
        import psycopg
    except ImportError:
        return ()
    return (psycopg.OperationalError,)


def is_transient_db_error(exc: BaseException) -> bool:
    """Whether `exc` is a database state that passes: SQLite busy or locked, a PostgreSQL connection that was
    dropped (restart, pg_terminate_backend), or psycopg's OperationalError (or a subclass) from the checkpointer."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    if isinstance(exc, (OperationalError, sqlite3.OperationalError, *psycopg_errors())):
        text = str(getattr(exc, "orig", None) or exc).lower()
        return any(word in text for word in ("locked", "busy", "terminat", "connection", "server closed", "shut"))
    return False


db_retry = retry(retry=retry_if_exception(is_transient_db_error), stop=stop_after_delay(DB_RETRY_SECONDS),
                 wait=wait_exponential(multiplier=0.05, max=2.0), reraise=True)
"""Retry a store call whose database is busy, locked or reconnecting, with backoff, for up to DB_RETRY_SECONDS."""


def sqlalchemy_url(url: str) -> str:
    """The SQLAlchemy form of a run database URL (PostgreSQL through psycopg 3)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def sqlite_path(url: str) -> str | None:
    """The file path of a `sqlite:///PATH` URL, else None."""
    return url[len("sqlite:///"):] if url.startswith("sqlite:///") else None


def missing_database(url: str) -> str | None:
    """The file of a `sqlite:///PATH` URL when it does not exist (opening it would create it), else None."""
    path = sqlite_path(url)
    return path if path and path != ":memory:" and not os.path.exists(path) else None


def existing_store(url: str) -> RunStore:
    """The run store of `url`, for reading: a StoreError naming the file if that SQLite database does not exist."""
    if path := missing_database(url):
        raise StoreError(f"no run database at {path} (--db {url})")
    return RunStore(url)


def resume_command(run_id: str, db: str, toolset_source: str | None = None, output: str | None = None) -> str:
    """The command line that continues run `run_id` of database `db`: with `--toolset` when the toolset came from a
    file (a stored run names its toolset, not the file), and `-o` when given `output`."""
    words = ["sap", "resume", run_id, "--db", db]
    words += ["--toolset", toolset_source] if toolset_source else []
    words += ["-o", output] if output else []
    return shlex.join(words)


class RunStore:
    """Access to one run database; every write is one short transaction."""

    def __init__(self, url: str, full_sync: bool = False) -> None:
        self.url = url
        self.single_process = url.startswith("sqlite")  # SQLite: one process per run; PostgreSQL: many workers
        # slot threads of this process claim one at a time: on SQLite a read-then-write transaction cannot wait
        # for another's write (WAL snapshot), so claims are serialized here instead
        self._claim_lock = threading.Lock()
        try:
            self.engine = create_engine(sqlalchemy_url(url), pool_pre_ping=True)
        except Exception as exc:  # a malformed URL or a missing driver
            raise StoreError(f"cannot open run database {url!r}: {exc}") from exc
        if url.startswith("sqlite"):
            @event.listens_for(self.engine, "connect")
            def _pragmas(conn: Any, _: Any) -> None:
                cur = conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute(f"PRAGMA synchronous={'FULL' if full_sync else 'NORMAL'}")
                cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
                cur.close()
        self.session = sessionmaker(self.engine, expire_on_commit=False)
        try:
            with self.engine.begin() as conn:
                if not self.single_process:  # workers starting together must not race to create the tables
                    conn.execute(text(f"SELECT pg_advisory_xact_lock({SETUP_LOCK})"))
                tables = set(inspect(conn).get_table_names())
                foreign = sorted(t for t in tables if not t.startswith("sap_") and t not in CHECKPOINT_TABLES)
                if foreign and "sap_schema" not in tables:
                    raise StoreError(f"{url} is not a sap run database: it holds tables of another program "
                                     f"({', '.join(foreign[:5])}); give --db a new or sap's own database")
                Base.metadata.create_all(conn)
                if "kind" not in {c["name"] for c in inspect(conn).get_columns("sap_rejections")}:  # made before kinds
                    conn.execute(text("ALTER TABLE sap_rejections ADD COLUMN kind VARCHAR(64)"))
            with self.session.begin() as s:
                info = s.get(SchemaInfo, 1)
                if info is None:
                    s.add(SchemaInfo(id=1, version=SCHEMA_VERSION))
                elif info.version != SCHEMA_VERSION:
                    raise StoreError(f"{url}: run database schema version {info.version}, this sap needs "
                                     f"{SCHEMA_VERSION}")
        except (DatabaseError, OperationalError) as exc:
            raise StoreError(f"{url}: cannot use this database: {exc.orig}") from exc

    def _tx(self) -> Session:
        """A session in a transaction (use as a context manager)."""
        return self.session.begin()

    def create_run(self, toolset: str, config: dict[str, Any], seed: int, target: int, fingerprint: str,
                   parts: dict[str, Any], fsm: dict[str, Any], source: str | None = None) -> str:
        """Record a new run with its verified FSM (and the file its toolset loads from, `source`); its id."""
        run_id = f"run-{secrets.token_hex(4)}"
        with self._tx() as s:
            s.add(RunRow(id=run_id, created=_now(), toolset=toolset, config=config, seed=seed, target=target,
                         fingerprint=fingerprint, fingerprint_parts=parts, status="running"))
            s.flush()  # the run row first: the FSM and source rows refer to it
            s.add(FSMRow(run_id=run_id, fsm=fsm))
            if source:
                s.add(RunSourceRow(run_id=run_id, source=source))
        return run_id

    @db_retry
    def run(self, run_id: str) -> RunRow:
        """The run `run_id`; StoreError listing the known runs if there is none."""
        with self.session() as s:
            row = s.get(RunRow, run_id)
            if row is None:
                known = [r for (r,) in s.execute(select(RunRow.id).order_by(RunRow.created))]
                raise StoreError(f"no run {run_id!r} in {self.url}; runs: {', '.join(known) or 'none'}")
            return row

    @db_retry
    def set_output(self, run_id: str, path: str, drop_truncated: bool = False) -> None:
        """Remember the file run `run_id` writes (as an absolute path), so `sap resume` can bring it to the full count."""
        with self._tx() as s:
            s.merge(RunOutputRow(run_id=run_id, path=os.path.abspath(path), drop_truncated=drop_truncated))

    @db_retry
    def set_toolset_source(self, run_id: str, source: str) -> None:
        """Remember the file run `run_id`'s toolset loads from (`Toolset.source`), for its resume command."""
        with self._tx() as s:
            s.merge(RunSourceRow(run_id=run_id, source=source))

    @db_retry
    def toolset_source(self, run_id: str) -> str | None:
        """The file run `run_id`'s toolset loads from, if it came from one."""
        with self.session() as s:
            row = s.get(RunSourceRow, run_id)
            return row.source if row else None

    def resume_command(self, run_id: str, output: str | None = None) -> str:
        """The command line that continues run `run_id` (see `resume_command`)."""
        return resume_command(run_id, self.url, self.toolset_source(run_id), output)

    @db_retry
    def output(self, run_id: str) -> RunOutputRow | None:
        """The file run `run_id` writes, if it was given one."""
        with self.session() as s:
            return s.get(RunOutputRow, run_id)

    @db_retry
    def output_owner(self, path: str) -> str | None:
        """The latest run that writes `path`, if any."""
        with self.session() as s:
            rows = s.execute(select(RunOutputRow.run_id).join(RunRow, RunRow.id == RunOutputRow.run_id)
                             .where(RunOutputRow.path == os.path.abspath(path)).order_by(RunRow.created)).all()
            return rows[-1][0] if rows else None

    def shown_status(self, run: RunRow) -> str:
        """A run's status as `sap runs` shows it: a running run that no live worker holds is `interrupted`."""
        if run.status != "running" or not self.single_process:
            return run.status
        live = run.worker is not None and run.lease_expiry is not None and run.lease_expiry > _now() \
            and _worker_alive(run.worker)
        return "running" if live else "interrupted"

    @db_retry
    def fsm(self, run_id: str) -> dict[str, Any]:
        """The FSM the run was created with."""
        with self.session() as s:
            return s.get(FSMRow, run_id).fsm

    @db_retry
    def acquire(self, run_id: str, worker: str, lease_seconds: float) -> None:
        """On SQLite, hold the run for `worker` (RunConflict if a live worker's lease has not expired);
        on PostgreSQL workers share a run and this is a no-op (slots are claimed one by one)."""
        if not self.single_process:
            return
        with self._tx() as s:
            row = s.get(RunRow, run_id, with_for_update=True)
            held = row.worker not in (None, worker) and row.lease_expiry and row.lease_expiry > _now()
            if held and not _worker_alive(row.worker):
                held = False  # its lease outlived it: a process on this host that is gone
            if held:
                raise RunConflict(f"run {run_id} is being worked on by {row.worker} (lease until "
                                  f"{row.lease_expiry:%H:%M:%S} UTC); on SQLite only one process may work on a run")
            row.worker, row.lease_expiry = worker, _now() + timedelta(seconds=lease_seconds)

    @db_retry
    def release(self, run_id: str, worker: str, status: str | None = None) -> None:
        """Give the run up (and set its status)."""
        with self._tx() as s:
            row = s.get(RunRow, run_id, with_for_update=True)
            if row.worker == worker:
                row.worker, row.lease_expiry = None, None
            if status:
                row.status = status

    @db_retry
    def set_status(self, run_id: str, status: str) -> None:
        """Set a run's status (`running` while a driver works on it)."""
        with self._tx() as s:
            s.execute(update(RunRow).where(RunRow.id == run_id).values(status=status))

    @db_retry
    def retry_failed(self, run_id: str) -> int:
        """Put the run's failed slots back to pending; how many. Their rejection rows stay until the retry ends,
        so `finish` knows a slot is a retry (see `finish`)."""
        with self._tx() as s:
            return s.execute(update(SlotRow).where(SlotRow.run_id == run_id, SlotRow.status == "failed")
                             .values(status="pending", worker=None, lease_expiry=None)).rowcount

    @db_retry
    def next_slot(self, run_id: str, worker: str, lease_seconds: float,
                  ready_below: Callable[[int], int] | None = None) -> int | None:
        """Claim the slot to work on: the lowest claimable unfinished one (FOR UPDATE SKIP LOCKED), else a new
        one after the last, unless accepted plus in-flight slots already meet the target (then None).
        A slot whose worker died is claimable again once its lease expires, or at once if that worker was a
        process of this host that no longer exists. With `ready_below`, a new slot i is made only once every
        slot below ready_below(i) has finished (else None: the caller waits), so what i reads from them is fixed."""
        with self._claim_lock, self._tx() as s:
            # SQLite: one process at a time, so a running slot of another worker was left by a process that stopped
            claimable = or_(SlotRow.status == "pending", and_(SlotRow.status == "running", SlotRow.worker != worker))
            if not self.single_process:  # PostgreSQL: pending, or running under a lease that has run out
                claimable = or_(SlotRow.status == "pending",
                                and_(SlotRow.status == "running", SlotRow.lease_expiry < _now()))
            slot = s.execute(select(SlotRow).where(SlotRow.run_id == run_id, claimable).order_by(SlotRow.index)
                             .limit(1).with_for_update(skip_locked=True)).scalar_one_or_none()
            if slot is None and not self.single_process:  # a worker of this host that died holds a live lease
                orphans = s.execute(select(SlotRow.index, SlotRow.worker).where(
                    SlotRow.run_id == run_id, SlotRow.status == "running").order_by(SlotRow.index)).all()
                dead = [i for i, w in orphans if not _worker_alive(w or "")]
                if dead:
                    slot = s.execute(select(SlotRow).where(SlotRow.run_id == run_id, SlotRow.index == dead[0],
                                                           SlotRow.status == "running")
                                     .with_for_update(skip_locked=True)).scalar_one_or_none()
            if slot is None:
                run = s.get(RunRow, run_id, with_for_update=True)  # serializes new-slot creation across workers
                busy = s.execute(select(func.count()).where(SlotRow.run_id == run_id,
                                                            SlotRow.status.in_(("accepted", "running")))).scalar()
                if busy >= run.target:
                    return None
                last = s.execute(select(func.max(SlotRow.index)).where(SlotRow.run_id == run_id)).scalar()
                index = 0 if last is None else last + 1
                if ready_below is not None and index and ready_below(index) != ready_below(index - 1):
                    unfinished = s.execute(select(func.count()).where(
                        SlotRow.run_id == run_id, SlotRow.index < ready_below(index),
                        SlotRow.status.in_(("pending", "running")))).scalar()
                    if unfinished:
                        return None
                slot = SlotRow(run_id=run_id, index=index, thread_id=f"{run_id}:{index}", status="pending", attempts=0)
                s.add(slot)
            slot.status, slot.worker = "running", worker
            slot.lease_expiry = _now() + timedelta(seconds=lease_seconds)
            slot.attempts = (slot.attempts or 0) + 1
            return slot.index

    @db_retry
    def renew(self, run_id: str, index: int, worker: str, lease_seconds: float) -> bool:
        """Extend `worker`'s lease on slot `index` (and on SQLite on the run); False if it no longer holds the slot."""
        expiry = _now() + timedelta(seconds=lease_seconds)
        with self._tx() as s:
            held = s.execute(update(SlotRow).where(SlotRow.run_id == run_id, SlotRow.index == index,
                                                   SlotRow.worker == worker, SlotRow.status == "running")
                             .values(lease_expiry=expiry)).rowcount == 1
            if self.single_process:
                s.execute(update(RunRow).where(RunRow.id == run_id, RunRow.worker == worker)
                          .values(lease_expiry=expiry))
        return held

    @db_retry
    def finish(self, run_id: str, index: int, worker: str, record: dict[str, Any] | None, reason: str | None,
               verdict: dict[str, Any] | None, failed: bool = False, kind: str | None = None) -> bool:
        """Store a slot's outcome in one transaction if `worker` still holds the slot (else nothing); whether it did.
        `failed` marks a slot that could not be synthesized (an LLM role gave up) rather than rejected; `kind` is
        the drop's DropReason value, stored beside `reason`."""
        with self._tx() as s:
            status = "accepted" if record is not None else "failed" if failed else "rejected"
            held = s.execute(update(SlotRow).where(SlotRow.run_id == run_id, SlotRow.index == index,
                                                   SlotRow.worker == worker, SlotRow.status == "running")
                             .values(status=status, worker=None)).rowcount == 1
            if not held:
                return False
            if record is not None:
                # A retried failed slot adds nothing to the tool histogram H: slots above its schedule bound may
                # already have read H without it, so H counts each slot as it first ended (failed: no calls).
                retried = s.execute(delete(RejectionRow).where(RejectionRow.run_id == run_id,
                                                               RejectionRow.index == index)).rowcount
                calls = {} if retried else dict(Counter(p["name"] for p in record["provenance"]))
                s.merge(RecordRow(run_id=run_id, index=index, record=record, tool_calls=calls))
            else:
                s.merge(RejectionRow(run_id=run_id, index=index, reason=reason or "unknown", verdict=verdict,
                                    kind=kind))
        return True

    @db_retry
    def unclaim(self, run_id: str, index: int, worker: str) -> None:
        """Put a slot `worker` holds back to pending (its checkpoint stays, so the next claim continues it)."""
        with self._tx() as s:
            s.execute(update(SlotRow).where(SlotRow.run_id == run_id, SlotRow.index == index,
                                            SlotRow.worker == worker, SlotRow.status == "running")
                      .values(status="pending", worker=None, lease_expiry=None))

    @db_retry
    def save_usage(self, run_id: str, worker: str, usage: dict[str, Any]) -> None:
        """Store this worker's LLM usage snapshot on the run (replacing its previous one)."""
        with self._tx() as s:
            s.merge(UsageRow(run_id=run_id, worker=worker, usage=usage))

    @db_retry
    def usage(self, run_id: str) -> UsageLedger:
        """The run's LLM usage: every worker's snapshot merged."""
        ledger = UsageLedger()
        with self.session() as s:
            for (usage,) in s.execute(select(UsageRow.usage).where(UsageRow.run_id == run_id)):
                ledger.merge(usage)
        return ledger

    @db_retry
    def tool_calls_between(self, run_id: str, lo: int, hi: int) -> list[dict[str, int]]:
        """Tool calls of each accepted record of slots lo <= index < hi (the increments of the run's histogram H)."""
        with self.session() as s:
            return [calls for (calls,) in s.execute(select(RecordRow.tool_calls).where(
                RecordRow.run_id == run_id, RecordRow.index >= lo, RecordRow.index < hi))]

    @db_retry
    def counts(self, run_id: str) -> dict[str, int]:
        """Slots per status."""
        with self.session() as s:
            rows = s.execute(select(SlotRow.status, func.count()).where(SlotRow.run_id == run_id)
                             .group_by(SlotRow.status))
            return {status: n for status, n in rows}

    @db_retry
    def records(self, run_id: str) -> list[dict[str, Any]]:
        """The accepted records in slot order."""
        with self.session() as s:
            return [r for (r,) in s.execute(select(RecordRow.record).where(RecordRow.run_id == run_id)
                                            .order_by(RecordRow.index))]

    @db_retry
    def record_at(self, run_id: str, position: int) -> dict[str, Any] | None:
        """The accepted record at `position` (0-based) in slot order, or None past the last."""
        with self.session() as s:
            return s.scalars(select(RecordRow.record).where(RecordRow.run_id == run_id).order_by(RecordRow.index)
                             .offset(position).limit(1)).first()

    def iter_records(self, run_id: str, batch: int = RECORD_BATCH) -> Iterator[dict[str, Any]]:
        """The accepted records in slot order, fetched `batch` rows at a time (memory flat in the run's size)."""
        with self.session() as s:
            yield from s.scalars(select(RecordRow.record).where(RecordRow.run_id == run_id)
                                 .order_by(RecordRow.index).execution_options(yield_per=batch))

    @db_retry
    def rejections(self, run_id: str) -> list[dict[str, Any]]:
        """The rejections in slot order."""
        with self.session() as s:
            rows = s.execute(select(RejectionRow).where(RejectionRow.run_id == run_id).order_by(RejectionRow.index))
            return [{"index": r.index, "reason": r.reason, "verdict": r.verdict,
                     "kind": r.kind or DropReason.of_text(r.reason).value} for (r,) in rows]

    def runs(self) -> list[RunRow]:
        """Every run, oldest first."""
        with self.session() as s:
            return list(s.execute(select(RunRow).order_by(RunRow.created)).scalars())

    def has_pool(self, pool_id: str) -> bool:
        """Whether the database holds a RODS pool called `pool_id`."""
        with self.session() as s:
            return s.get(PoolRow, pool_id) is not None

    def save_pool(self, pool_id: str, config: dict[str, Any], state: dict[str, Any],
                  new: list[tuple[str, str, dict[str, Any], Any]],
                  changed: list[tuple[str, str | None, dict[str, Any] | None]]) -> None:
        """Write a pool's config and counters, its new tasks (id, status, task, payload) and its changed tasks
        (id, status, task; a None status deletes the row), in one transaction."""
        with self._tx() as s:
            s.merge(PoolRow(id=pool_id, config=config, state=state))
            s.flush()  # the pool row first: task rows refer to it
            for task_id, status, task, payload in new:
                s.merge(PoolTaskRow(pool_id=pool_id, task_id=task_id, status=status, task=task, payload=payload))
            for task_id, status, task in changed:
                where = (PoolTaskRow.pool_id == pool_id, PoolTaskRow.task_id == task_id)
                if status is None:
                    s.execute(delete(PoolTaskRow).where(*where))
                else:
                    s.execute(update(PoolTaskRow).where(*where).values(status=status, task=task))

    def load_pool(self, pool_id: str) -> tuple[dict[str, Any], dict[str, Any], list[tuple[dict[str, Any], Any]]]:
        """A pool's config, counters and (task, payload) rows; StoreError naming the known pools if there is none."""
        with self.session() as s:
            row = s.get(PoolRow, pool_id)
            if row is None:
                known = [p for (p,) in s.execute(select(PoolRow.id).order_by(PoolRow.id))]
                raise StoreError(f"no pool {pool_id!r} in {self.url}; pools: {', '.join(known) or 'none'}")
            tasks = [(t.task, t.payload) for (t,) in s.execute(
                select(PoolTaskRow).where(PoolTaskRow.pool_id == pool_id).order_by(PoolTaskRow.task_id))]
            return row.config, row.state, tasks


class StoredRecords(Sequence):
    """A run's accepted records in slot order, read from its database as they are stored now: iterating streams them
    (RECORD_BATCH rows per fetch), an index or a slice reads just those, and it compares equal to a sequence of the
    same records. An export or a Run handle holds this, never the records themselves."""

    def __init__(self, store: RunStore, run_id: str) -> None:
        self.store, self.run_id = store, run_id

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self.store.iter_records(self.run_id)

    def __len__(self) -> int:
        return self.store.counts(self.run_id).get("accepted", 0)

    def __getitem__(self, key: int | slice) -> Any:
        if isinstance(key, slice):
            return [self[i] for i in range(*key.indices(len(self)))]
        position = key + len(self) if key < 0 else key
        record = self.store.record_at(self.run_id, position) if position >= 0 else None
        if record is None:
            raise IndexError(f"run {self.run_id} has {len(self)} records; no record {key}")
        return record

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{len(self)} records of run {self.run_id} in {self.store.url}>"


def list_runs(db: str) -> list[dict[str, Any]]:
    """Every run in `db`, oldest first: id, status (a running run no live worker holds is `interrupted`), toolset,
    counts, cost, creation time, output file and the command that continues it."""
    store = existing_store(db)
    rows = []
    for run in store.runs():
        counts, output = store.counts(run.id), store.output(run.id)
        status = store.shown_status(run)
        rows.append({"id": run.id, "status": status, "toolset": run.toolset, "accepted": counts.get("accepted", 0),
                     "target": run.target, "rejected": counts.get("rejected", 0), "failed": counts.get("failed", 0),
                     "cost_usd": round(store.usage(run.id).spent_usd(), 6),
                     "created": run.created.isoformat(timespec="seconds"),
                     "output": output.path if output else None,
                     "resume": store.resume_command(run.id) if status in ("interrupted", "budget") else None})
    return rows
