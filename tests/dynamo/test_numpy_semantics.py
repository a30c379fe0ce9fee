"""End-to-end Python/NumPy semantics of the translator, through the public API only.

Comes in: user-style functions compiled with ``dynamo.compile(fn, backend=<counting backend>)``;
goes out: assertions (the `check` fixture of tests/dynamo/conftest.py) that results, dtypes,
shapes, strides, views and raised exceptions equal plain NumPy's, and that the number of
captured graphs is the expected one. Covers NEP 50 promotion, ndarray attributes as constants,
indexing, layouts, closures/globals/argument kinds, return structures, and code that must not be
captured (graphs=0) yet must behave like NumPy. Mutations of arguments and aliasing:
test_argument_mutation.py; guards as inputs change: test_guards_on_inputs.py; the oracle
itself: test_check_oracle.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import dynamo
from support.arrays import data

xfail = pytest.mark.xfail


# NEP 50 promotion --------------------------------------------------------------------------

F32_TWO = np.float32(2)
I64_ONE = np.int64(1)


def f32_times_float(x):
    return x * 2.0, 2.0 * x, x + 1, x / 3, x**2, x - 0.5j


def int_plus_python(x):
    return x + 1, 1 + x, x * 2, x // 2, x % 3, x / 2, x + 1.5, x**2


def bool_arithmetic(x):
    return x + x, x * 2, x + 1.5, True + x, x - 0.0, x & True


def numpy_scalars_from_globals(x):
    return x * F32_TWO, x + I64_ONE, F32_TWO * x


def numpy_scalar_argument(x, s):
    return x * s, s + x, s * 2


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_nep50_float_array_with_python_scalars(check, dtype):
    check(f32_times_float, data(dtype))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32"])
def test_nep50_int_array_with_python_scalars(check, dtype):
    check(int_plus_python, data(dtype, positive=True))


def test_nep50_bool_arithmetic(check):
    check(bool_arithmetic, data("bool"))


@pytest.mark.parametrize("dtype", ["float64", "float32", "int8"])
def test_nep50_numpy_scalars_from_globals(check, dtype):
    check(numpy_scalars_from_globals, data(dtype))


@pytest.mark.parametrize("scalar", [np.float32(2.5), np.float64(-1.0), np.int8(3), np.uint16(7)],
                         ids=lambda s: type(s).__name__)
@pytest.mark.parametrize("dtype", ["float32", "int16"])
def test_nep50_numpy_scalar_arguments(check, scalar, dtype):
    check(numpy_scalar_argument, data(dtype), scalar)


def uint8_plus_large_int(x):
    return x + 300


def test_scalar_argument_promotion_changes(check, backend):
    """int, float, NumPy float64/float32 scalars, bool: different result dtypes under NEP 50."""
    cf = dynamo.compile(numpy_scalar_argument, backend=backend)
    x = data("float32")
    for s in (2, 2.0, np.float64(2), np.float32(2), True, 2):
        check.assert_same(numpy_scalar_argument(x, s), cf(x, s), f"s={s!r}")


def test_nep50_python_int_out_of_range_raises(check):
    check(uint8_plus_large_int, data("uint8"), graphs=0)


def int_overflow_wraps(x):
    return x * 100, x + 127


def test_integer_overflow_wraps_like_numpy(check):
    with np.errstate(over="ignore"):
        check(int_overflow_wraps, data("int8"))


# ndarray attributes, branches, loops -------------------------------------------------------


def attrs_in_arithmetic(x):
    return x.shape[0] * 2, x.ndim + 1, x.size / 2, len(x), x.shape, x.dtype, x.shape[-1] - 1


def attrs_with_ops(x):
    n, m = x.shape
    return x.reshape(m, n) * (n + m) / x.size


def constant_branch(x):
    if x.ndim == 2:
        return x.sum(axis=0)
    return x * 2


def dtype_branch(x):
    if x.dtype == np.float32:
        return x + np.float32(1)
    elif x.shape[0] > 2 and len(x) < 10:
        return x - 1
    return x


def unrolled_loop(x):
    acc = np.zeros(x.shape[1:], dtype=x.dtype)
    for i in range(x.shape[0]):
        acc = acc + x[i] * i
    return acc


def tuple_unpacking(x):
    a, b, c = x.shape
    return x.reshape(a * b, c), a, (b, c)


def starred_unpacking(x):
    first, *rest = x.shape
    return x.reshape(first, -1), first, rest


@pytest.mark.parametrize("dtype", ["float64", "float32", "int16"])
@pytest.mark.parametrize("fn", [attrs_in_arithmetic, attrs_with_ops, constant_branch, dtype_branch,
                                unrolled_loop], ids=lambda f: f.__name__)
def test_attributes_branches_loops(check, fn, dtype):
    graphs = 0 if fn is attrs_in_arithmetic else 1  # only Python values: nothing to capture
    check(fn, data(dtype), graphs=graphs)


@pytest.mark.parametrize("shape", [(3,), (2, 3)])
def test_constant_branch_other_ndim(check, shape):
    check(constant_branch, data("float64", shape))


@pytest.mark.parametrize("fn", [
    tuple_unpacking,
    starred_unpacking,
], ids=lambda f: f.__name__)
def test_tuple_unpacking_of_shapes(check, fn):
    check(fn, data("float64", (2, 3, 4)))


# Indexing ----------------------------------------------------------------------------------


def basic_indexing(x):
    return (x[1], x[-1], x[1:3], x[::-1], x[::2, 1], x[None], x[..., 0], x[:, None, :],
            x[1, 2], x[-1, ::-2], x[1:, :-1])


def array_indexing(x, idx):
    return x[idx], x[[0, 2]], x[:, idx], x[[0, 1], [1, 2]], x[idx, 1:]


def argument_index(x, i):
    return x[i], x[i:], x[-i, ::i]


def slice_argument_index(x, s):
    return x[s], x[1, s]


@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
def test_basic_indexing(check, dtype):
    check(basic_indexing, data(dtype))


@pytest.mark.parametrize("dtype", ["float64", "uint8"])
def test_integer_array_indexing(check, dtype):
    check(array_indexing, data(dtype), np.array([2, 0, 1]))


@pytest.mark.parametrize("i", [1, 2])
def test_indexing_with_python_int_arguments(check, i):
    check(argument_index, data("float64"), i)


@pytest.mark.parametrize("s", [slice(None, None, -1), slice(1, 3)], ids=repr)
def test_indexing_with_a_slice_argument(check, s):
    check(slice_argument_index, data("float64"), s)


def index_out_of_bounds(x):
    return x[5] + 1


def test_index_out_of_bounds_raises(check):
    check(index_out_of_bounds, data("float64"), graphs=0)


# 0-d arrays, empty arrays, layouts ---------------------------------------------------------


def zero_d(x):
    return x + 1, x * x, x[()], x[...], x.sum(), np.exp(x), x.reshape(1), x.ndim, x.shape


def empty_ops(x):
    return x + 1, x.sum(axis=0), x.T, np.concatenate([x, x]), x.shape[0], x.max(axis=1)


def empty_reshape(x):
    return x.reshape(3, 0), x.reshape(-1)


def empty_max_raises(x):
    return x.max()


def layout_ops(x):
    return x + 1, np.exp(x), x.sum(axis=0), x.T, x.ravel(), x.reshape(-1), x.copy(), x[::2] * 2


@pytest.mark.parametrize("x", [np.array(2.5), np.array(3, dtype=np.int8), np.array(True)],
                         ids=lambda a: str(a.dtype))
def test_zero_d_arrays(check, x):
    check(zero_d, x)


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_empty_arrays(check, dtype):
    check(empty_ops, np.zeros((0, 3), dtype=dtype))


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_reshape_of_empty_arrays(check, dtype):
    check(empty_reshape, np.zeros((0, 3), dtype=dtype))


def test_reduction_of_empty_array_raises(check):
    check(empty_max_raises, np.zeros((0,)), graphs=0)


def _transposed(b):
    return b.T


def _strided(b):
    return b[::2, ::-1]


def _offset(b):
    return b[1:, 1:]


@pytest.mark.parametrize("make", [_transposed, _strided, _offset], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", ["float64", "int8"])
def test_non_contiguous_inputs(check, make, dtype):
    check(layout_ops, check.view(data(dtype, (6, 4)), make))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fortran_order_inputs(check, dtype):
    check(layout_ops, np.asfortranarray(data(dtype, (4, 6))))


def mutate_view(x):
    x += 1
    return x.sum()


def test_guards_follow_a_changed_array_layout(backend):
    cf = dynamo.compile(layout_ops, backend=backend)
    base = data("float64", (6, 4))
    for x in (base, base.T, base[::2], np.asfortranarray(base), base):
        expected, actual = layout_ops(x), cf(x)
        for e, a in zip(expected, actual):
            np.testing.assert_array_equal(a, e, strict=True)
            assert a.strides == e.strides


def test_mutating_a_non_contiguous_argument(check):
    check(mutate_view, check.view(data("float64", (6, 4)), _strided))


# Closures, globals, argument kinds ---------------------------------------------------------

G_ARRAY = np.linspace(0, 1, 4)
G_SCALE = 3
G_FACTOR = 0.5


def uses_globals(x):
    return x * G_SCALE + G_ARRAY * G_FACTOR


def make_closure():
    table = np.arange(4.0)
    offset = 2

    def inner(x):
        return (x + table) * offset

    return inner


def make_nested_closure(k):
    def middle():
        def inner(x):
            return x**k + k
        return inner
    return middle()


def keyword_only(x, *, scale=2.0, shift=0):
    return x * scale + shift


def defaults(x, y=None, power=2):
    return x**power if y is None else x * y


def star_args(x, *rest):
    out = x
    for r in rest:
        out = out + r
    return out, len(rest)


def star_kwargs(x, **options):
    return x * options["scale"] + options.get("shift", 0), len(options)


def calls_with_keywords(x):
    return np.sum(a=x, axis=0), np.clip(x, a_min=-1, a_max=1), np.full(shape=(2,), fill_value=x.size)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_globals_and_closures(check, dtype):
    x = data(dtype, (3, 4))
    check(uses_globals, x)
    check(make_closure(), x)
    check(make_nested_closure(3), x)


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_argument_kinds(check, dtype):
    x = data(dtype)
    check(keyword_only, x)
    check(keyword_only, x, scale=3, shift=-1.5)
    check(defaults, x)
    check(defaults, x, x, power=3)
    check(star_args, x, x, x[0])
    check(star_args, x, graphs=0)  # no NumPy operation left: nothing to capture
    check(calls_with_keywords, x)


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_reading_star_kwargs(check, dtype):
    check(star_kwargs, data(dtype), scale=2, shift=1)


# Returned structures -----------------------------------------------------------------------


def returns_structures(x, y):
    return [x + y, (x * 2, y.shape)], {"sum": x.sum(), "n": x.ndim, "diff": x - y}


def returns_constants(x):
    return 1, 2.5, "text", None, (3,)


def returns_argument(x):
    return x


def returns_argument_after_ops(x):
    y = x * 2
    return x, y


@pytest.mark.parametrize("dtype", ["float64", "int8"])
def test_returned_structures(check, dtype):
    check(returns_structures, data(dtype), data(dtype, positive=True))


def test_returns_constants(check):
    check(returns_constants, data("float64"), graphs=0)


def test_returns_the_argument_itself(backend):
    x = data("float64")
    assert dynamo.compile(returns_argument, backend=backend)(x) is x
    result = dynamo.compile(returns_argument_after_ops, backend=backend)(x)
    assert result[0] is x and backend.count == 1
    np.testing.assert_array_equal(result[1], x * 2)


# Not captured, same results as NumPy -------------------------------------------------------


def prints(x):
    y = x + 1
    print("y is", y.shape)
    return y * 2


def data_dependent_branch(x):
    if x.sum() > 0:
        return x - 1
    return x + 1


def python_float_of_array(x):
    return float(x.sum()) * 2


def mask_indexing(x):
    return x[x > 0] * 2


def helper(x):
    return np.sqrt(np.abs(x)) + 1


def calls_a_helper(x):
    y = helper(x)
    print(end="")
    return y * 2


def calls_a_helper_only(x):
    return helper(x)


def try_except(x):
    try:
        y = x.reshape(5, 5)
    except ValueError:
        y = x * 0
    return y


def broadcast_error(x, y):
    return x + y


def user_raise(x):
    y = x * 2
    if x.ndim == 2:
        raise ValueError("expected a vector, got a matrix")
    return y


def axis_error(x):
    return x.sum(axis=3)


def reshape_error(x):
    return x.reshape(5, 7)


#: (function, graphs on the first call, new graphs for the negated input)
GRAPH_BREAKS = [
    (prints, 2, 0),                 # x + 1 | print(...) in Python | y * 2
    (data_dependent_branch, 2, 1),  # x.sum() > 0 | the branch taken; later the other branch
    (python_float_of_array, 1, 0),  # x.sum() | float() and * 2 on a Python float: no graph
    (mask_indexing, 1, 0),          # one graph: len(x[mask]) is a data-dependent size
    (try_except, 0, 0),             # a try block first: the frame runs in plain Python
]


@pytest.mark.parametrize("dtype", ["float64", "int32"])
@pytest.mark.parametrize("fn, first, second", GRAPH_BREAKS, ids=[f.__name__ for f, *_ in GRAPH_BREAKS])
def test_graph_breaks_give_numpy_results(check, fn, first, second, dtype, capsys):
    check(fn, data(dtype), graphs=first)
    check(fn, -data(dtype), graphs=second)


@pytest.mark.parametrize("fn, graphs", [(calls_a_helper, 2), (calls_a_helper_only, 1)],
                         ids=["calls_a_helper", "calls_a_helper_only"])
def test_helper_is_captured_as_its_own_frame(check, fn, graphs):
    # the helper's own graph, and (calls_a_helper) `y * 2` after the print, in a resume function
    check(fn, data("float64"), graphs=graphs)


@pytest.mark.parametrize("fn, args", [
    (broadcast_error, (data("float64", (3, 4)), data("float64", (3,)))),
    (user_raise, (data("float64"),)),
    (axis_error, (data("float64"),)),
    (reshape_error, (data("float64"),)),
], ids=["broadcast", "user_raise", "axis", "reshape"])
def test_errors_propagate_like_numpy(check, fn, args):
    # user_raise: `y = x * 2` is captured; the raise runs in plain Python after the break
    check(fn, *args, graphs=1 if fn is user_raise else 0)


def test_explain_reports_a_data_dependent_break():
    out = dynamo.explain(data_dependent_branch)(data("float64"))
    assert out.graph_count == 2 and out.graph_break_count == 1
    assert out.break_reasons and "data_dependent_branch" in out.break_reasons[0]


# Assorted user code --------------------------------------------------------------------------


def out_slice(x):
    np.add(x[:-1], 1, out=x[1:])
    return x


def setitem_broadcast(x, y):
    x[...] = y[0]
    x[:, 0] = [1, 2, 3]
    return x


def newaxis(x):
    return x[:, np.newaxis] * x[np.newaxis, :]


def dtype_spellings(x):
    return (x.astype(float), np.zeros(3, dtype=float), np.arange(5, dtype=int), x.astype("f4"),
            np.ones(2, dtype=np.dtype("i2")), x.sum(dtype=float))


def builtin_sum(x):
    return sum(x)


def builtin_max_of_shape(x):
    return x.reshape(max(x.shape), -1) + min(x.shape)


def iterate_rows(x):
    out = []
    for row in x:
        out.append(row * 2)
    return out


def shape_as_python_values(x):
    return x.reshape(x.shape[::-1]), tuple(x.shape), list(x.shape), f"{x.shape}"


def isinstance_branch(x):
    if isinstance(x, np.ndarray) and 0 < x.ndim < 3 and x.size:
        return x + 1
    return x


def dtype_kind_branch(x):
    if x.dtype.kind == "f":
        return x * x.dtype.itemsize
    return x - 1


def numpy_scalar_constructors(x):
    return x * np.float32(2), x + np.int8(1)


def python_arithmetic_on_arguments(x, n):
    return x * (n + 1) - n**2, n // 2


def integer_division_by_zero(x):
    return x // 0


def out_is_a_transposed_argument(x, out):
    np.multiply(x, 2, out=out.T)
    return out


def chained_reductions(x):
    return x.sum(axis=0).sum(), x.mean(0).max(), x.T @ x


def setitem_negative_step(x):
    x[::-1] = np.arange(x.shape[0])
    return x


def inplace_arithmetic_family(x):
    x **= 2
    x //= 3
    x %= 5
    return x


def inplace_matmul(x):
    x @= x
    return x


def inplace_bitwise_family(x):
    x &= 3
    x |= 8
    x ^= 1
    x <<= 1
    x >>= 2
    return x


def unary_chains(x):
    return -(-x), +(-x), ~(x > 0), not (x.ndim == 1)


def builtin_divmod(x):
    return divmod(x, 3), np.divmod(x, 3)


def rounding(x):
    return np.round(x, 2), x.round(1), np.around(x), np.abs(x), np.absolute(x), np.fabs(x)


def order_keywords(x):
    return (x.reshape((4, 3), order="F"), x.ravel(order="F"), x.flatten("F"), x.copy(order="F"),
            x.reshape((4, 3), order="C"))


def cumulative(x):
    return np.cumsum(x), x.cumsum(axis=0)


def where_one_argument(x):
    return np.where(x > 0)


def nonzero(x):
    return x.nonzero()


def tuple_as_index(x):
    idx = (1, slice(None))
    return x[idx]


def item_and_tolist(x):
    return x.item(0) + 1, x.tolist()


def array_from_list(x):
    return np.array([1.0, 2.0]) + x[0, :2], np.asarray(x) + 1


def complex_parts(x):
    return x * 1j + (2 - 1j), (x + 0j).real, np.conj(x + 1j)


def integer_negative_power(x):
    return x**-1


#: Not captured on purpose (data-dependent output shapes, Python values) or outside this slice.
NOT_CAPTURED = {nonzero, item_and_tolist}
#: A graph, then a break at a call the rules cannot describe (the shape depends on data).
BREAKS_AFTER_A_GRAPH = {where_one_argument}
#: Outside this slice (builtins over arrays, .real): captured or not, the results must match.
EITHER = {builtin_sum, builtin_divmod, complex_parts}
#: NumPy raises (a RuntimeWarning turned into an error, or ValueError): only the error is compared.
RAISES = {integer_division_by_zero, integer_negative_power}

ASSORTED = [
    (out_slice, (np.arange(5.0),)),
    (setitem_broadcast, (np.zeros((3, 4)), np.ones((3, 4)))),
    (newaxis, (np.arange(3.0),)),
    (dtype_spellings, (np.arange(4.0),)),
    (builtin_sum, (np.ones((3, 2)),)),
    (builtin_max_of_shape, (np.ones((2, 3)),)),
    (iterate_rows, (np.arange(6.0).reshape(3, 2),)),
    (shape_as_python_values, (np.ones((2, 3)),)),
    (isinstance_branch, (np.ones(2),)),
    (dtype_kind_branch, (np.ones(2, dtype=np.float32),)),
    (dtype_kind_branch, (np.ones(2, dtype=np.int8),)),
    (numpy_scalar_constructors, (np.ones(2, dtype=np.int8),)),
    (python_arithmetic_on_arguments, (np.ones(2), 3)),
    (integer_division_by_zero, (np.arange(3),)),
    (out_is_a_transposed_argument, (np.ones((2, 3)), np.zeros((3, 2)))),
    (chained_reductions, (np.arange(6.0).reshape(2, 3),)),
    (setitem_negative_step, (np.zeros(4),)),
    (inplace_arithmetic_family, (np.arange(6),)),
    (inplace_matmul, (np.arange(4.0).reshape(2, 2),)),
    (inplace_bitwise_family, (np.arange(6),)),
    (unary_chains, (np.arange(3.0) - 1,)),
    (builtin_divmod, (np.arange(5.0),)),
    (rounding, (np.linspace(-1, 1, 5),)),
    (order_keywords, (np.arange(12.0).reshape(3, 4),)),
    (cumulative, (np.arange(6.0).reshape(2, 3),)),
    (where_one_argument, (np.arange(3.0) - 1,)),
    (nonzero, (np.arange(3.0) - 1,)),
    (tuple_as_index, (np.ones((2, 3)),)),
    (item_and_tolist, (np.ones((2, 2)),)),
    (array_from_list, (np.ones((2, 2)),)),
    (complex_parts, (np.ones(2, dtype=np.float32),)),
    (integer_negative_power, (np.arange(1, 3),)),
]


@pytest.mark.parametrize("fn, args", ASSORTED,
                         ids=[f"{fn.__name__}-{args[0].dtype}" for fn, args in ASSORTED])
def test_assorted_user_code(check, fn, args):
    graphs = 0 if fn in NOT_CAPTURED else None if fn in RAISES | EITHER else 1
    # BREAKS_AFTER_A_GRAPH: 1 graph (`x > 0`), then np.where(mask) in plain Python
    check(fn, *args, graphs=graphs)


G_STATE = np.zeros(3)


def mutates_a_global(x):
    G_STATE[0] += x[0]
    G_STATE[1:] = x[1:] * 2
    return G_STATE * 2


def test_mutation_of_a_global_array(check, backend):
    x = np.arange(1.0, 4.0)
    G_STATE[...] = 0
    expected = [mutates_a_global(x) for _ in range(2)]
    expected_state = G_STATE.copy()
    G_STATE[...] = 0
    cf = dynamo.compile(mutates_a_global, backend=backend)
    actual = [cf(x) for _ in range(2)]
    check.assert_same(expected, actual)
    check.assert_same(expected_state, G_STATE)
    assert backend.count == 1
