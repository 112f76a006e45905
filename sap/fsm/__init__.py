"""FSM helpers: probing tools, the weighted walk over a provenance-tagged FSM."""
