"""Dtypes the translator computes reach graphs and generated code exactly, and no longer-lived.

In: functions whose graphs use dtypes that have no name ``numpy.dtype`` understands (a subarray
dtype, ``void192``; ``StringDType()``, ``StringDType128``), or whose name means another dtype
(one with metadata is not ``float64``), and functions that make a builtin dtype and keep
it across a graph break. Out: plain NumPy's results (dtype, metadata and all) with no internal
error, and ``sys.getrefcount`` of the dtype as in plain Python. The graph's Python code spelled
every dtype as ``numpy.dtype(dtype.name)`` (a TypeError in the code generator: NumPy's tests,
emcee's backend, h5py; metadata silently dropped), and the compiled code kept a dtype made while
tracing as a constant, one reference more than plain Python has (NumPy's
TestBincount::test_dtype_reference_leaks).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import dynamo
from dynamo.debug import cache_entries

STRING = np.dtypes.StringDType()
WITH_METADATA = np.dtype(np.float64, metadata={"unit": "m"})


def subarray_zeros(b):
    return np.zeros(2, np.dtype((b.dtype, b.shape[1:]))) + 1


def subarray_astype(x):
    return x.astype(np.dtype((np.float64, (2,)))) * 2


def string_zeros(x):
    return np.zeros(x.shape, dtype=STRING), x + 1


def metadata_zeros(x):
    return np.zeros(x.shape, dtype=WITH_METADATA), x + 1


@pytest.mark.parametrize("fn, arg", [(subarray_zeros, np.ones((2, 3))),
                                     (subarray_astype, np.arange(3.0)),
                                     (string_zeros, np.ones(2)),
                                     (metadata_zeros, np.ones(2))])
def test_dtypes_without_a_name_that_round_trips_reach_the_graph(check, fn, arg):
    expected = check(fn, arg, graphs=1)
    actual = dynamo.compile(fn)(arg)
    first = (lambda r: r[0] if isinstance(r, tuple) else r)
    assert first(actual).dtype.metadata == first(expected).dtype.metadata


def counts_references():
    intp = sys.getrefcount(np.dtype(np.intp))  # (a call the trace does not capture: a break)
    double = sys.getrefcount(np.dtype(np.double))
    return sys.getrefcount(np.dtype(np.intp)) - intp, sys.getrefcount(np.dtype(np.double)) - double


def returns_a_dtype(x):
    return x + 1, np.dtype(np.intp)


def test_compiled_code_keeps_no_extra_reference_to_a_dtype_it_made():
    assert counts_references() == (0, 0)
    compiled = dynamo.compile(counts_references)
    for _ in range(2):  # (compile, then a cache hit)
        assert compiled() == (0, 0)

    intp, x = np.dtype(np.intp), np.arange(3.0)  # (the guards keep float64: see docs)
    before = sys.getrefcount(intp)
    compiled = dynamo.compile(returns_a_dtype)
    assert compiled(x)[1] is intp and compiled(x)[1] is intp  # (the compiled code stays cached)
    assert len(cache_entries(returns_a_dtype)) == 1
    assert sys.getrefcount(intp) == before
