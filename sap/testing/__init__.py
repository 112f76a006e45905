"""Test doubles for sap users, tests and benchmarks: a scripted OpenAI-compatible LLM server."""
from sap.testing.scripted_llm import Hang, Malformed, Reply, SchemaViolation, ScriptedLLMServer, Status, ToolCalls

__all__ = ["Hang", "Malformed", "Reply", "SchemaViolation", "ScriptedLLMServer", "Status", "ToolCalls"]
