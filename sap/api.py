"""The Python entry points: synthesize, resume and list durable runs, through the same RunDriver as `sap synthesize`."""
from __future__ import annotations

import re
import shutil
import tempfile
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sap.agents.config import AgentsConfig, build_agents_config
from sap.errors import UsageError
from sap.model import Toolset
from sap.runs.settings import DEFAULT_LIMITS, RunSettings, live_context
from sap.store.runs import RunStore, StoredRecords, existing_store, resume_command

# the toolsets and the pipeline (LangGraph, LiteLLM) loads inside the functions that run it: `sap runs` lists runs without it

OnRecord = Callable[[dict[str, Any]], None]


@dataclass
class Run:
    """A run as it ended in this call: its id and database, its accepted records in slot order, and why the other
    slots were dropped. Iterating it gives the records; `on_record` got each one as it was accepted. `records` reads
    them from the run database as needed (streamed when iterated; indexable, with a length), never all at once."""

    run_id: str
    db: str
    status: str
    target: int
    records: Sequence[dict[str, Any]] = field(default_factory=list)
    attempted: int = 0
    truncated: int = 0
    dropped: Counter = field(default_factory=Counter)
    rejections: list[dict[str, Any]] = field(default_factory=list)  # every dropped slot: index, reason, verdict, kind
    cost_usd: float = 0.0
    toolset_source: str | None = None  # the file the toolset loads from (domain module, MCP config), if any

    @property
    def accepted(self) -> int:
        """Number of accepted records."""
        return len(self.records)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """The accepted records in slot order."""
        return iter(self.records)

    def __len__(self) -> int:
        """Number of accepted records."""
        return len(self.records)

    def resume_command(self) -> str:
        """The command line that continues this run (naming its domain module's file, as the CLI's hint does)."""
        return resume_command(self.run_id, self.db, self.toolset_source)


def agents_settings(model: str | None = None, models: dict[str, str] | None = None, api_base: str | None = None,
                    api_key_env: str | None = None, agents_config: str | Path | AgentsConfig | None = None
                    ) -> AgentsConfig:
    """The agents of a run: a TOML file (or an AgentsConfig), then one model for every role, then per-role models."""
    if isinstance(agents_config, AgentsConfig):
        return agents_config
    return build_agents_config(agents_config, model_overrides={"model": model, "api_base": api_base,
                                                               "api_key_env": api_key_env}, role_models=models)


def find_run(store: RunStore, toolset: Toolset, settings: RunSettings, new_run: bool = False) -> str | None:
    """The run with these settings in `store` that the same call continues (None: start one, or `new_run`);
    UsageError naming the run and the changed settings if an unfinished run of this toolset has other settings."""
    from sap.runs.driver import find_resumable

    if new_run:
        return None
    run_id, why = find_resumable(store, toolset, settings.run_config())
    if why:
        other = re.search(r"run-\w+", why)
        raise UsageError(f"{why}; resume it with its own settings (sap resume {other[0] if other else ''} "
                         f"--db {store.url}) or start a new run (--new-run, new_run=True)")
    return run_id


def work(store: RunStore, run_id: str, toolset: Toolset | None, *, concurrency: int = 1,
         max_cost: float | None = None, on_record: OnRecord | None = None, live: dict[str, Any] | None = None,
         driver_cls: type | None = None, ray: Any = None) -> Run:
    """Work on a stored run until it is complete, exhausted or at its cost cap (with RunDriver, or `driver_cls`, e.g.
    the cache mode's; with `ray`, RayOptions, on Ray actors that load `toolset`, a name or an object); what it holds
    then."""
    from sap.runs.driver import RunDriver
    from sap.store.checkpoint import checkpointer_for

    if ray is not None:
        from sap.runs.ray_cluster import run_on_ray

        if on_record is not None:
            raise UsageError("on_record is not called on a Ray run (the actors store the records); read them from "
                             "the returned Run")

        done = run_on_ray(store, run_id, toolset, ray, max_cost=max_cost)
        return run_state(store, run_id, done.status)
    driver_cls = driver_cls or RunDriver
    with checkpointer_for(store.url) as saver:
        driver = driver_cls(store, run_id, toolset, saver, max_cost=max_cost, **({"live": live} if live else {}))
        done = driver.run(on_record=on_record, concurrency=concurrency)
    return run_state(store, run_id, done.status)


def run_state(store: RunStore, run_id: str, status: str | None = None) -> Run:
    """What run `run_id` holds: records, rejections and counts (`status` as the driver ended, else as stored)."""
    run = store.run(run_id)
    counts = store.counts(run_id)
    rejections = store.rejections(run_id)
    return Run(run_id, store.url, status or store.shown_status(run), run.target, StoredRecords(store, run_id),
               attempted=sum(counts.values()) - counts.get("running", 0) - counts.get("pending", 0),
               truncated=sum(bool(r["meta"].get("truncated")) for r in store.iter_records(run_id)),
               dropped=Counter(r["kind"] for r in rejections), rejections=rejections,
               cost_usd=store.usage(run_id).spent_usd(), toolset_source=store.toolset_source(run_id))


def synthesize(toolset: Toolset | str, n: int, *, seed: int = 0, model: str | None = None,
               models: dict[str, str] | None = None, api_base: str | None = None, api_key_env: str | None = None,
               agents_config: str | Path | AgentsConfig | None = None, db: str | None = None, concurrency: int = 1,
               max_cost: float | None = None, mix: dict[str, float] | None = None, max_slots: int | None = None,
               new_run: bool = False, on_record: OnRecord | None = None, ablations: Iterable[str] = (),
               ray: str | bool | None = None, actors: int | None = None, lease_seconds: float | None = None,
               **limits: Any) -> Run:
    """Synthesize `n` accepted trajectories for `toolset` as a durable run: on `db` (a run database URL; the same
    call again continues it) or, with db=None, on a temporary SQLite database removed with the returned Run (and its
    records).

    `model` makes every role an LLM role (`models={"judge": ...}` per role; `api_base` for a self-hosted server;
    `api_key_env` names the key's variable); `ablations` switch parts of the pipeline off by name ("no_tags",
    "no_retry", "no_repair", "no_fsm"; see `sap.runs.settings.ABLATIONS`), recorded in the run's fingerprint;
    `limits` are SynthesisContext limits (min_turns, max_turns, emphasis_size, ...) or, on a temporary database
    only, agent objects (planner=..., judge=...). `ray` (True, or a cluster address) runs the slots on `actors` Ray
    actors (default: one per cluster CPU) with `concurrency` slots each; it needs a PostgreSQL `db`."""
    from sap.runs.driver import start_run
    from sap.toolsets import load_toolset

    stored, live = live_context(limits)
    settings = RunSettings(n=n, seed=seed, mix=mix, max_slots=max_slots, limits={**DEFAULT_LIMITS, **stored},
                           agents=agents_settings(model, models, api_base, api_key_env, agents_config),
                           concurrency=concurrency, max_cost=max_cost, ablations=tuple(ablations))
    settings.check()
    options = ray_options(ray, actors, concurrency, lease_seconds, db)
    if db is not None and live:
        raise UsageError(f"{sorted(live)[0]}: agent objects are not stored with a run, so they need db=None; "
                         "name models instead (model=..., models={role: ...})")
    ts = load_toolset(toolset) if isinstance(toolset, str) else toolset
    temporary = tempfile.mkdtemp(prefix="sap-run-") if db is None else None
    store = RunStore(db or f"sqlite:///{Path(temporary, 'run.db')}")
    try:
        run_id = find_run(store, ts, settings, new_run) or start_run(store, ts, settings.run_config(), live)
        run = work(store, run_id, toolset if options else ts, concurrency=concurrency, max_cost=max_cost,
                   on_record=on_record, live=live, ray=options)
    except BaseException:
        if temporary:
            shutil.rmtree(temporary, ignore_errors=True)
        raise
    if temporary:  # removed with the store, which the Run's records hold
        store.engine.dispose()
        weakref.finalize(store, shutil.rmtree, temporary, ignore_errors=True)
    return run


def ray_options(ray: str | bool | None, actors: int | None, concurrency: int, lease_seconds: float | None,
                db: str | None) -> Any:
    """The RayOptions of the Python API's `ray=` (True, or a cluster address) and `actors=`, checked (Ray installed,
    a PostgreSQL `db`); None without `ray`."""
    if ray is None or ray is False:
        return None
    from sap.store.lease import LEASE_SECONDS
    from sap.runs.ray_cluster import RayOptions, check_database, import_ray

    options = RayOptions(address=None if ray is True else ray, actors=actors, concurrency=concurrency,
                         lease_seconds=lease_seconds or LEASE_SECONDS)
    options.check()
    check_database(db or "sqlite (db=None)")
    import_ray()
    return options


def resume(run_id: str, *, db: str, toolset: Toolset | str | None = None, concurrency: int = 1,
           max_cost: float | None = None, on_record: OnRecord | None = None, ray: str | bool | None = None,
           actors: int | None = None, lease_seconds: float | None = None) -> Run:
    """Continue a stored run from its checkpoints until its target is met (`toolset`: the domain module of a run
    over one, if it moved; `ray`, `actors`: on Ray actors, as in `synthesize`)."""
    from sap.runs.cache import CacheRunDriver
    from sap.toolsets import load_toolset

    options = ray_options(ray, actors, concurrency, lease_seconds, db)
    store = existing_store(db)
    run = store.run(run_id)
    if run.config.get("mode") == "cache":  # a cache run: its cache and templates are in the database
        return work(store, run_id, None, concurrency=concurrency, max_cost=max_cost, on_record=on_record,
                    driver_cls=CacheRunDriver, ray=options)
    name = None if isinstance(toolset, Toolset) else run_toolset_name(store, run_id, toolset)
    if options:  # each actor loads the toolset itself
        return work(store, run_id, toolset if name is None else name, max_cost=max_cost, ray=options)
    ts = toolset if name is None else load_toolset(name)
    if ts.source:  # given here: resume commands from now on name this file
        store.set_toolset_source(run_id, ts.source)
    return work(store, run_id, ts, concurrency=concurrency, max_cost=max_cost, on_record=on_record)


def run_toolset_name(store: RunStore, run_id: str, given: str | None) -> str:
    """The toolset to resume run `run_id` with: `given`, else the run's own when it runs no user code; the error
    for a domain module's run names the file the run was started from."""
    from sap.toolsets import UnknownToolset, data_toolset_name

    try:
        return data_toolset_name(store.run(run_id).toolset, given, f"run {run_id}'s toolset")
    except UnknownToolset as exc:
        if (source := store.toolset_source(run_id)) is None:
            raise
        raise type(exc)(f"{exc} (this run's: --toolset {source})") from None
