"""The in-memory cache: entries by id, an O(1) index (function, state, argument key) -> entry, and the reverse index
function -> param -> value -> ids. A response recorded on a stateful executor carries the id of the state it was
recorded in and of the state the call left; a stateless one (a live API's) has no state and answers in any."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable

from sap.cache.keys import args_key, value_key

STATE_KEY = "cache_state"  # the c0 key of a cache record's initial state id (absent for a stateless cache)


@dataclass(frozen=True)
class Entry:
    """One cached call: the function, its arguments, the response the live API gave, the id of the executor state it
    was recorded in and of the state the call left (None for both when recorded on a stateless API)."""

    id: int
    function: str
    args: dict[str, Any]
    response: Any
    state: str | None = None
    after: str | None = None


class CacheIndex:
    """Cached responses with the lookups sampling and the cache executor need."""

    def __init__(self) -> None:
        self.entries: dict[int, Entry] = {}
        self.by_key: dict[tuple[str, str | None, Hashable], Entry] = {}
        self.by_function: dict[str, list[int]] = {}
        self.recorded: set[tuple[str, str]] = set()  # (state, function) of every stateful entry
        self.stateful: set[str] = set()  # functions with stateful entries
        self.reverse: dict[str, dict[str, dict[Hashable, set[int]]]] = {}
        self._next_id = 1

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, function: str, args: dict[str, Any], response: Any, entry_id: int | None = None,
            state: str | None = None, after: str | None = None) -> tuple[int, bool]:
        """Store a response unless the same call is cached already in the same state (the first response recorded
        there is kept); `after` (default: `state`) is the state the call left. (its id, whether it is new)."""
        key = (function, state, args_key(args))
        known = self.by_key.get(key)
        if known is not None:
            return known.id, False
        if entry_id is None:
            entry_id = self._next_id
        self._next_id = max(self._next_id, entry_id + 1)
        after = (after or state) if state is not None else None
        if state is not None:
            self.recorded.add((state, function))
            self.stateful.add(function)
        entry = self.entries[entry_id] = Entry(entry_id, function, args, response, state, after)
        self.by_key[key] = entry
        self.by_function.setdefault(function, []).append(entry_id)
        params = self.reverse.setdefault(function, {})
        for name, value in args.items():
            params.setdefault(name, {}).setdefault(value_key(value), set()).add(entry_id)
        return entry_id, True

    def get(self, function: str, args: dict[str, Any], state: str | None = None) -> Entry | None:
        """The cached entry of this call in `state` (else a stateless one), or None."""
        return self.get_key(function, args_key(args), state)

    def get_key(self, function: str, key: Hashable, state: str | None = None) -> Entry | None:
        """The cached entry for arguments already turned into their `args_key`, in `state` (else a stateless one),
        or None."""
        found = self.by_key.get((function, state, key))
        if found is None and state is not None:
            return self.by_key.get((function, None, key))
        return found

    def ids_with(self, function: str, param: str, value: Any) -> set[int]:
        """Ids of the cached calls of `function` whose `param` equals `value` (an empty set if none; do not modify)."""
        return self.reverse.get(function, {}).get(param, {}).get(value_key(value), _EMPTY)

    def functions(self) -> list[str]:
        """Functions with at least one cached entry."""
        return sorted(self.by_function)


_EMPTY: set[int] = set()
