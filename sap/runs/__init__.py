"""Runs: durable, resumable, multi-worker execution of slot programs over the run store."""
