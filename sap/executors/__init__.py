"""Executors: run tool calls against a stateful environment, with rollback and replay."""
from sap.executors.base import Executor, ExecResult, replay
from sap.executors.python_object import PythonObjectExecutor

__all__ = ["Executor", "ExecResult", "PythonObjectExecutor", "replay"]
