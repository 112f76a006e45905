"""Cache environment: recorded API responses answered by a validating cache executor, workflow templates,
constraint-aware sampling and query generation for constrained synthesis."""
from sap.cache.executor import NO_RESULTS, CacheExecutor
from sap.cache.index import CacheIndex, Entry
from sap.cache.recorder import CallableExecutor, Recorder
from sap.cache.rules import ParamRule, ToolRules, ToolValidator, Violation

__all__ = ["NO_RESULTS", "CacheExecutor", "CacheIndex", "CallableExecutor", "Entry", "ParamRule", "Recorder",
           "ToolRules", "ToolValidator", "Violation"]
