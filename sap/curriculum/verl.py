"""Adapter between the RODS active pool and verl's PPO/GRPO trainer: task records as verl dataset rows, and a
curriculum sampler for verl's `data.sampler` hook that draws each step's batch from the pool, reports every task's
rollout rewards back (from the batch verl hands to `update`) and ends a pool epoch every `epoch_steps` steps.

verl is not a dependency of sap; when it is importable the sampler subclasses its `AbstractCurriculumSampler`.
Wiring (verl's Hydra overrides):

    data.sampler.class_path=pkg://sap.curriculum.verl  data.sampler.class_name=PoolCurriculumSampler
    data.dataloader_num_workers=0   (verl requires it for curriculum samplers: batches are drawn one at a time)
    +data.sap_pool=NAME             (the name given to `register_pool`; "default" if absent)

and a dataset whose `__getitem__(i)` builds its sample from `rows[i]` (`PoolRows`, which grows as tasks are
injected), e.g. a subclass of verl's RLHFDataset named in `data.custom_cls.path` / `data.custom_cls.name`. Rows are
`sap.export.verl.verl_row`s; `extra_info["task_id"]` names the pool task. The reward function
(`custom_reward_function.path` / `.name`, e.g. `sap.rewards.verl.compute_score`) returns a dict whose key named by
`PoolConfig.zone_reward` ("progress" by default, or "graduated") holds that reward in [0, 1]: verl copies the extra
keys of the dict into `non_tensor_batch`, where the sampler reads them, so the zones see the reward they were set
for whatever reward the policy is trained on.
"""
from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterator

from sap.curriculum.pool import ActivePool
from sap.export.verl import verl_row

try:  # verl's curriculum-sampler interface, when verl is installed
    from verl.experimental.dataset.sampler import AbstractCurriculumSampler as _SamplerBase
except Exception:  # verl (or torch) absent: a plain base with the same constructor and methods
    _SamplerBase = object


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
        return verl_row(task_id, self.pool.payload(task_id), self.data_source, index=i)


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
    `update(batch)` reports the batch's zone rewards per task (`non_tensor_batch[pool.config.zone_reward]`),
    calling `pool.end_epoch()` every `epoch_steps` updates."""

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
        task, `non_tensor_batch[zone_reward]` holds the rewards); every `epoch_steps` updates, end the pool epoch.
        KeyError naming the key and the keys present when the reward function did not return the zone reward."""
        key = self.binding.pool.config.zone_reward
        if key not in batch.non_tensor_batch:
            raise KeyError(f"the batch has no {key!r} rewards (PoolConfig.zone_reward): the reward function must "
                           f"return a dict with key {key!r}; batch keys: {', '.join(sorted(batch.non_tensor_batch))}")
        rewards: dict[str, list[float]] = defaultdict(list)
        for info, value in zip(batch.non_tensor_batch["extra_info"], batch.non_tensor_batch[key]):
            rewards[info["task_id"]].append(float(value))
        for task_id, values in rewards.items():
            self.binding.pool.report(task_id, values)
        self.updates += 1
        if self.updates % self.binding.epoch_steps == 0:
            self.binding.pool.end_epoch()
