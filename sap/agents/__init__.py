"""Agent roles (FSM builder, planner, messenger); each has a rule implementation usable offline."""
