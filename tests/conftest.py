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

# npdynamo's own diagnostics (an internal error's fallback, a cache limit) go to logging only by
# default, so a user's program cannot see them. The suite asks for them as warnings too
# (dynamo.config.emit_warnings): many tests catch an internal error through its warning, e.g.
# with warnings.simplefilter("error"). The default is tested in
# tests/dynamo/test_no_warnings_leak.py (and by the -W error lane of .ci/run, which sets
# DYNAMO_EMIT_WARNINGS=0). Subprocesses inherit it.
os.environ.setdefault("DYNAMO_EMIT_WARNINGS", "1")
if os.environ["DYNAMO_EMIT_WARNINGS"] == "1" and "dynamo.config" in sys.modules:
    sys.modules["dynamo.config"].emit_warnings = True  # (imported before this file: see above)

# The stack size of every code object npdynamo assembles is computed in one pass
# (dynamo.stack_depth) and, in the suite, checked against `bytecode`'s control-flow graph
# (dynamo.config.debug_check_stack_size): a difference raises. Subprocesses inherit it.
os.environ.setdefault("DYNAMO_DEBUG_CHECK_STACK_SIZE", "1")
if os.environ["DYNAMO_DEBUG_CHECK_STACK_SIZE"] == "1" and "dynamo.config" in sys.modules:
    sys.modules["dynamo.config"].debug_check_stack_size = True  # (imported before this file)
