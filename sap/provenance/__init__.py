"""Provenance: field matching between results and parameters, binding rules, chain statistics."""
