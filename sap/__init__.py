"""sap: synthesize multi-turn tool-use dialogues with executor-verified argument provenance."""
__version__ = "0.1.0"
