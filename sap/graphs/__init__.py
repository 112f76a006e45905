"""LangGraph wiring of the synthesis pipeline."""
from sap.graphs.synthesis import ExecutorPool, SynthesisContext, synthesis_graph

__all__ = ["ExecutorPool", "SynthesisContext", "synthesis_graph"]
