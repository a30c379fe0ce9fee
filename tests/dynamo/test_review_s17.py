"""Regression tests for bugs found reviewing session 17's changes (helper-31).

A test still marked strict xfail is a bug not fixed yet (the mark goes with the fix). The
oracle is plain Python: a subprocess runs the same program without npdynamo and with it.
Repros with more comments: /tmp/h31/repro_*.py (the review's report).
"""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import dynamo
from dynamo import config

# A recursion through C (map) under a raised recursion limit: plain Python stops it with
# RecursionError when the C recursion budget runs out (3.12+); 3.10/3.11 plain die of SIGSEGV.
_C_RECURSION = """
import sys
import numpy as np
import dynamo
sys.setrecursionlimit(100000)

def f(x, n):
    return list(map(lambda v: f(v, n + 1), [x]))

try:
    if sys.argv[1:] == ["compiled"]:
        with dynamo.optimize("eager"):
            f(np.arange(3.0), 0)
    else:
        f(np.arange(3.0), 0)
except RecursionError:
    print("RecursionError")
"""


def _run(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(_C_RECURSION), mode],
                          capture_output=True, text=True, timeout=120)


def test_a_recursion_through_c_raises_recursion_error_as_plain_python():
    plain = _run("plain")
    if plain.returncode != 0:
        pytest.skip("plain Python itself overflows the C stack here (no C recursion budget)")
    assert "RecursionError" in plain.stdout
    compiled = _run("compiled")
    assert compiled.returncode == 0, compiled.stderr[-2000:]
    assert "RecursionError" in compiled.stdout


def _add_one(x):
    return x + 1


def test_a_dead_callback_with_a_failed_code_leaves_no_garbage():
    def backend(gm, example_inputs):
        raise RuntimeError("this backend always fails")

    with config.patch(suppress_errors=True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = dynamo.compile(_add_one, backend=backend)
        compiled(np.arange(3.0))
        compiled(np.arange(3.0))
    gc.collect()  # (whatever the compile itself left)
    del compiled, backend  # the callback (ConvertFrame) dies with its backend
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        found = gc.collect()
        kinds = sorted({type(o).__name__ for o in gc.garbage})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert found == 0, kinds


def _comprehension_after_a_break_in_a_try(x):
    try:
        print("break")
        zs = {k: v.sum() for k, v in enumerate([x, x])}
    finally:
        pass
    return zs


def test_an_inlined_comprehension_after_a_break_in_a_try_block(capsys):
    x = np.arange(3.0)
    expected = _comprehension_after_a_break_in_a_try(x)
    got = dynamo.compile(_comprehension_after_a_break_in_a_try, backend="eager")(x)
    assert got.keys() == expected.keys()
    assert all(float(got[k]) == float(expected[k]) for k in expected)


def _many_locals_and_a_cell(x):
    a0, a1, a2, a3, a4, a5, a6, a7 = (x + k for k in range(8))
    b0, b1, b2, b3, b4, b5, b6, b7 = (x * k for k in range(8))
    get = lambda: a0  # noqa: E731 (a0 is a cell variable)
    print("break")
    s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7
    t = b0 + b1 + b2 + b3 + b4 + b5 + b6 + b7
    return s * t + get()


def test_a_resume_function_with_a_cell_and_many_locals_is_captured(capsys):
    x = np.arange(3.0)
    out = dynamo.explain(_many_locals_and_a_cell)(x)
    assert out.graph_count == 2, out.break_reasons
