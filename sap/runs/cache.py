"""Cache-mode runs: the run's config (cache, templates, writer), and a RunDriver whose slots run the cache graph,
so claiming, leases, checkpoints, resume and output work as in FSM mode."""
from __future__ import annotations

from typing import Any

from sap.agents.judge import Judge, RuleJudge
from sap.agents.llm_common import LLMRole
from sap.agents.llm_judge import LLMJudge
from sap.cache.query import LLMQueryWriter, QueryWriter, RuleQueryWriter
from sap.cache.store import CacheStore, LoadedCache
from sap.cache.templates import Template
from sap.graphs.cache_synthesis import CacheSynthesisContext, cache_synthesis_graph
from sap.llm import ModelConfig
from sap.prompts import prompt
from sap.runs.driver import (
    LEASE_SECONDS,
    FingerprintMismatch,
    RunDriver,
    fingerprint,
    fingerprint_parts,
    worker_name,
)
from sap.runs.slots import derive_seed
from sap.store.runs import RunStore

CACHE_PREFIX = "cache:"


def cache_run_config(n: int, seed: int, cache: LoadedCache, templates: list[Template], max_restarts: int = 20,
                     query_model: ModelConfig | None = None, judge_model: ModelConfig | None = None,
                     max_rewrites: int = 2) -> dict[str, Any]:
    """The settings a cache run is created with and fingerprinted by: the templates, the cache's size and content
    hash (a changed cache is a changed run, even at the same size), the query rewrites a text rejection allows
    and, with an LLM writer or judge, its model and prompt hash."""
    config: dict[str, Any] = {"target": n, "seed": seed, "mode": "cache", "cache": cache.name,
                              "cache_entries": len(cache.index), "cache_content": cache.content_hash,
                              "max_restarts": max_restarts, "max_rewrites": max_rewrites,
                              "templates": [t.model_dump(mode="json") for t in templates],
                              "max_slots": 5 * n + 20}
    if query_model is not None:
        config["query_model"] = query_model.public()
        config["query_prompt"] = prompt("cache_query").sha
    if judge_model is not None:
        config["judge_model"] = judge_model.public()
        config["judge_prompt"] = prompt("judge").sha
    return config


def start_cache_run(store: RunStore, cache: LoadedCache, config: dict[str, Any]) -> str:
    """Create a cache run (its templates stand where an FSM run keeps its FSM); the run id."""
    toolset = cache.toolset()
    parts = fingerprint_parts(toolset, config)
    return store.create_run(toolset.name, config, config["seed"], config["target"], fingerprint(parts), parts,
                            {"templates": config["templates"]})


class CacheRunDriver(RunDriver):
    """RunDriver over the cache graph: the cache is loaded from the run database, the templates from the run."""

    ready_below = None  # a cache slot reads no run-wide state: new slots never wait for lower ones

    def __init__(self, store: RunStore, run_id: str, toolset: Any = None, checkpointer: Any = None,
                 worker: str | None = None, lease_seconds: float = LEASE_SECONDS,
                 max_cost: float | None = None) -> None:
        self.store, self.run_id, self.checkpointer = store, run_id, checkpointer
        self.worker, self.lease_seconds = worker or worker_name(), lease_seconds
        self.lost: list[int] = []
        run = store.run(run_id)
        self.config, self.seed = run.config, run.seed
        self.client = self._client(max_cost)
        cache = self.cache = CacheStore(store).load(self.config["cache"])
        self.toolset = cache.toolset()
        writer: QueryWriter = RuleQueryWriter()
        if self.config.get("query_model"):
            writer = LLMQueryWriter(LLMRole(self.client, ModelConfig.model_validate(self.config["query_model"]),
                                            "query_writer"))
        judge: Judge = RuleJudge()
        if self.config.get("judge_model"):
            judge = LLMJudge(LLMRole(self.client, ModelConfig.model_validate(self.config["judge_model"]), "judge"))
        meta = {"cache": cache.name, "query_writer": "llm" if self.config.get("query_model") else "rule",
                "judge_agent": "llm" if self.config.get("judge_model") else "rule"}
        self.ctx = CacheSynthesisContext(toolset=self.toolset, index=cache.index,
                                         templates=[Template.model_validate(t) for t in self.config["templates"]],
                                         writer=writer, judge=judge, max_rewrites=self.config.get("max_rewrites", 2),
                                         max_restarts=self.config["max_restarts"], run_seed=run.seed, meta=meta)
        self.graph = cache_synthesis_graph(checkpointer)

    def check_fingerprint(self) -> None:
        """Refuse to continue, as FSM runs do, and also if the cache's entries changed since the run started."""
        super().check_fingerprint()
        now = {"cache_entries": len(self.cache.index), "cache_content": self.cache.content_hash}
        changes = [f"{key}: {self.config[key]!r} -> {value!r}" for key, value in now.items()
                   if key in self.config and self.config[key] != value]
        if changes:
            raise FingerprintMismatch(f"run {self.run_id} cannot be resumed: cache {self.cache.name!r} changed since "
                                      f"the run started ({'; '.join(changes)})")

    def _slot_input(self, index: int) -> dict[str, Any]:
        """The cache graph's input for a new slot: its index and seed."""
        return {"index": index, "seed": derive_seed(self.seed, index)}
