"""Executor over BFCL's multi-turn backend classes: keyword-argument method calls, never evaluated call strings."""
from __future__ import annotations

import copy
import functools
import inspect
import json
import re
from decimal import Decimal
from typing import Any

from sap.executors.failures import FailureShape
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


def contains_itself(value: Any, seen: frozenset[int] = frozenset()) -> bool:
    """Whether a dict or list inside `value` holds something that encloses it (a folder copied into itself lists
    itself among its contents), which BFCL's state comparison cannot end on. An attribute pointing straight back
    at an enclosing object (a directory's parent) is a back-reference, not a cycle."""
    if id(value) in seen:
        return True
    inner = seen | {id(value)}
    if isinstance(value, (dict, list, tuple)):
        return any(contains_itself(v, inner) for v in (value.values() if isinstance(value, dict) else value))
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return any(contains_itself(v, inner) for k, v in vars(value).items()
                   if not k.startswith("_") and id(v) not in inner)
    return False


BFCL_FAILURE_SHAPES = (
    FailureShape("authentication_status"),  # TwitterAPI.authenticate_twitter with wrong credentials
    FailureShape("login_status", tools=frozenset({"message_login"})),  # the status queries answer False normally
    FailureShape("success"),  # TicketAPI's ticket_login / logout
    FailureShape("booking_status"),  # TravelAPI: each False comes with an "error"
    FailureShape("cancel_status"),
    FailureShape("insurance_status"),
    FailureShape("verification_status"),  # TravelAPI.verify_traveler_information: another person, under 18, ...
    FailureShape("follow_status"),  # TwitterAPI: False means "already following": nothing was done
    FailureShape("unfollow_status"),
)
"""BFCL's soft failures: result flags its backends set False when the call did not do what it was asked (their
hard failures are `{"error": ...}`, `[{"error": ...}]` and `["Error: ..."]`, which every executor fails)."""

NOT_FOUND = re.compile(r"[\w ]{0,30}\bnot found\.?", re.I)


def json_result(value: Any) -> Any:
    """A result with non-JSON numbers (MathAPI's `Decimal` and mpmath `mpf`) as floats and Ellipsis items left out
    of lists (TradingBot's long-context watchlist extension ends in a literal `...`); everything else as is."""
    if isinstance(value, dict):
        return {k: json_result(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_result(v) for v in value if v is not Ellipsis]
    if isinstance(value, (Decimal, mpf_types())):
        return float(repr(value).split("'")[1])  # the digits BFCL shows: its str() of a result dict uses repr()
    return value


def not_found_answer(result: Any) -> str | None:
    """The text of a lookup that found nothing but answered normally (TradingBot's {"symbol": "Stock not found"}),
    so it counts as a failed call whose placeholder no later argument can pick up; None for a real answer."""
    if isinstance(result, dict) and "error" not in result:
        for value in result.values():
            if isinstance(value, str) and NOT_FOUND.fullmatch(value.strip()):
                return value
    return None


@functools.lru_cache(maxsize=1)
def mpf_types() -> tuple[type, ...]:
    """mpmath's real number type, if mpmath is installed (MathAPI needs it)."""
    try:
        import mpmath
    except ImportError:
        return ()
    return (mpmath.mpf,)


class BfclExecutor(PythonObjectExecutor):
    """Instantiates BFCL classes, loads each with its part of c0 (keyed by class name, as BFCL's `initial_config`)
    through `_load_scenario`, and calls their methods with keyword arguments.

    A lookup that answers a bare "... not found" string (instead of an error) is an error result here, and so are
    BFCL's soft failures (`BFCL_FAILURE_SHAPES`: a failed login's `{"authentication_status": false}`, ...).
    Results with Decimal or mpmath numbers come back as floats (BFCL itself would show their str()), and lists
    without the Ellipsis that closes a long-context extension list.
    Omitted parameters with a mutable default (`tags: List[str] = []`) get a fresh copy on every call, so one
    call's mutation of a shared default list cannot leak into other calls, instances or replays.
    """

    def __init__(self, classes: list[type], long_context: bool = False, timeout: float = 5.0) -> None:
        super().__init__(classes, timeout=timeout, failure_shapes=BFCL_FAILURE_SHAPES)
        self.long_context = long_context

    def _new_instance(self, cls: type, c0: dict[str, Any]) -> Any:
        """An instance of `cls` loaded with c0[class name]; stateless classes (no `_load_scenario`) are left as made."""
        inst = cls()
        loader = getattr(inst, "_load_scenario", None)
        if loader is not None:
            loader(json_copy(c0.get(cls.__name__, {})), long_context=self.long_context)
            if self.long_context:  # long-context loaders link module-level extension records (TravelAPI's extra
                # cards) into the instance; a copy keeps one instance's spending out of every later one
                vars(inst).update(copy.deepcopy(vars(inst)))
        return inst

    def _method(self, name: str) -> Any:
        """The bound public method called `name`, wrapped to copy mutable defaults and give JSON numbers; or None."""
        fn = super()._method(name)
        if fn is None:
            return None
        mutable = {p.name: p.default for p in inspect.signature(fn).parameters.values()
                   if isinstance(p.default, (list, dict, set))}

        @functools.wraps(fn)
        def call(**kwargs: Any) -> Any:
            fresh = {k: copy.deepcopy(v) for k, v in mutable.items() if k not in kwargs}
            result = json_result(fn(**fresh, **kwargs))
            if any(contains_itself(inst) for inst in self.instances.values()):
                raise ValueError(f"{name} would make a structure contain itself")  # execute() restores the state
            miss = not_found_answer(result)
            return {"error": f"{name}: {miss}"} if miss else result

        return call

    def state(self) -> dict[str, Any]:
        """Each instance's public attributes as plain JSON, by class name (`compared_state`), and a file system's
        current folder as `_cwd`: BFCL keeps it private, but `cd` changes what every later call sees, so a call
        after a `cd` is not a repeat of the same call before it, and a replay that ends elsewhere differs."""
        out = self.compared_state()
        for name, inst in self.instances.items():
            if getattr(inst, "_current_dir", None) is not None and callable(getattr(inst, "pwd", None)):
                out[name] = {**out[name], "_cwd": inst.pwd()["current_working_directory"]}
        return out

    def compared_state(self) -> dict[str, Any]:
        """Each instance's public attributes as plain JSON, by class name: what BFCL's state checker compares."""
        return {name: plain_state(inst) for name, inst in self.instances.items()}
