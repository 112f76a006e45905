"""Tables of the run store (SQLAlchemy 2 ORM): runs, slots, records, rejections, cached FSMs, LLM usage, RODS pools
and their tasks, schema version."""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Boolean, DateTime, ForeignKey, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

SCHEMA_VERSION = 1


class Base(DeclarativeBase):
    """Declarative base of the sap tables (all prefixed `sap_`, beside LangGraph's checkpoint tables)."""


class SchemaInfo(Base):
    """One row: the schema version, so later versions can migrate."""

    __tablename__ = "sap_schema"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class RunRow(Base):
    """A synthesis run: its config, seed, target and fingerprint, and which worker holds it (SQLite)."""

    __tablename__ = "sap_runs"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    created: Mapped[datetime] = mapped_column(DateTime)
    toolset: Mapped[str] = mapped_column(String(200))
    config: Mapped[dict] = mapped_column(JSON)
    seed: Mapped[int] = mapped_column(Integer)
    target: Mapped[int] = mapped_column(Integer)
    fingerprint: Mapped[str] = mapped_column(String(64))
    fingerprint_parts: Mapped[dict] = mapped_column(JSON)  # what the fingerprint hashes, to say what changed
    status: Mapped[str] = mapped_column(String(20))  # running / complete / exhausted
    worker: Mapped[str | None] = mapped_column(String(80), nullable=True)
    lease_expiry: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


class SlotRow(Base):
    """One trajectory slot of a run: its LangGraph thread and outcome."""

    __tablename__ = "sap_slots"
    run_id: Mapped[str] = mapped_column(ForeignKey("sap_runs.id"), primary_key=True)
    index: Mapped[int] = mapped_column(Integer, primary_key=True)
    thread_id: Mapped[str] = mapped_column(String(80))
    status: Mapped[str] = mapped_column(String(20))  # pending / running / accepted / rejected / failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    worker: Mapped[str | None] = mapped_column(String(80), nullable=True)
    lease_expiry: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


class RecordRow(Base):
    """An accepted record, keyed by its slot."""

    __tablename__ = "sap_records"
    run_id: Mapped[str] = mapped_column(ForeignKey("sap_runs.id"), primary_key=True)
    index: Mapped[int] = mapped_column(Integer, primary_key=True)
    record: Mapped[dict] = mapped_column(JSON)
    tool_calls: Mapped[dict] = mapped_column(JSON)  # tool -> calls in this record (the run's histogram H)


class RejectionRow(Base):
    """A dropped slot with its reason and the judge's verdict."""

    __tablename__ = "sap_rejections"
    run_id: Mapped[str] = mapped_column(ForeignKey("sap_runs.id"), primary_key=True)
    index: Mapped[int] = mapped_column(Integer, primary_key=True)
    reason: Mapped[str] = mapped_column(Text)
    verdict: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    kind: Mapped[str | None] = mapped_column(String(64), nullable=True)  # a DropReason value; None on older rows


class UsageRow(Base):
    """One worker process's LLM usage on a run (a UsageLedger snapshot); the run's usage is the sum over rows."""

    __tablename__ = "sap_usage"
    run_id: Mapped[str] = mapped_column(ForeignKey("sap_runs.id"), primary_key=True)
    worker: Mapped[str] = mapped_column(String(200), primary_key=True)
    usage: Mapped[dict] = mapped_column(JSON)


class FSMRow(Base):
    """The verified FSM a run uses, so a resumed run walks exactly the same one."""

    __tablename__ = "sap_fsms"
    run_id: Mapped[str] = mapped_column(ForeignKey("sap_runs.id"), primary_key=True)
    fsm: Mapped[dict] = mapped_column(JSON)


class PoolRow(Base):
    """A RODS active pool: its config and counters (step, epoch, queue order, injected/retired counts)."""

    __tablename__ = "sap_pools"
    id: Mapped[str] = mapped_column(String(80), primary_key=True)
    config: Mapped[dict] = mapped_column(JSON)
    state: Mapped[dict] = mapped_column(JSON)


class PoolTaskRow(Base):
    """One task of a pool: status, reward history and lineage (`task`), and the record it stands for (written once)."""

    __tablename__ = "sap_pool_tasks"
    pool_id: Mapped[str] = mapped_column(ForeignKey("sap_pools.id"), primary_key=True)
    task_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    status: Mapped[str] = mapped_column(String(20))  # candidate / active / retired
    task: Mapped[dict] = mapped_column(JSON)
    payload: Mapped[dict | list | None] = mapped_column(JSON, nullable=True)


class RunOutputRow(Base):
    """Where a run writes its records (`-o`), kept apart from its fingerprinted config so resume can finish it."""

    __tablename__ = "sap_run_outputs"
    run_id: Mapped[str] = mapped_column(ForeignKey("sap_runs.id"), primary_key=True)
    path: Mapped[str] = mapped_column(Text)  # absolute path of the JSONL file
    drop_truncated: Mapped[bool] = mapped_column(Boolean, default=False)  # truncated records left out of the file


class RunSourceRow(Base):
    """The file a run's toolset was loaded from (a domain module or MCP config; a run names its toolset, not the
    file), kept apart from the fingerprinted config so the resume command can name it."""

    __tablename__ = "sap_run_sources"
    run_id: Mapped[str] = mapped_column(ForeignKey("sap_runs.id"), primary_key=True)
    source: Mapped[str] = mapped_column(Text)  # what `--toolset` takes: an absolute path, or mcp:/absolute/path
