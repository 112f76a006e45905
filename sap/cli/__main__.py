"""`python -m sap.cli`."""
import sys

from sap.cli.main import main

sys.exit(main())
