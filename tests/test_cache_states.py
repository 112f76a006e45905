"""Stateful tools in the cache: responses are recorded and looked up in the executor state they were made in, so a
sampled chain never joins responses from two initial configurations, or a lookup from before a write with one after."""
from __future__ import annotations

import copy
import random

from sap.cache import CacheExecutor, Recorder
from sap.cache.collect import Collector
from sap.cache.index import STATE_KEY
from sap.cache.sampling import Sampler
from sap.cache.store import CacheStore
from sap.cache.templates import parse_templates
from sap.model import ExecResult, ToolCall, Toolset, ToolSpec
from sap.store import RunStore

# the same booking id names a hotel in configuration 0 and a flight in configuration 1
CONFIGS = {0: {"bookings": {"B1": {"booking_type": "hotel", "status": "confirmed"}}},
           1: {"bookings": {"B1": {"booking_type": "flight", "status": "confirmed"}}}}
BOOKING_ID = {"type": "object", "properties": {"booking_id": {"type": "string"}}, "required": ["booking_id"]}
SPECS = [ToolSpec(name="list_bookings", description="List the traveler's bookings.", read_only=True),
         ToolSpec(name="get_booking", description="Get one booking.", parameters=BOOKING_ID, read_only=True),
         ToolSpec(name="cancel_booking", description="Cancel a booking.", parameters=BOOKING_ID, read_only=False)]
TEMPLATES = """
templates:
  - name: list-get
    steps:
      - function: list_bookings
      - function: get_booking
        bind: {booking_id: {step: 0, path: "$.bookings[*].booking_id"}}
  - name: list-cancel-get
    steps:
      - function: list_bookings
      - function: cancel_booking
        bind: {booking_id: {step: 0, path: "$.bookings[*].booking_id"}}
      - function: get_booking
        bind: {booking_id: {step: 1, path: "$.booking_id"}}
"""


class Bookings:
    """A stateful booking API over a c0 of bookings."""

    def reset(self, c0):
        self.bookings = copy.deepcopy(c0["bookings"])

    def execute(self, call: ToolCall) -> ExecResult:
        if call.name == "list_bookings":
            return ExecResult(ok=True, value={"bookings": [{"booking_id": k, **v} for k, v in self.bookings.items()]})
        booking = self.bookings.get(call.args_exec.get("booking_id"))
        if booking is None:
            return ExecResult(ok=False, error="no such booking")
        if call.name == "cancel_booking":
            booking["status"] = "cancelled"
        return ExecResult(ok=True, value={"booking_id": call.args_exec["booking_id"], **booking})

    def snapshot(self):
        return copy.deepcopy(self.bookings)

    def restore(self, snap):
        self.bookings = copy.deepcopy(snap)

    def state(self):
        return {"bookings": self.bookings}


def _collected():
    toolset = Toolset(name="bookings", description="", tools=SPECS, executor_factory=Bookings,
                      sample_config=lambda seed: copy.deepcopy(CONFIGS[seed]))
    templates = parse_templates(TEMPLATES, {s.name: s for s in SPECS})
    recorder = Recorder(Bookings())
    Collector(toolset, recorder, starts=1).collect(templates, [0, 1])
    return recorder.index, {t.name: t for t in templates}


def test_a_chain_never_joins_two_initial_states_or_a_read_from_before_a_write():
    index, templates = _collected()
    sampler = Sampler(index)
    kinds = set()
    for k in range(40):
        steps = sampler.sample(templates["list-cancel-get"], random.Random(k)).steps
        listed, cancelled, got = (s.response for s in steps)
        kind = listed["bookings"][0]["booking_type"]
        assert cancelled["booking_type"] == got["booking_type"] == kind  # one configuration's B1 throughout
        assert got["status"] == "cancelled"  # the lookup after the cancellation, not the one list-get recorded
        kinds.add(kind)
        steps = sampler.sample(templates["list-get"], random.Random(k)).steps
        assert steps[1].response["booking_type"] == steps[0].response["bookings"][0]["booking_type"]
        assert steps[1].response["status"] == "confirmed"
    assert kinds == {"hotel", "flight"}  # both configurations are sampled, each on its own


def test_the_cache_executor_answers_a_chain_in_its_recorded_state(tmp_path):
    index, templates = _collected()
    sample = Sampler(index).sample(templates["list-cancel-get"], random.Random(3))
    assert set(sample.c0()) == {STATE_KEY}
    store = CacheStore(RunStore(f"sqlite:///{tmp_path / 'c.db'}"))
    store.save_tools("bookings", SPECS)
    assert store.save_index("bookings", index.entries.values()) == len(index)
    executor = store.load("bookings").executor()  # states survive the database
    executor.reset(sample.c0())
    get = ToolCall(call_id="g", name="get_booking", args_exec={"booking_id": "B1"}, args_prov={})
    assert executor.execute(get).value["status"] == "confirmed"  # before the write
    for step in sample.steps:
        res = executor.execute(ToolCall(call_id="c", name=step.function, args_exec=step.args, args_prov={}))
        assert res.ok and res.value == step.response
    assert executor.execute(get).value["status"] == "cancelled"  # the state the cancellation left
    executor.reset({})  # no state given: refused, naming the tool and the missing c0 key
    assert executor.execute(get).error.startswith("get_booking was recorded per initial state and this episode names "
                                                  "none: its c0 needs 'cache_state'")


def test_a_cache_table_from_before_states_gets_the_columns_and_stays_stateless(tmp_path):
    import sqlite3

    db = tmp_path / "old.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE sap_cache_entries (id INTEGER PRIMARY KEY AUTOINCREMENT, cache VARCHAR(200), "
                "function VARCHAR(200), digest VARCHAR(64), args JSON, response JSON, UNIQUE (cache, digest))")
    con.execute("INSERT INTO sap_cache_entries (cache, function, digest, args, response) VALUES "
                "('old', 'get_booking', 'd1', '{\"booking_id\": \"B1\"}', '{\"status\": \"confirmed\"}')")
    con.commit()
    con.close()
    store = CacheStore(RunStore(f"sqlite:///{db}"))
    store.save_tools("old", SPECS)
    executor = store.load("old").executor()
    executor.reset({})
    get = ToolCall(call_id="g", name="get_booking", args_exec={"booking_id": "B1"}, args_prov={})
    assert executor.execute(get).value == {"status": "confirmed"}
