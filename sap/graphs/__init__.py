"""LangGraph wiring of the synthesis pipeline."""
from sap.graphs.synthesis import SynthesisContext, synthesis_graph

__all__ = ["SynthesisContext", "synthesis_graph"]
