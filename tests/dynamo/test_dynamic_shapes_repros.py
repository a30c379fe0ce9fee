"""Regression tests for the mismatches the dynamic-shapes fuzzer found (issue 7).

In: minimised repros of tests/fuzz/test_dynamic_differential.py failures: a function compiled
once (``dynamic=True`` or the default automatic dynamic) and called with several sizes or Python
scalar values. Out: each call must equal plain NumPy (`support.oracle.assert_same`: values,
dtypes, shapes, strides), with the eager backend and with the C backend (which allocates its
outputs from the shapes the rules computed, so a wrong shape shows there first).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dynamo
from support.oracle import assert_same, make_backend

BACKENDS = ["eager", "c"]


def _check_calls(fn, calls, backend: str, dynamic=None) -> None:
    compiled = dynamo.compile(fn, backend=make_backend(backend), dynamic=dynamic)
    for args in calls:
        assert_same(fn(*args()), compiled(*args()), where=f"result for {args.__doc__}")


def _call(doc: str, make):
    make.__doc__ = doc
    return make


# An int argument whose value changed is a graph input (an unspecialised scalar). The shape rules
# used to see its traced value without a guard when it was a size (reshape, zeros, ...): the
# compiled version kept that value's shape for every later value.


def _read_reshaped_size(x, s):
    return x.reshape(s, -1).shape[1] * x


def _zeros_of_size(x, s):
    return np.zeros(s) + 1.0


def _slice_of_reshaped(x, s):
    return x.reshape(s, -1)[1:] * 2.0


def _size_in_a_tuple(x, s):
    return np.full((2, s), 3.0) + x[0]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_read_reshaped_size, _zeros_of_size, _slice_of_reshaped,
                                _size_in_a_tuple])
def test_an_int_argument_used_as_a_size_is_guarded(fn, backend):
    calls = [_call(f"s={s}", lambda s=s: (np.arange(12.0), s)) for s in (2, 3, 4, 6, 3)]
    _check_calls(fn, calls, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_int_argument_used_as_an_operand_or_index_stays_a_graph_input(backend):
    def f(x, s):
        return x[s] * s + x

    counting = make_backend(backend)
    compiled = dynamo.compile(f, backend=counting)
    for s in (1, 2, 3, 0, -1):
        x = np.arange(12.0).reshape(4, 3)
        assert_same(f(x, s), compiled(x, s), where=f"s={s}")
    assert counting.count == 2  # the first value as a constant, then s as a graph input


# Open: the C backend lowers np.where's value operands as arrays (`_where_plan` in
# dynamo/backends/c/lowering.py); a graph node that is not an array there (a symbolic size,
# computed from ``a.shape[0]`` at run time, meta "size"; or an unspecialised Python scalar, meta
# its value) has no ArrayMeta: AttributeError in the dry run of `lower`, reported as an
# internal error, and the frame runs in plain Python with a RuntimeWarning. Other ufuncs with the
# same operands are fine. (Found by the dynamic fuzzer: `KNOWN_BUGS["c-where-size-operand"]`.)


def where_with_a_size_operand(a, s):
    return np.where(a > 0, a.shape[0], -1)


def where_with_a_scalar_operand(a, s):
    return np.where(a > 1, s, a)


def _where_calls(backend: str, fn, dynamic) -> None:
    compiled = dynamo.compile(fn, backend=make_backend(backend), dynamic=dynamic)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (the internal error is a RuntimeWarning)
        for n, s in ((3, 2), (4, 3), (5, 7)):
            a = np.arange(n, dtype=np.uint64)
            assert_same(fn(a, s), compiled(a, s), where=f"n={n}, s={s}")


# Fixed: lowering.py _where_plan refuses an operand node without an ArrayMeta (a symbolic size
# or a Python scalar input) instead of failing with AttributeError; that np.where stays NumPy.
@pytest.mark.parametrize("fn", [where_with_a_size_operand, where_with_a_scalar_operand])
def test_c_backend_lowers_np_where_with_a_non_array_operand(fn):
    _where_calls("c", fn, True)


@pytest.mark.parametrize("fn", [where_with_a_size_operand, where_with_a_scalar_operand])
def test_np_where_with_a_non_array_operand_eager(fn):
    _where_calls("eager", fn, True)
