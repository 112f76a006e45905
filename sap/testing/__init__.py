"""Test doubles for sap users, tests and benchmarks: a scripted OpenAI-compatible LLM server."""
from sap.testing.scripted_llm import (CutOff, Hang, Junk, Malformed, Reply, SchemaViolation, ScriptedLLMServer, Status,
                                      ToolCalls)

__all__ = ["CutOff", "Hang", "Junk", "Malformed", "Reply", "SchemaViolation", "ScriptedLLMServer", "Status", "ToolCalls"]
