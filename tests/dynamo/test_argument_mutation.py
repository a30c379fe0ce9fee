"""Mutations of arguments, globals and closure arrays, and aliasing between inputs and outputs.

Comes in: user-style functions that write into their arguments (setitem, in-place operators,
``out=``), mutate through views, return outputs that alias each other or the inputs, or are
called with the same array twice. Goes out: assertions (the `check` fixture of
tests/dynamo/conftest.py) that results, argument contents afterwards, view-vs-copy relations
and the order of mutations equal plain NumPy's, with the expected number of graphs.
"""

from __future__ import annotations

import numpy as np
import pytest

import dynamo
from support.arrays import data


# setitem and in-place operators on arguments -----------------------------------------------


def setitem_slice(x):
    x[1:3] = 0
    return x


def setitem_ellipsis(x, y):
    x[...] = y
    return x.sum()


def setitem_mixed(x, y):
    x[0] = y[0]
    x[:, 1] = 5
    x[-1, ::2] = y[-1, 1::2]
    return x * 2


def setitem_array_index(x, idx):
    x[idx] = -1
    return None


def inplace_arguments(x, y):
    x += 1
    x *= y
    y -= x
    return x, y


def inplace_on_slices(x):
    x[1:] += 1
    x[:, 0] -= x[:, 1]
    x[::-1][0] *= 2
    return x.sum()


def rebinding_is_not_mutation(x):
    x = x + 1
    x += 1
    return x


def inplace_casting_error(x):
    x += 1.5
    return x


@pytest.mark.parametrize("dtype", ["float64", "int32"])
@pytest.mark.parametrize("fn", [setitem_slice, inplace_on_slices, rebinding_is_not_mutation],
                         ids=lambda f: f.__name__)
def test_mutation_of_one_argument(check, fn, dtype):
    check(fn, data(dtype))


@pytest.mark.parametrize("dtype", ["float64", "int16"])
@pytest.mark.parametrize("fn", [setitem_ellipsis, setitem_mixed, inplace_arguments],
                         ids=lambda f: f.__name__)
def test_mutation_of_two_arguments(check, fn, dtype):
    check(fn, data(dtype), data(dtype, positive=True))


def test_setitem_with_integer_array(check):
    check(setitem_array_index, data("float64"), np.array([0, 2]))


def test_inplace_casting_error(check):
    check(inplace_casting_error, data("int64"), graphs=0)


def test_mutation_is_visible_to_the_caller(backend):
    def f(x):
        x[1:] += 1
        return None

    x = np.zeros(4)
    assert dynamo.compile(f, backend=backend)(x) is None
    assert backend.count == 1
    np.testing.assert_array_equal(x, [0, 1, 1, 1])


# Aliasing and ordering of mutations --------------------------------------------------------


def mutate_first_read_second(x, y):
    x += 1
    return y * 2


def view_sees_later_mutation(x):
    row = x[0]
    before = x * 1
    x += 10
    return row, before, row + 0


def mutate_through_a_view(x):
    v = x.T
    v[0] += 5
    return x.sum(axis=1)


def setitem_truncates(x):
    x[1:3] = 0.75
    x[0] = -1.5
    return x


def test_aliased_arguments(check):
    a = data("float64")
    check(mutate_first_read_second, a, a)  # deep copies keep the aliasing


@pytest.mark.parametrize("dtype", ["float64", "int32"])
@pytest.mark.parametrize("fn", [view_sees_later_mutation, mutate_through_a_view, setitem_truncates],
                         ids=lambda f: f.__name__)
def test_mutation_order_and_views(check, fn, dtype):
    check(fn, data(dtype))


def setitem_out_of_bounds(x):
    x[7] = 1
    return x


def len_of_0d(x):
    return len(x) + x


def test_more_errors(check):
    check(setitem_out_of_bounds, data("float64"), graphs=0)
    check(len_of_0d, np.array(1.0), graphs=0)


def comparison_result(x):
    return x.sum() > 0, x.max() == x.min(), x[0, 0] < 1


@pytest.mark.parametrize("dtype", ["float64", "int8"])
def test_numpy_bool_scalar_results(check, dtype):
    check(comparison_result, data(dtype))


# Outputs aliasing each other, out= on reductions, arguments of other kinds ---------------


def same_object_twice(x):
    y = x + 1
    return y, y


def view_of_an_intermediate(x):
    y = x + 1
    return y, y[0], y.T


def reduction_out(x, out):
    np.sum(x, axis=0, out=out)
    return out


def reduction_initial_where(x):
    return np.sum(x, initial=5), np.max(x, axis=0, initial=100), np.sum(x, where=x > 0)


def shape_from_argument(x, n):
    return np.zeros(n) + x[:n]


def dtype_from_argument(x, dt):
    return x.astype(dt), np.zeros(2, dtype=dt)


def einsum_spec_argument(spec, a, b):
    return np.einsum(spec, a, b)


def unpack_rows(x):
    a, b = x
    return a - b


def container_arguments(t, d):
    return t[0] + t[1], d["a"] * 2


def build_and_stack(x):
    rows = [x, x + 1]
    rows.append(x * 2)
    return np.stack(rows)


def vector_matmul(x):
    return x @ x, np.matmul(x, x)


def powers(x):
    return x**0.5, x**2, x**-1.0, 2**x, x**x


def bool_to_int_arithmetic(x):
    return (x > 0) + (x < 2), (x > 0) - 0, -(x > 0).astype(int)


def mutate_then_return_view(x):
    x[0] = 5
    return x[:2]


@pytest.mark.parametrize("fn, args", [
    (same_object_twice, (data("float64"),)),
    (view_of_an_intermediate, (data("int32"),)),
    (reduction_out, (data("float64"), np.zeros(4))),
    (reduction_initial_where, (data("float64"),)),
    (shape_from_argument, (np.ones(4), 3)),
    (dtype_from_argument, (data("float64"), np.int8)),
    (dtype_from_argument, (data("float64"), "float32")),
    (einsum_spec_argument, ("ij,jk", data("float64", (2, 3)), data("float64", (3, 2)))),
    (unpack_rows, (data("float64", (2, 3)),)),
    (container_arguments, ((np.ones(2), np.arange(2.0)), {"a": np.arange(3)})),
    (build_and_stack, (data("float32", (2,)),)),
    (vector_matmul, (np.arange(3.0),)),
    (powers, (np.arange(1.0, 4.0),)),
    (bool_to_int_arithmetic, (np.arange(3.0) - 1,)),
    (mutate_then_return_view, (np.ones(3),)),
], ids=lambda v: v.__name__ if callable(v) else "")
def test_outputs_and_argument_kinds(check, fn, args):
    check(fn, *args)


def ufunc_methods(x):
    return np.add.reduce(x, axis=0), np.multiply.outer(x[0], x[1]), np.maximum.accumulate(x, axis=1)


def ufunc_at(x):
    np.add.at(x, [0, 0, 1], 1)
    return x


def mutate_then_fail(x):
    x += 1
    return x + np.ones(5)


def clip_new_keywords(x):
    return np.clip(x, None, 1), np.clip(x, min=0)


@pytest.mark.parametrize("fn", [ufunc_methods, ufunc_at, mutate_then_fail, clip_new_keywords],
                         ids=lambda f: f.__name__)
def test_outside_the_slice_still_correct(check, fn):
    """Not promised by this slice (captured or not): results, mutations and errors must match."""
    check(fn, data("float64", (3, 3)) if fn is not mutate_then_fail else np.ones(3), graphs=None)


def test_mutation_of_a_closure_array(check, backend):
    def make():
        acc = np.zeros(3)

        def inner(x):
            acc[:] += x
            return acc * 1

        return inner, acc

    eager, eager_acc = make()
    compiled, compiled_acc = make()
    compiled = dynamo.compile(compiled, backend=backend)
    for _ in range(3):
        check.assert_same(eager(np.ones(3)), compiled(np.ones(3)))
    check.assert_same(eager_acc, compiled_acc)
    assert backend.count == 1


G_COUNTER = 1


def bumps_a_global(x):
    global G_COUNTER
    G_COUNTER = G_COUNTER + 1
    return x * G_COUNTER


def test_assigning_a_global(backend):
    """Not captured yet (global stores are not replayed), but each call must see the new value."""
    global G_COUNTER
    cf = dynamo.compile(bumps_a_global, backend=backend)
    try:
        G_COUNTER = 1
        results = [cf(np.ones(2)) for _ in range(3)]
        assert G_COUNTER == 4
        for k, r in zip((2, 3, 4), results):
            np.testing.assert_array_equal(r, np.full(2, float(k)), strict=True)
    finally:
        G_COUNTER = 1
