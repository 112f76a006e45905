"""The store domain with a gate, for interruption tests: once the run database named by SAP_TEST_GATE_DB holds an
accepted record and the file named by SAP_TEST_GATE exists, every scenario load waits (after creating that file's
`.waiting` twin) until the file is removed. A run signalled then provably has work left."""
from __future__ import annotations

import os
import sqlite3
import time

from sap.toolsets.domains.store import DESCRIPTION, ERROR_RESULTS_CHANGE_NOTHING, OnlineStore, sample_config

NAME = "gated_store"
__all__ = ["DESCRIPTION", "ERROR_RESULTS_CHANGE_NOTHING", "NAME", "TOOL_CLASS", "sample_config"]


def _has_accepted(db: str) -> bool:
    """Whether the run database holds an accepted slot (False while it has no slot table)."""
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute("SELECT 1 FROM sap_slots WHERE status = 'accepted' LIMIT 1").fetchone() is not None
    except sqlite3.OperationalError:
        return False


class GatedStore(OnlineStore):
    """The online store, whose scenario loads wait at a closed gate once a record was accepted."""

    def _load_scenario(self, config: dict) -> None:
        gate = os.environ.get("SAP_TEST_GATE")
        if gate and os.path.exists(gate) and _has_accepted(os.environ["SAP_TEST_GATE_DB"]):
            open(gate + ".waiting", "w").close()
            while os.path.exists(gate):
                time.sleep(0.05)
        super()._load_scenario(config)


TOOL_CLASS = GatedStore
