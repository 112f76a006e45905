"""The LLM layer: structured LiteLLM calls per role with retries, client-side limits, usage and cost accounting."""
from sap.llm.client import LLMClient, LLMRoleError, is_transient, retry_after_seconds
from sap.llm.config import ModelConfig
from sap.llm.limits import LimiterRegistry, ModelLimiter
from sap.llm.structured import StructuredOutputError, extract_json, parse_structured
from sap.llm.usage import Budget, BudgetExceeded, RoleUsage, UsageLedger, response_cost

__all__ = ["Budget", "BudgetExceeded", "LLMClient", "LLMRoleError", "LimiterRegistry", "ModelConfig", "ModelLimiter",
           "RoleUsage", "StructuredOutputError", "UsageLedger", "extract_json", "is_transient", "parse_structured",
           "response_cost", "retry_after_seconds"]
