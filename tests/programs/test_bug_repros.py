"""Minimal repros of the npdynamo bugs the program corpus found (see `BUGS` in test_corpus.py).

Each test of an open bug is a strict xfail: when a fix lands the test passes, pytest
reports XPASS as a failure, and the marker (and the corpus's `BUGS` entry) should be removed.
NumPy is the oracle.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dynamo
from dynamo.backends.c import make_backend


class _Model:
    def forward(self, x):
        print("forward", x.shape)  # cannot be captured: the caller's graph breaks at the call
        return x * 2


def _calls_method(model, x):
    return model.forward(x)


def test_break_at_a_method_call_keeps_self(capsys):
    # Was a bug (fixed while the corpus was written): the call was replayed without `self`.
    x = np.arange(3.0)
    expected = _calls_method(_Model(), x)
    actual = dynamo.compile(_calls_method)(_Model(), x)
    np.testing.assert_array_equal(actual, expected)
    assert capsys.readouterr().out == "forward (3,)\n" * 2


def _sum_axis0(x):
    return x.sum(axis=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_c_sum_over_leading_axis_matches_numpy_bits(dtype):
    x = (np.arange(60) / 7).astype(dtype).reshape(20, 3)
    actual = dynamo.compile(_sum_axis0, backend=make_backend(min_size=0, calibrate=False))(x)
    assert actual.tobytes() == x.sum(axis=0).tobytes(), (actual, x.sum(axis=0))


def _cube(x):
    return x ** 3


def test_c_integer_power_matches_numpy_bits():
    # Fixed (issue 8): float x ** 3 stays a NumPy call (NumPy's own pow).
    x = np.linspace(-2.5, 3.3, 50)
    actual = dynamo.compile(_cube, backend=make_backend(min_size=0, calibrate=False))(x)
    assert actual.tobytes() == (x ** 3).tobytes()


_NAMEDTUPLE_PROGRAM = '''
import collections
import numpy as np
import dynamo

Point = collections.namedtuple("Point", "x y")


class Thing:
    pass


def make(value):
    return Point(value, 2)


def f(x):
    for value in (1, 1.0, "a", b"b", (), [], {}, None, 2j, Thing()):
        make(value)
    return x + 1


print(dynamo.compile(f)(np.arange(3.0)))
'''


def test_namedtuple_constructors_do_not_hit_the_cache_limit(tmp_path):
    # Was a bug (fixed while the corpus was written, dynamo.config.skip_modules): namedtuple's
    # __new__ (<string> code) was captured and recompiled per argument type until the
    # cache-limit RuntimeWarning.
    # In a fresh process: the first np.median under dynamo.compile imports numpy.ma, whose
    # import builds inspect.Signature namedtuples and warns the same way.
    script = tmp_path / "namedtuples.py"
    script.write_text(_NAMEDTUPLE_PROGRAM)
    root = Path(dynamo.__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-W", "error", str(script)], capture_output=True,
                          text=True, timeout=120, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[1. 2. 3.]"


def _total(a):
    return a.sum()


def test_c_full_sum_of_a_transposed_array_matches_numpy_bits():
    x = (np.arange(12.0) / 7).reshape(4, 3).T  # F-ordered (3, 4)
    actual = dynamo.compile(_total, backend=make_backend(min_size=0, calibrate=False))(x)
    assert actual == x.sum(), (actual, x.sum())  # 9.428571428571427 vs 9.428571428571429


def _report_line(x, name="loss"):
    value = float(x.sum())  # graph break: the rest runs in a resume function
    return "{name}: {value:.3f}".format(**locals())


def test_locals_after_a_graph_break_has_every_variable():
    x = np.arange(3.0)
    assert dynamo.compile(_report_line)(x) == _report_line(x) == "loss: 3.000"
