"""The in-memory cache: entries by id, an O(1) index (function, argument key) -> entry, and the reverse index
function -> param -> value -> ids."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable

from sap.cache.keys import args_key, value_key


@dataclass(frozen=True)
class Entry:
    """One cached call: the function, its arguments and the response the live API gave."""

    id: int
    function: str
    args: dict[str, Any]
    response: Any


class CacheIndex:
    """Cached responses with the lookups sampling and the cache executor need."""

    def __init__(self) -> None:
        self.entries: dict[int, Entry] = {}
        self.by_key: dict[tuple[str, Hashable], Entry] = {}
        self.by_function: dict[str, list[int]] = {}
        self.reverse: dict[str, dict[str, dict[Hashable, set[int]]]] = {}
        self._next_id = 1

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, function: str, args: dict[str, Any], response: Any, entry_id: int | None = None) -> tuple[int, bool]:
        """Store a response unless the same call is cached already (the first response recorded is kept);
        (its id, whether it is new)."""
        key = (function, args_key(args))
        known = self.by_key.get(key)
        if known is not None:
            return known.id, False
        if entry_id is None:
            entry_id = self._next_id
        self._next_id = max(self._next_id, entry_id + 1)
        entry = self.entries[entry_id] = Entry(entry_id, function, args, response)
        self.by_key[key] = entry
        self.by_function.setdefault(function, []).append(entry_id)
        params = self.reverse.setdefault(function, {})
        for name, value in args.items():
            params.setdefault(name, {}).setdefault(value_key(value), set()).add(entry_id)
        return entry_id, True

    def get(self, function: str, args: dict[str, Any]) -> Entry | None:
        """The cached entry of this call, or None."""
        return self.by_key.get((function, args_key(args)))

    def get_key(self, function: str, key: Hashable) -> Entry | None:
        """The cached entry for arguments already turned into their `args_key`, or None."""
        return self.by_key.get((function, key))

    def ids_with(self, function: str, param: str, value: Any) -> set[int]:
        """Ids of the cached calls of `function` whose `param` equals `value` (an empty set if none; do not modify)."""
        return self.reverse.get(function, {}).get(param, {}).get(value_key(value), _EMPTY)

    def functions(self) -> list[str]:
        """Functions with at least one cached entry."""
        return sorted(self.by_function)


_EMPTY: set[int] = set()
