"""The LLM layer: structured LiteLLM calls per role with retries, client-side limits, usage and cost accounting."""
from sap.llm.client import LLMClient, LLMRoleError, is_transient, retry_after_seconds, sends_strict
from sap.llm.config import ModelConfig
from sap.llm.limits import LimiterRegistry, ModelLimiter
from sap.llm.schema import ResponseSchema, closed, containing, nullable, schema_errors, strict_ready
from sap.llm.structured import StructuredOutputError, extract_json, parse_structured
from sap.llm.usage import Budget, BudgetExceeded, RoleUsage, UsageLedger, response_cost

__all__ = ["Budget", "BudgetExceeded", "LLMClient", "LLMRoleError", "LimiterRegistry", "ModelConfig", "ModelLimiter",
           "ResponseSchema", "RoleUsage", "StructuredOutputError", "UsageLedger", "closed", "containing",
           "extract_json", "is_transient", "nullable", "parse_structured", "response_cost", "retry_after_seconds",
           "schema_errors", "sends_strict", "strict_ready"]
