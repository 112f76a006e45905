"""Caches in the run database: the tables (beside the run store's) and loading a cache into its in-memory index."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from sqlalchemy import JSON, Integer, String, UniqueConstraint, func, select
from sqlalchemy.orm import Mapped, mapped_column

from sap.cache.executor import CacheExecutor
from sap.cache.index import CacheIndex, Entry
from sap.cache.keys import args_digest
from sap.cache.rules import ToolRules
from sap.model import Toolset, ToolSpec
from sap.store.runs import RunStore
from sap.store.schema import Base


class CacheToolRow(Base):
    """One function of a cache: its spec (as the model sees it) and its validator rules."""

    __tablename__ = "sap_cache_tools"
    cache: Mapped[str] = mapped_column(String(200), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    spec: Mapped[dict] = mapped_column(JSON)
    rules: Mapped[dict] = mapped_column(JSON)


class CacheEntryRow(Base):
    """One recorded call: (function, canonical arguments) -> response; the digest keys it."""

    __tablename__ = "sap_cache_entries"
    __table_args__ = (UniqueConstraint("cache", "digest"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    cache: Mapped[str] = mapped_column(String(200), index=True)
    function: Mapped[str] = mapped_column(String(200))
    digest: Mapped[str] = mapped_column(String(64))
    args: Mapped[dict] = mapped_column(JSON)
    response: Mapped[Any] = mapped_column(JSON)


@dataclass
class LoadedCache:
    """A cache read into memory: its functions, their rules and the index."""

    name: str
    specs: list[ToolSpec]
    rules: dict[str, ToolRules]
    index: CacheIndex = field(default_factory=CacheIndex)

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
        Base.metadata.create_all(store.engine, tables=[CacheToolRow.__table__, CacheEntryRow.__table__])

    def save_tools(self, cache: str, specs: Iterable[ToolSpec], rules: dict[str, ToolRules] | None = None) -> None:
        """Store (or replace) the specs and rules of a cache's functions."""
        rules = rules or {}
        with self.store.session.begin() as s:
            for spec in specs:
                s.merge(CacheToolRow(cache=cache, name=spec.name, spec=spec.model_dump(mode="json"),
                                     rules=rules.get(spec.name, ToolRules()).model_dump(mode="json")))

    def add(self, cache: str, entries: Iterable[tuple[str, dict[str, Any], Any]]) -> int:
        """Store (function, args, response) triples not cached yet, in one transaction; how many were new."""
        rows: dict[str, CacheEntryRow] = {}
        for function, args, response in entries:
            digest = args_digest(function, args)
            rows.setdefault(digest, CacheEntryRow(cache=cache, function=function, digest=digest, args=args,
                                                  response=response))
        if not rows:
            return 0
        with self.store.session.begin() as s:
            known: set[str] = set()
            digests = list(rows)
            for start in range(0, len(digests), 500):
                known.update(s.execute(select(CacheEntryRow.digest).where(
                    CacheEntryRow.cache == cache, CacheEntryRow.digest.in_(digests[start:start + 500]))).scalars())
            new = [row for d, row in rows.items() if d not in known]
            s.add_all(new)
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
                                    CacheEntryRow.response).where(CacheEntryRow.cache == cache)
                             .order_by(CacheEntryRow.id))
            for entry_id, function, args, response in rows:
                loaded.index.add(function, args, response, entry_id=entry_id)
        return loaded

    def save_index(self, cache: str, entries: Iterable[Entry]) -> int:
        """Store entries of an in-memory index; how many were new."""
        return self.add(cache, ((e.function, e.args, e.response) for e in entries))
