"""Plain Python as the oracle of a compiled loop: the value, the exception, the arrays' final
contents and the warnings of one call, compared to the letter (tests of loop kernels)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dynamo
from dynamo import loop_kernels

__all__ = ["check", "_run", "_same_value", "fresh_kernels"]


def _copy(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def _run(fn, args):
    args = _copy(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result, error = fn(*args), None
        except Exception as exc:  # (the oracle's exception is part of the outcome)
            result, error = None, (type(exc), str(exc))
    return result, error, args, [(w.category, str(w.message)) for w in caught]


def _same_value(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, (float, np.floating)):
        return np.array(a).tobytes() == np.array(b).tobytes()
    return a == b


def check(fn, *args, kernel=True):
    """`fn` compiled by the C backend behaves as plain Python, twice."""
    expected = _run(fn, args)
    compiled = dynamo.compile(fn, backend="c")
    for _ in range(2):
        got = _run(compiled, args)
        assert got[1] == expected[1], (got[1], expected[1])
        assert got[3] == expected[3], (got[3], expected[3])
        assert _same_value(got[0], expected[0]), (got[0], expected[0])
        for a, b in zip(got[2], expected[2]):
            assert _same_value(a, b), (a, b)
    if kernel is not None:  # (None: whichever; the outcome is what counts)
        assert bool(loop_kernels.kernels_for(fn.__code__)) == kernel
    return expected[0]


@pytest.fixture(autouse=True)
def fresh_kernels():
    """(autouse where imported) no compiled code and no loop kernel from an earlier test"""
    dynamo.reset()
    loop_kernels._built.clear()
    yield
    dynamo.reset()
