"""Property: programs with control flow behave the same compiled by npdynamo as in plain Python.

In: `control_gen.control_programs` (Hypothesis) makes programs with data-dependent and constant
branches, generated helpers, lambdas, closures, short and long loops (the long ones under a small
``dynamo.config.max_instructions`` so their body is compiled as a loop body function),
``break``/``continue``/early ``return``, ``while`` loops, ``dynamo.graph_break()``, prints,
lists, tuple returns, in-place operations and code that raises. Each program is written to a
real ``.py`` file (so linecache and ``file:line`` work; npdynamo skips file names starting with
"<"), exec'd, and its ``f(x, y, n)`` run on deep copies of the same arguments: once in plain
Python (the oracle), then twice through ``dynamo.compile(f, backend=...)`` (first call: compile;
second: cache hit, which must capture no new graph when the program returns), then once more
on other values of the same types and shapes (the guards must pick a version valid for them, or
recompile).

Compared, exactly: the return value (type, dtype, shape, strides, bits with NaN == NaN; the shared
oracle in tests/support/oracle.py), which results are views of which arguments, the arguments after
the call, the exception raised (type and message), everything printed, and every warning
(category and message, in order: npdynamo's "internal error" fallback warns, so it fails here).
A run that takes longer than `TIMEOUT` seconds is a hang and fails.

Known open bugs are avoided by the generator (`control_gen.KNOWN_BUGS`).

Run more: ``DYNAMO_FUZZ_PROGRAMS=20000`` (examples for the eager backend; the C backend gets a
twentieth), ``DYNAMO_FUZZ_RANDOM=1`` (a new random seed instead of the derandomized one),
``DYNAMO_FUZZ_COLLECT=mismatches.txt`` (append every mismatch there and keep going, without
shrinking), ``DYNAMO_FUZZ_TRACE=current.txt`` (write each program there before running it: after
a crash, the file holds the culprit).
"""

from __future__ import annotations

import hashlib
import os
import pathlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from fuzz.control_gen import ControlProgram, control_programs
from support.oracle import check_generated

EXAMPLES = int(os.environ.get("DYNAMO_FUZZ_PROGRAMS", "2000"))
RANDOM = os.environ.get("DYNAMO_FUZZ_RANDOM", "") not in ("", "0")
COLLECT = os.environ.get("DYNAMO_FUZZ_COLLECT")
TRACE = os.environ.get("DYNAMO_FUZZ_TRACE")
TIMEOUT = 60  # seconds for one program (eager + two compiled calls); far above the normal 0.1 s


def _load(program: ControlProgram, directory: pathlib.Path) -> Callable:
    digest = hashlib.sha1(program.source.encode()).hexdigest()[:16]
    path = directory / f"ctl_{digest}.py"
    path.write_text(program.source)
    namespace: dict[str, Any] = {"__name__": f"ctl_{digest}", "__file__": str(path)}
    # exec of the generated code, compiled with the real file name (linecache, file:line)
    exec(compile(program.source, str(path), "exec"), namespace)  # noqa: S102
    return namespace["f"]


def check_program(program: ControlProgram, directory: pathlib.Path, backend_name: str) -> None:
    """AssertionError (with the program) when compiled `f` differs from plain `f`."""
    check_generated(program, _load(program, directory), backend_name, timeout=TIMEOUT,
                    collect=COLLECT, trace=TRACE)


def _settings(examples: int) -> settings:
    return settings(max_examples=examples, derandomize=not RANDOM, database=None, deadline=None,
                    suppress_health_check=list(HealthCheck), print_blob=True)


@pytest.fixture(scope="module")
def control_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return tmp_path_factory.mktemp("control_programs")


@given(program=control_programs())
@_settings(EXAMPLES)
def test_control_flow_programs_match_python_eager_backend(program, control_dir):
    check_program(program, control_dir, "eager")


@given(program=control_programs())
@_settings(max(1, EXAMPLES // 20))
def test_control_flow_programs_match_python_c_backend(program, control_dir):
    check_program(program, control_dir, "c")
