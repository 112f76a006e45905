"""Executors: run tool calls against a stateful environment, with rollback and replay."""
from sap.executors.base import replay
from sap.executors.python_object import PythonObjectExecutor
from sap.model import ExecResult, Executor

__all__ = ["Executor", "ExecResult", "PythonObjectExecutor", "replay"]
