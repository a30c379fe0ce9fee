"""Guards of one compiled function as its inputs change: dtypes, shapes, layouts, globals,
closure cells, Python scalars (signed zeros, NaN, int vs bool vs float) and unusual types.

Comes in: a function compiled once with a counting backend and called with changing inputs.
Goes out: every call's result equals plain NumPy's (the `check` fixture of
tests/dynamo/conftest.py), recompiling where a guard must fail and not where it must hold.
"""

from __future__ import annotations

import numpy as np
import pytest

import dynamo
from support.arrays import data


# Guards: one compiled function, changing inputs --------------------------------------------

G_POWER = 2


def uses_global_power(x):
    return x**G_POWER


def scalar_and_flag(x, s, flag):
    if flag:
        return x * s
    return x + s


def test_guards_follow_changing_inputs(backend):
    """Each call must give NumPy's result, whatever changed since the previous one."""
    cf = dynamo.compile(scalar_and_flag, backend=backend)
    calls = [(data("float64"), 2, True), (data("float64"), 3, True), (data("float64"), 3, False),
             (data("int32"), 3, False), (data("float32", (2, 2)), 2.5, True),
             (data("float64"), 2.0, True), (data("float64"), 2, True)]
    for x, s, flag in calls:
        expected = scalar_and_flag(x, s, flag)
        actual = cf(x, s, flag)
        assert type(actual) is type(expected) and actual.dtype == expected.dtype
        np.testing.assert_array_equal(actual, expected, strict=True)


def test_guards_follow_a_changed_global(backend):
    global G_POWER
    cf = dynamo.compile(uses_global_power, backend=backend)
    x = data("float64")
    try:
        for power in (2, 3, 0.5, 2):
            G_POWER = power
            with np.errstate(invalid="ignore"):
                np.testing.assert_array_equal(cf(x), uses_global_power(x), strict=True)
    finally:
        G_POWER = 2
    assert backend.count == 3


def test_guards_follow_a_changed_closure_cell(backend):
    factor = 2

    def f(x):
        return x * factor

    cf = dynamo.compile(f, backend=backend)
    x = data("int16")
    for factor in (2, 5, 2.5):  # noqa: B007 - rebinding the cell is the point
        np.testing.assert_array_equal(cf(x), f(x), strict=True)


# Guards on Python scalars and unusual argument types -------------------------------------


def times(x, s):
    return x * s


def run_sequence(check, backend, fn, calls):
    """One compiled `fn` over `calls` (argument tuples): each result must equal eager's."""
    cf = dynamo.compile(fn, backend=backend)
    for args in calls:
        check.assert_same(fn(*args), cf(*args), f"{fn.__name__}{tuple(map(repr, args[1:]))}")


@pytest.mark.parametrize("calls", [
    [(data("bool")[0], 1), (data("bool")[0], True), (data("bool")[0], 1.0)],
    [(np.ones(3), float("nan")), (np.ones(3), float("nan")), (np.ones(3), 2.0)],
    [(np.ones(3), np.float64(0.0)), (np.ones(3), np.float64(-0.0))],
    [(data("int8"), 1), (data("int8"), 1.0), (data("int8"), np.int8(1))],
], ids=["int-vs-bool-vs-float", "nan", "numpy-signed-zero", "int8"])
def test_scalar_argument_guards(check, backend, calls):
    run_sequence(check, backend, times, calls)


# Regression: guards compared Python floats/complex with ==, so -0.0 reused the graph compiled
# for 0.0 (constant baked in) and x * -0.0 gave +0.0; complex constants also lost the sign of zero
# in the generated graph code.
@pytest.mark.parametrize("zero, negative_zero", [(0.0, -0.0), (0j, complex(-0.0, 0.0))],
                         ids=["float", "complex"])
def test_signed_zero_python_scalar_argument(check, backend, zero, negative_zero):
    run_sequence(check, backend, times, [(np.ones(3), zero), (np.ones(3), negative_zero)])


G_ZERO = 0.0


def times_global_zero(x):
    return x * G_ZERO


# Regression: after G = -0.0 the graph for G = 0.0 was reused (x * G gave +0.0).
def test_signed_zero_global(check, backend):
    global G_ZERO
    cf = dynamo.compile(times_global_zero, backend=backend)
    x = np.ones(3)
    try:
        check.assert_same(times_global_zero(x), cf(x))
        G_ZERO = -0.0
        check.assert_same(times_global_zero(x), cf(x))
    finally:
        G_ZERO = 0.0


def test_nan_argument_does_not_recompile(check):
    check(times, np.ones(3), float("nan"))


def _matrix():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        return np.matrix([[1.0, 2.0], [3.0, 4.0]])


@pytest.mark.parametrize("x", [
    np.ma.array([1.0, 2.0, 3.0], mask=[0, 1, 0]),
    np.ones(3, dtype=">f8"),
    [1, 2, 3],
    (1.5, 2.5),
], ids=["masked", "big-endian", "list", "tuple"])
def test_unusual_first_arguments(check, backend, x):
    expected = times(x, 2)
    actual = dynamo.compile(times, backend=backend)(x, 2)
    if isinstance(expected, np.ma.MaskedArray):
        assert type(actual) is np.ma.MaskedArray
        np.testing.assert_array_equal(actual.mask, expected.mask)
        np.testing.assert_array_equal(actual.data, expected.data)
    else:
        check.assert_same(expected, actual)


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_matrix_subclass_argument(check, backend):
    m = _matrix()
    actual = dynamo.compile(times, backend=backend)(m, m)
    assert type(actual) is np.matrix
    np.testing.assert_array_equal(actual, m * m)  # matrix product, not elementwise


def test_read_only_argument_mutation_raises(backend):
    def f(x):
        x += 1
        return x

    cf = dynamo.compile(f, backend=backend)
    cf(np.ones(3))
    ro = np.ones(3)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        cf(ro)
    np.testing.assert_array_equal(ro, np.ones(3))


def test_python_int_too_large(check):
    check(times, np.ones(2, dtype=np.int64), 2**70, graphs=None)
