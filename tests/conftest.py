"""Shared pytest setup for npdynamo's tests (kept minimal; fixtures live next to their tests)."""

import os
import sys

# Tracing stops after dynamo.config.max_trace_seconds of the compiling thread's CPU time. That
# still depends on the machine's speed; the tests count instructions instead (max_instructions),
# which is deterministic. Set before any test imports dynamo; subprocesses inherit it.
os.environ.setdefault("DYNAMO_MAX_TRACE_SECONDS", "600")

# Every test runs with the guard self-check on: the C hook evaluates both the C guard program and
# the Python guard text for every cache lookup and raises AssertionError when they disagree
# (dynamo.config.guard_self_check; off by default for users). Subprocesses inherit it.
os.environ.setdefault("DYNAMO_GUARD_SELF_CHECK", "1")
if os.environ["DYNAMO_GUARD_SELF_CHECK"] == "1" and "dynamo.config" in sys.modules:
    # dynamo was imported before this file (e.g. by the dynamo pytest plugin): too late for the
    # environment variable, so switch the option itself
    sys.modules["dynamo.config"].guard_self_check = True
