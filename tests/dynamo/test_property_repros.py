"""Minimal repros of what tests/fuzz/test_control_flow_property.py found, one test per bug.

In: small programs reduced by hand from generated ones; plain Python is the oracle. Out: pass,
or (for a bug still open) an expected failure marked ``xfail(strict=True)``: when the fix lands
the test passes, strict xfail turns that into a failure, and the marker must go (then also
remove the pattern's name from `KNOWN_BUGS` in tests/fuzz/control_gen.py, so the property test
generates it again). Each section is headed by the `KNOWN_BUGS` name it stands for.

A repro that hangs or nests frames without end runs in a subprocess (`_run_isolated`), which
counts npdynamo's graph-break log records and stops after `RUNAWAY_BREAKS` of them, so a
runaway fails in seconds instead of at the timeout.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import dynamo
from support.oracle import compare, make_backend, run

ROOT = Path(__file__).resolve().parents[2]

#: A correct compile of these repros logs a handful of graph breaks; a runaway logs one more
#: per nested frame it compiles.
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


def _run_isolated(body: str, directory: Path, timeout: float = 120) -> str:
    """Run `body` after `_PRELUDE` in a fresh interpreter, as a script file in `directory` (a
    real file, as in the property test: linecache and file:line work); its stdout.
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


def _check(fn, *args) -> None:
    """Plain `fn` vs ``dynamo.compile(fn, backend="eager")``, called twice: the same result,
    arguments after the call, output, exception and warnings (tests/support/oracle.py)."""
    eager = run(fn, args)
    compiled = dynamo.compile(fn, backend=make_backend("eager"))
    for attempt in ("first call", "second call (cache hit)"):
        compare(eager, run(compiled, args), attempt)


# while_graph_break_continue ------------------------------------------------------------------


# Fixed: a loop body function leaves out the code one iteration cannot reach (was: it copied it,
# backward jumps included, and planned a body function of itself without end).
def test_while_data_branch_continue_finishes(tmp_path):
    out = _run_isolated("""
        def f(x):
            c = 0
            while c < 3:
                c += 1
                if x.sum() > 100:
                    continue
            return c

        x = np.array([1.0, 2.0])
        try:
            print(dynamo.compile(f, backend="eager")(x), f(x))
        except Runaway as exc:
            print("runaway:", exc)
    """, tmp_path)
    assert out.split() == ["3", "3"], out


# return_in_loop_inside_while -----------------------------------------------------------------


def _return_from_for_in_while(x, y):
    c = 0
    while c < 5:
        c += 1
        for i in range(3):
            if y.sum() < 2.0:
                return x
    return y


# Fixed: a `return` inside a loop body function returns (RETURN, value) where it stands, so a
# loop nested in it sees a return, not a jump it would take for a `break`.
def test_return_from_for_loop_inside_while_loop():
    _check(_return_from_for_in_while, np.array([1.0, 2.0]), np.array([0.5, 0.25]))


# python_float_nan_sign ------------------------------------------------------------------------


def _times_python_float(s):
    return np.ones(2) * s


# Fixed: a NaN constant keeps its sign in the graph code (-float('nan')) and its guard checks
# the sign; after the value changed, the float is a graph input (unspecialised).
def test_negative_nan_python_float_keeps_its_sign():
    _check(_times_python_float, -math.nan)


# resume_of_helper_recompiles_per_value --------------------------------------------------------


def _scale_by_own_mean(t):
    return t * float(t.mean())


# Fixed: the float reaches the resume function as an argument; once its value changed it is
# a graph input (dynamo.dynamic_shapes.scalar_is_dynamic), not a constant guarded by value.
def test_float_of_data_at_a_break_does_not_recompile_per_value():
    compiled = dynamo.compile(_scale_by_own_mean, backend="eager")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(2 * dynamo.config.cache_size_limit):
            t = np.array([1.0, float(k)])
            assert np.array_equal(compiled(t), _scale_by_own_mean(t))
    assert [str(w.message) for w in caught] == []


# raise_on_empty_args_unguarded (new: found once try_except_then_call was removed) -------------


def _first_plus_one(*ts):
    return ts[0] + 1


# Fixed: when the user's code raises at a breakable instruction for these values
# (UserCodeError), the second trace still stops before that instruction, but now looks at
# (guards) the values on the stack there, so the entry matches only calls that raise too.
def test_a_call_that_raised_does_not_take_over_later_calls():
    backend = make_backend("eager")
    compiled = dynamo.compile(_first_plus_one, backend=backend)
    y = np.array([1.0, 2.0])
    assert np.array_equal(compiled(y), y + 1)
    with pytest.raises(IndexError, match="tuple index out of range"):
        compiled()
    before = backend.count
    assert np.array_equal(compiled(y), y + 1)
    assert backend.count == before, "the call with the same argument as before compiled again"


def _sine_plus_item(x, t, i):
    y = np.sin(x)
    return y + t[i]


def test_a_call_that_raised_after_a_graph_op_does_not_take_over_later_calls():
    backend = make_backend("eager")
    compiled = dynamo.compile(_sine_plus_item, backend=backend)
    x = np.ones(3)
    assert np.array_equal(compiled(x, (1.0,), 0), np.sin(x) + 1.0)
    with pytest.raises(IndexError, match="tuple index out of range"):
        compiled(x, (), 0)
    before = backend.count
    assert np.array_equal(compiled(x, (1.0,), 0), np.sin(x) + 1.0)
    assert backend.count == before, "the call with the same arguments as before compiled again"


# New, not a KNOWN_BUGS pattern: a crash found in the uncommitted tail-call work -------------


# An argument that is also a cell (a closure reads it), rebound after a graph break: the
# rebinding dropped a reference the cell never owned, so the caller's array was freed (garbage
# contents, or a crash). Fixed in 52df865; a subprocess, since a regression would crash.
def test_rebinding_a_cell_argument_after_a_break_keeps_the_callers_array(tmp_path):
    out = _run_isolated("""
        def f(x):
            a = x + 1
            dynamo.graph_break()
            x = 1
            def g():
                return x
            return a

        x = np.array([1.0, 2.0])
        for _ in range(3):
            print(dynamo.compile(f, backend="eager")(x).tolist(), x.tolist())
    """, tmp_path)
    assert out.splitlines() == ["[2.0, 3.0] [1.0, 2.0]"] * 3, out
