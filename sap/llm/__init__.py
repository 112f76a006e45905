"""The LLM layer: structured LiteLLM calls per role with retries, client-side limits, usage and cost accounting.

The public names resolve on first use: `from sap.llm.config import ModelConfig` loads no LiteLLM, jsonschema or
tenacity."""
from sap.lazy import lazy_exports

_PUBLIC = {
    **dict.fromkeys(["LLMClient", "LLMRoleError", "is_transient", "retry_after_seconds", "sends_strict"],
                    "sap.llm.client"),
    "ModelConfig": "sap.llm.config",
    **dict.fromkeys(["LimiterRegistry", "ModelLimiter"], "sap.llm.limits"),
    **dict.fromkeys(["ResponseSchema", "closed", "containing", "nullable", "schema_errors", "strict_ready"],
                    "sap.llm.schema"),
    **dict.fromkeys(["StructuredOutputError", "extract_json", "parse_structured"], "sap.llm.structured"),
    **dict.fromkeys(["Budget", "BudgetExceeded", "RoleUsage", "UsageLedger", "response_cost"], "sap.llm.usage"),
}

__all__ = sorted(_PUBLIC)

__getattr__ = lazy_exports(__name__, _PUBLIC)
