"""Caches in the run database: the tables (beside the run store's) and loading a cache into its in-memory index."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from sqlalchemy import JSON, Integer, String, UniqueConstraint, func, inspect, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column

from sap.cache.executor import CacheExecutor
from sap.cache.index import CacheIndex, Entry
from sap.cache.keys import args_digest, canonical_json
from sap.cache.rules import ToolRules
from sap.model import Toolset, ToolSpec
from sap.store.runs import RunStore, db_retry
from sap.store.schema import Base


class CacheToolRow(Base):
    """One function of a cache: its spec (as the model sees it) and its validator rules."""

    __tablename__ = "sap_cache_tools"
    cache: Mapped[str] = mapped_column(String(200), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    spec: Mapped[dict] = mapped_column(JSON)
    rules: Mapped[dict] = mapped_column(JSON)


class CacheEntryRow(Base):
    """One recorded call: (function, state, canonical arguments) -> response and the state it left; the digest keys
    it (states are None for a stateless API)."""

    __tablename__ = "sap_cache_entries"
    __table_args__ = (UniqueConstraint("cache", "digest"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    cache: Mapped[str] = mapped_column(String(200), index=True)
    function: Mapped[str] = mapped_column(String(200))
    digest: Mapped[str] = mapped_column(String(64))
    args: Mapped[dict] = mapped_column(JSON)
    response: Mapped[Any] = mapped_column(JSON)
    state_before: Mapped[str | None] = mapped_column(String(64), nullable=True)
    state_after: Mapped[str | None] = mapped_column(String(64), nullable=True)


class CacheContentRow(Base):
    """A cache's entry count and content hash: the running hash of its entries in insertion order, kept up to date
    by every add, so a run start reads one row instead of hashing every response."""

    __tablename__ = "sap_cache_content"
    cache: Mapped[str] = mapped_column(String(200), primary_key=True)
    entries: Mapped[int] = mapped_column(Integer)
    content_hash: Mapped[str] = mapped_column(String(64))


def entry_hash(digest: str, response: Any, after: str | None = None) -> str:
    """The hash of one entry: its key digest (function, state and arguments), the state it left if any, and its
    canonical response."""
    left = "" if after is None else f"{after}\n"
    return hashlib.sha256(f"{digest}\n{left}{canonical_json(response)}".encode()).hexdigest()


def chain_hash(previous: str, entry: str) -> str:
    """The content hash after one more entry (the empty cache's is "")."""
    return hashlib.sha256(f"{previous}:{entry}".encode()).hexdigest()


@dataclass
class LoadedCache:
    """A cache read into memory: its functions, their rules, the index and the content hash of its entries."""

    name: str
    specs: list[ToolSpec]
    rules: dict[str, ToolRules]
    index: CacheIndex = field(default_factory=CacheIndex)
    content_hash: str = ""

    def executor(self) -> CacheExecutor:
        """A cache executor over this cache."""
        return CacheExecutor(self.index, self.specs, self.rules)

    def toolset(self, description: str = "") -> Toolset:
        """The cache as a toolset (name `cache:NAME`, c0 always empty), for runs and validation."""
        return Toolset(name=f"cache:{self.name}", description=description, tools=self.specs,
                       executor_factory=self.executor, sample_config=lambda seed: {})


class CacheStore:
    """Caches, by name, in a run database."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        Base.metadata.create_all(store.engine, tables=[CacheToolRow.__table__, CacheEntryRow.__table__,
                                                       CacheContentRow.__table__])
        with store.engine.begin() as conn:  # a table made before states: its entries are stateless
            have = {c["name"] for c in inspect(conn).get_columns(CacheEntryRow.__tablename__)}
            for column in ("state_before", "state_after"):
                if column not in have:
                    conn.execute(text(f"ALTER TABLE {CacheEntryRow.__tablename__} ADD COLUMN {column} VARCHAR(64)"))

    def save_tools(self, cache: str, specs: Iterable[ToolSpec], rules: dict[str, ToolRules] | None = None) -> None:
        """Store (or replace) the specs and rules of a cache's functions."""
        rules = rules or {}
        with self.store.session.begin() as s:
            for spec in specs:
                s.merge(CacheToolRow(cache=cache, name=spec.name, spec=spec.model_dump(mode="json"),
                                     rules=rules.get(spec.name, ToolRules()).model_dump(mode="json")))

    def add(self, cache: str, entries: Iterable[tuple[str, dict[str, Any], Any]]) -> int:
        """Store stateless (function, args, response) triples not cached yet, in one transaction; how many were new."""
        return self._add_rows(cache, (Entry(0, f, a, r) for f, a, r in entries))

    def _add_rows(self, cache: str, entries: Iterable[Entry]) -> int:
        """Store entries (their ids ignored) not cached yet, in one transaction; how many were new. A concurrent
        writer (another process recording the same cache) may store a digest first: the transaction is run again
        and reads it as known (a busy SQLite database is waited for as the run store's writes are)."""
        rows: dict[str, dict[str, Any]] = {}
        for e in entries:
            digest = args_digest(e.function, e.args, e.state)
            rows.setdefault(digest, {"cache": cache, "function": e.function, "digest": digest, "args": e.args,
                                     "response": e.response, "state_before": e.state, "state_after": e.after})
        if not rows:
            return 0
        tries = 3
        while True:
            try:
                return db_retry(self._insert)(cache, rows)
            except IntegrityError:
                tries -= 1
                if not tries:
                    raise

    def _insert(self, cache: str, rows: dict[str, dict[str, Any]]) -> int:
        """One transaction of `_add_rows`: the cache's content row locked first (so writers of one cache take turns
        on PostgreSQL), then the digests stored already left out."""
        with self.store.session.begin() as s:
            content = s.get(CacheContentRow, cache, with_for_update=True)
            known: set[str] = set()
            digests = list(rows)
            for start in range(0, len(digests), 500):
                known.update(s.execute(select(CacheEntryRow.digest).where(
                    CacheEntryRow.cache == cache, CacheEntryRow.digest.in_(digests[start:start + 500]))).scalars())
            new = [CacheEntryRow(**row) for d, row in rows.items() if d not in known]
            if content is None and not s.scalar(select(func.count()).select_from(CacheEntryRow)
                                                .where(CacheEntryRow.cache == cache)):
                content = CacheContentRow(cache=cache, entries=0, content_hash="")
                s.add(content)
            s.add_all(new)
            if content is not None:  # else a cache stored before content hashes: hashed in full at its next load
                for row in new:
                    content.content_hash = chain_hash(content.content_hash,
                                                      entry_hash(row.digest, row.response, row.state_after))
                content.entries += len(new)
        return len(new)

    def caches(self) -> dict[str, int]:
        """Cache names with their entry counts."""
        with self.store.session() as s:
            names = {n: 0 for n in s.execute(select(CacheToolRow.cache).distinct()).scalars()}
            for name, count in s.execute(select(CacheEntryRow.cache, func.count()).group_by(CacheEntryRow.cache)):
                names[name] = count
            return names

    def load(self, cache: str) -> LoadedCache:
        """The cache `cache` in memory; KeyError naming the known caches if there is none."""
        with self.store.session() as s:
            tools = s.execute(select(CacheToolRow).where(CacheToolRow.cache == cache)
                              .order_by(CacheToolRow.name)).scalars().all()
            if not tools:
                known = ", ".join(sorted(self.caches())) or "none"
                raise KeyError(f"no cache {cache!r} in {self.store.url}; caches: {known}")
            loaded = LoadedCache(cache, [ToolSpec.model_validate(t.spec) for t in tools],
                                 {t.name: ToolRules.model_validate(t.rules) for t in tools})
            rows = s.execute(select(CacheEntryRow.id, CacheEntryRow.function, CacheEntryRow.args,
                                    CacheEntryRow.response, CacheEntryRow.state_before, CacheEntryRow.state_after)
                             .where(CacheEntryRow.cache == cache).order_by(CacheEntryRow.id))
            for entry_id, function, args, response, before, after in rows:
                loaded.index.add(function, args, response, entry_id=entry_id, state=before, after=after)
            content = s.get(CacheContentRow, cache)
            stored = (content.entries, content.content_hash) if content is not None else None
        if stored is not None and stored[0] == len(loaded.index):
            loaded.content_hash = stored[1]
        else:  # a cache stored before content hashes, or rows written past sap: hashed in full, once
            loaded.content_hash = self._rehash(cache)
            with self.store.session.begin() as s:
                s.merge(CacheContentRow(cache=cache, entries=len(loaded.index), content_hash=loaded.content_hash))
        return loaded

    def _rehash(self, cache: str) -> str:
        """The content hash of every stored entry of `cache`, in insertion order."""
        content = ""
        with self.store.session() as s:
            for digest, response, after in s.execute(
                    select(CacheEntryRow.digest, CacheEntryRow.response, CacheEntryRow.state_after)
                    .where(CacheEntryRow.cache == cache).order_by(CacheEntryRow.id)):
                content = chain_hash(content, entry_hash(digest, response, after))
        return content

    def save_index(self, cache: str, entries: Iterable[Entry]) -> int:
        """Store entries of an in-memory index, with their states; how many were new."""
        return self._add_rows(cache, entries)


def cache_opener(db_url: str | None) -> Callable[[str], Toolset]:
    """Opens a cache by name from the run database `db_url` (sqlite:///sap.db by default; never created here), to
    replay or play cache-mode records on; a missing cache is a ValueError naming it and the caches there."""
    def open_cache(name: str) -> Toolset:
        from sap.store.runs import existing_store

        try:
            return CacheStore(existing_store(db_url or "sqlite:///sap.db")).load(name).toolset()
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None

    return open_cache
