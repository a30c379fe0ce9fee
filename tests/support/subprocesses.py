"""Running a test's program in a fresh interpreter (a crash, a hang or a runaway of npdynamo's
must fail that test, not end the test session).

`run_python(code)`: ``python -c`` with the dedented `code`, its CompletedProcess. `run_isolated`
runs a script file after a prelude that counts npdynamo's graph-break log records and stops
after `RUNAWAY_BREAKS` of them (the ``Runaway`` exception), so a compile that nests frames
without end fails in seconds instead of at the timeout; its stdout, or AssertionError.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: A correct compile of the programs given to `run_isolated` logs a handful of graph breaks; a
#: runaway logs one more per nested frame it compiles.
RUNAWAY_BREAKS = 40

_PRELUDE = f"""
import logging
import numpy as np
import dynamo


class Runaway(BaseException):
    pass


class _CountBreaks(logging.Handler):
    seen = 0

    def emit(self, record):
        _CountBreaks.seen += 1
        if _CountBreaks.seen > {RUNAWAY_BREAKS}:
            raise Runaway(record.getMessage()[:400])


_log = logging.getLogger("dynamo.graph_breaks")
_log.setLevel(logging.INFO)
_log.addHandler(_CountBreaks())
_log.propagate = False
"""


def run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout)


def run_isolated(body: str, directory: Path, timeout: float = 120) -> str:
    """Run `body` after `_PRELUDE` in a fresh interpreter, as a script file in `directory` (a
    real file, as in the control-flow property test: linecache and file:line work); its stdout.
    AssertionError with the output when it fails, runs away or times out."""
    script = directory / "repro.py"
    script.write_text(_PRELUDE + textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"no result within {timeout} s (a hang)") from exc
    assert proc.returncode == 0, (
        f"exit code {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-3000:]}")
    return proc.stdout
