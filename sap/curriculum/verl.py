"""Adapter between the RODS active pool and verl's PPO/GRPO trainer: task records as verl dataset rows, and a
curriculum sampler for verl's `data.sampler` hook that draws each step's batch from the pool, reports every task's
rollout rewards back (from the batch verl hands to `update`) and ends a pool epoch every `epoch_steps` steps.

verl is not a dependency of sap; when it is importable the sampler subclasses its `AbstractCurriculumSampler`.
Wiring (verl's Hydra overrides):

    data.sampler.class_path=pkg://sap.curriculum.verl  data.sampler.class_name=PoolCurriculumSampler
    data.dataloader_num_workers=0   (verl requires it for curriculum samplers: batches are drawn one at a time)
    +data.sap_pool=NAME             (the name given to `register_pool`; "default" if absent)

and a dataset whose `__getitem__(i)` builds its sample from `rows[i]` (`PoolRows`, which grows as tasks are
injected), e.g. a subclass of verl's RLHFDataset named in `data.custom_cls.path` / `data.custom_cls.name`. The
reward function (`custom_reward_function.path` / `.name`, `compute_score(data_source, solution_str, ground_truth,
extra_info)`) must return the progress reward in [0, 1]; `extra_info["task_id"]` names the pool task.
"""
from __future__ import annotations

import json
import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterator

from sap.curriculum.pool import ActivePool

try:  # verl's curriculum-sampler interface, when verl is installed
    from verl.experimental.dataset.sampler import AbstractCurriculumSampler as _SamplerBase
except Exception:  # verl (or torch) absent: a plain base with the same constructor and methods
    _SamplerBase = object


def verl_row(task_id: str, record: dict[str, Any], data_source: str = "sap") -> dict[str, Any]:
    """A verl dataset row for a sap record: the prompt is the system message and the first user turn; the ground
    truth is the record itself as JSON (what a progress reward compares rollouts against); `extra_info` names the
    pool task and carries the tools and the initial configuration the rollout environment needs."""
    messages = record["messages"]
    first_user = next(i for i, m in enumerate(messages) if m["role"] == "user")
    return {"data_source": f"{data_source}/{record.get('meta', {}).get('toolset', '')}",
            "prompt": [{"role": m["role"], "content": m["content"]} for m in messages[:first_user + 1]],
            "ability": "tool_use",
            "reward_model": {"style": "rule", "ground_truth": json.dumps(record, ensure_ascii=False)},
            "extra_info": {"task_id": task_id, "tools": record["tools"], "initial_config": record["initial_config"]}}


class PoolRows:
    """The pool's tasks as an append-only indexed dataset: every task that was ever active keeps its index, so a
    verl DataLoader's indices stay valid while tasks are injected and retired."""

    def __init__(self, pool: ActivePool, data_source: str = "sap") -> None:
        self.pool, self.data_source = pool, data_source
        self.ids: list[str] = []
        self.index: dict[str, int] = {}
        self._lock = threading.Lock()
        self.sync()

    def sync(self) -> None:
        """Give an index to every active task that has none yet."""
        with self._lock:
            for task in self.pool.active():
                if task.id not in self.index:
                    self.index[task.id] = len(self.ids)
                    self.ids.append(task.id)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, Any]:
        task_id = self.ids[i]
        return verl_row(task_id, self.pool.payload(task_id), self.data_source)


@dataclass
class PoolBinding:
    """A registered pool with its rows and the sampler's schedule."""

    pool: ActivePool
    rows: PoolRows
    batch_size: int
    epoch_steps: int


_POOLS: dict[str, PoolBinding] = {}


def register_pool(pool: ActivePool, batch_size: int, epoch_steps: int, name: str = "default",
                  data_source: str = "sap") -> PoolRows:
    """Make `pool` reachable by the sampler verl builds (`+data.sap_pool=NAME`); its rows for the dataset."""
    if batch_size < 1 or epoch_steps < 1:
        raise ValueError(f"batch_size and epoch_steps must be at least 1, got {batch_size} and {epoch_steps}")
    rows = PoolRows(pool, data_source)
    _POOLS[name] = PoolBinding(pool, rows, batch_size, epoch_steps)
    return rows


def _config_get(config: Any, key: str, default: Any) -> Any:
    """A key of a dict or an OmegaConf DictConfig."""
    getter = getattr(config, "get", None)
    return getter(key, default) if getter is not None else default


class PoolCurriculumSampler(_SamplerBase):
    """verl's `data.sampler`: yields the dataset indices of `pool.sample_batch(batch_size)`, one step at a time, and
    `update(batch)` reports the batch's rewards per task (the sum of `token_level_scores` per sample, i.e. the
    sequence reward), calling `pool.end_epoch()` every `epoch_steps` updates."""

    def __init__(self, data_source: Any = None, data_config: Any = None) -> None:
        name = _config_get(data_config, "sap_pool", "default")
        if name not in _POOLS:
            raise KeyError(f"no sap pool registered as {name!r}; call sap.curriculum.verl.register_pool first "
                           f"(registered: {', '.join(sorted(_POOLS)) or 'none'})")
        self.binding = _POOLS[name]
        self.updates = 0

    def __len__(self) -> int:
        """Samples per epoch of the trainer's DataLoader: one pool epoch's batches."""
        return self.binding.batch_size * self.binding.epoch_steps

    def __iter__(self) -> Iterator[int]:
        b = self.binding
        for _ in range(b.epoch_steps):
            b.rows.sync()  # tasks injected since the last step get their indices
            for task in b.pool.sample_batch(b.batch_size):
                yield b.rows.index[task.id]

    def update(self, batch: Any, step_num: int | None = None) -> None:
        """Report each task's rollout rewards from a verl DataProto (`non_tensor_batch["extra_info"]` names the
        task, `batch["token_level_scores"]` holds the rewards); every `epoch_steps` updates, end the pool epoch."""
        infos = batch.non_tensor_batch["extra_info"]
        scores = batch.batch["token_level_scores"]
        rewards: dict[str, list[float]] = defaultdict(list)
        for info, row in zip(infos, scores):
            rewards[info["task_id"]].append(float(row.sum()))
        for task_id, values in rewards.items():
            self.binding.pool.report(task_id, values)
        self.updates += 1
        if self.updates % self.binding.epoch_steps == 0:
            self.binding.pool.end_epoch()
