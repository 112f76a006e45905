"""How long a claimed slot stays a worker's: a constant the command line's help shows without loading the store."""

LEASE_SECONDS = 60.0  # a claimed slot is a worker's this long unless renewed; then another may take it
