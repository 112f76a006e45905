"""Request defaults every role's ModelConfig starts from, readable without loading pydantic (the CLI's help shows
them)."""

DEFAULT_STRUCTURED = "json_schema"  # how structured answers are asked for
DEFAULT_TIMEOUT = 60.0  # seconds per request
