"""sap: synthesize multi-turn tool-use dialogues with executor-verified argument provenance."""
__version__ = "0.1.0"

from sap.api import SynthesisSummary, derive_seed, synthesize  # noqa: E402
from sap.model import FSM, ArgProvenance, Tag, ToolCall, Toolset, ToolSpec, Trajectory, Turn  # noqa: E402
from sap.toolsets import builtin_names, load_toolset  # noqa: E402

__all__ = ["FSM", "ArgProvenance", "SynthesisSummary", "Tag", "ToolCall", "ToolSpec", "Toolset", "Trajectory", "Turn",
           "__version__", "builtin_names", "derive_seed", "load_toolset", "synthesize"]
