"""The `sap` command line."""
from sap.cli.main import main

__all__ = ["main"]
