"""Executor over BFCL's multi-turn backend classes: keyword-argument method calls, never evaluated call strings."""
from __future__ import annotations

import copy
import functools
import inspect
import json
from typing import Any

from sap.executors.python_object import PythonObjectExecutor
from sap.jsonutil import json_copy


def plain_state(value: Any, seen: frozenset[int] = frozenset()) -> Any:
    """A JSON view of a backend attribute: objects as their public attributes (back-references to an enclosing
    object, such as a directory's parent, left out), sets as sorted lists, dict keys as strings."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): plain_state(v, seen) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_state(v, seen) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((plain_state(v, seen) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if hasattr(value, "__dict__"):
        inner = seen | {id(value)}
        return {k: plain_state(v, inner) for k, v in vars(value).items()
                if not k.startswith("_") and id(v) not in inner}
    return repr(value)


class BfclExecutor(PythonObjectExecutor):
    """Instantiates BFCL classes, loads each with its part of c0 (keyed by class name, as BFCL's `initial_config`)
    through `_load_scenario`, and calls their methods with keyword arguments.

    Omitted parameters with a mutable default (`tags: List[str] = []`) get a fresh copy on every call, so one
    call's mutation of a shared default list cannot leak into other calls, instances or replays.
    """

    def __init__(self, classes: list[type], long_context: bool = False, timeout: float = 5.0) -> None:
        super().__init__(classes, timeout=timeout)
        self.long_context = long_context

    def _new_instance(self, cls: type, c0: dict[str, Any]) -> Any:
        """An instance of `cls` loaded with c0[class name]; stateless classes (no `_load_scenario`) are left as made."""
        inst = cls()
        loader = getattr(inst, "_load_scenario", None)
        if loader is not None:
            loader(json_copy(c0.get(cls.__name__, {})), long_context=self.long_context)
        return inst

    def _method(self, name: str) -> Any:
        """The bound public method called `name`, wrapped to copy mutable defaults; or None."""
        fn = super()._method(name)
        if fn is None:
            return None
        mutable = {p.name: p.default for p in inspect.signature(fn).parameters.values()
                   if isinstance(p.default, (list, dict, set))}
        if not mutable:
            return fn

        @functools.wraps(fn)
        def with_fresh_defaults(**kwargs: Any) -> Any:
            fresh = {k: copy.deepcopy(v) for k, v in mutable.items() if k not in kwargs}
            return fn(**fresh, **kwargs)

        return with_fresh_defaults

    def state(self) -> dict[str, Any]:
        """Each instance's public attributes as plain JSON, by class name (what BFCL's state checker compares)."""
        return {name: plain_state(inst) for name, inst in self.instances.items()}
