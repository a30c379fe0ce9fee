"""Tracebacks of errors raised in compiled code show the user's frames, lines and columns.

In: functions whose NumPy calls raise inside a graph (LinAlgError, IndexError, an errstate
that raises), on the eager and the C backend, and a division that raises at a graph break
instruction. Out: the traceback entries (function, file, line, source line and column marks)
plain Python shows, on the compiling call and on a cache hit. Oracle: the same function run
plainly.
"""

from __future__ import annotations

import traceback

import numpy as np
import pytest

import dynamo
from dynamo import _C
from support.hooked import no_capture_leak  # noqa: F401 (an autouse fixture)


def singular(x):
    a = x * 0.0
    b = a + 1.0
    return np.linalg.inv(b * 0.0)


def out_of_bounds(x, i):
    y = x + 1.0
    return y[i] * 2  # i is an index array: out of bounds is found when the graph runs


def _frames(fn, *args):
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - comparing whatever plain Python raises
        return type(exc), [(f.name, f.filename, f.lineno)
                           for f in traceback.extract_tb(exc.__traceback__)[1:]]
    raise AssertionError("no exception")


def _c_backend():
    from dynamo.backends.c import make_backend
    return make_backend(min_size=0, calibrate=False)


@pytest.mark.parametrize("backend", ["eager", "c"])
@pytest.mark.parametrize("fn, args", [(singular, (np.ones((2, 2)),)),
                                      (out_of_bounds, (np.ones(3), np.array([0, 7])))])
def test_tracebacks_show_the_users_frames(backend, fn, args):
    expected = _frames(fn, *args)
    compiled = dynamo.compile(fn, backend=_c_backend() if backend == "c" else backend)
    assert _frames(compiled, *args) == expected  # compiles
    assert _frames(compiled, *args) == expected  # cache hit
    assert _C.get_cache_entries(fn.__code__)


def _inverse(a):
    return np.linalg.inv(a)


def inverts_after_ops(x):
    y = x * 2.0
    z = y + 1.0
    w = _inverse(z - 1.0) * 3.0
    return w + z


def divides_under_raise(x):
    y = x - 1.0
    with np.errstate(divide="raise"):
        z = 1.0 / y
    return z


@pytest.mark.parametrize("fn, make", [
    (inverts_after_ops, lambda: np.ones((2, 2))),  # LinAlgError from numpy.linalg.inv
    (divides_under_raise, lambda: np.array([1.0, 2.0])),  # FloatingPointError
], ids=["linalg_error", "errstate_raise"])
@pytest.mark.parametrize("backend", ["eager", "c"])
def test_an_exception_inside_a_graph_shows_the_line_that_raised(fn, make, backend):
    # The frame's traceback entry had the line where tracing ended (the return), not the
    # statement whose NumPy call raised inside the graph.
    def entries(f):
        with pytest.raises(Exception) as info:
            f(make())
        return [(e.name, e.line) for e in traceback.extract_tb(info.value.__traceback__)
                if e.name == fn.__name__]

    expected = entries(fn)
    assert entries(dynamo.compile(fn, backend=backend)) == expected


def divides_by_zero(divisor):
    return 10 + divisor / 0 + 30


def test_traceback_through_a_break_instruction_shows_the_users_columns():
    def formatted(fn):
        try:
            fn(3)
        except ZeroDivisionError:
            return traceback.format_exc().splitlines()[-3:]

    assert formatted(dynamo.compile(divides_by_zero, backend="eager")) == formatted(divides_by_zero)
