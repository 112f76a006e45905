"""RODS: the active task pool of reward-driven online synthesis, its configuration and background synthesis."""
from sap.curriculum.config import PoolConfig
from sap.curriculum.pool import ActivePool, EpochReport, PoolTask

__all__ = ["ActivePool", "EpochReport", "PoolConfig", "PoolTask"]
