"""sap tasks as live RL environments: an episode per task on a real executor, a task catalog, an HTTP server, and
the TRL adapter (sap.envs.trl) and
the verl adapter (sap.envs.verl; its config files: sap.envs.verl_config)."""
from sap.envs.catalog import TaskCatalog
from sap.envs.episode import Step, ToolEnv, gold_message, rewards_row
from sap.envs.server import EnvServer

__all__ = ["EnvServer", "Step", "TaskCatalog", "ToolEnv", "gold_message", "rewards_row"]
