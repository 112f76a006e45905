"""When a run should stop rather than burn its slots: an outage (consecutive transient LLM failures, a hang) or a
run whose first slots all fail the same way; and which exceptions are infrastructure, not a trajectory's bug."""
from __future__ import annotations

import re
import sqlite3
import threading

from sqlalchemy.exc import SQLAlchemyError

OUTAGE_FAILURES = 3  # consecutive transient role failures (retries included) that pause a run
FIRST_FAILURES = 5  # a run whose first this-many slots all failed for one reason stops early


def is_infrastructure(exc: BaseException | None) -> bool:
    """Whether `exc` (or what caused it) is the run database's or the disk's: such errors stop the run with their
    own message instead of failing one slot."""
    while exc is not None:
        if isinstance(exc, (SQLAlchemyError, sqlite3.Error, OSError)) or type(exc).__module__.startswith("psycopg"):
            return True
        exc = exc.__cause__
    return False


def failure_cause(reason: str) -> str:
    """What a failed slot's reason says went wrong, without its details or the role that met it: `LLM (m) failed,
    rejected` (a wrong key fails the FSM builder in one slot and the planner in the next: one cause) or the
    exception type of a crash (`ValueError`)."""
    return re.sub(r"^LLM role '[^']*' ", "LLM ", reason.partition(": ")[0])


class RunHealth:
    """Counts one driver's slot outcomes and says when the run should stop, and why (thread-safe)."""

    def __init__(self, outage_failures: int = OUTAGE_FAILURES, first_failures: int = FIRST_FAILURES) -> None:
        self.outage_failures, self.first_failures = outage_failures, first_failures
        self._consecutive = 0
        self._first: list[str | None] = []  # the cause of each of the first slots' failure; None: it did not fail
        self._lock = threading.Lock()

    def transient(self, error: str, timed_out: bool) -> str | None:
        """A slot's role gave up on a transient error (the slot goes back to pending): why the run pauses, if it
        should (a hang at once; other errors after `outage_failures` in a row), else None."""
        with self._lock:
            self._consecutive += 1
            if timed_out:
                return f"the LLM server did not answer in time ({error})"
            if self._consecutive >= self.outage_failures:
                return f"{self._consecutive} slots in a row hit a transient LLM failure (last: {error})"
            return None

    def finished(self, failed_reason: str | None) -> str | None:
        """A slot ended (`failed_reason` if it failed, else None): why the run stops early, if the first
        `first_failures` slots all failed for one cause, else None."""
        with self._lock:
            self._consecutive = 0
            if len(self._first) >= self.first_failures:
                return None
            self._first.append(None if failed_reason is None else failure_cause(failed_reason))
            causes = set(self._first)
            if len(self._first) == self.first_failures and len(causes) == 1 and None not in causes:
                return f"the first {self.first_failures} slots all failed the same way: {failed_reason}"
            return None
