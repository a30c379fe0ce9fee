"""Shared pytest setup for npdynamo's tests (kept minimal; fixtures live next to their tests)."""

import os

# Tracing stops after dynamo.config.max_trace_seconds of wall time. On a busy machine that would
# make graph counts depend on the load; the tests count instructions instead (max_instructions),
# which is deterministic. Set before any test imports dynamo; subprocesses inherit it.
os.environ.setdefault("DYNAMO_MAX_TRACE_SECONDS", "600")
