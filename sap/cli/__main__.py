"""`python -m sap.cli`."""
from sap.cli.main import run

run()
