"""Dynamic shapes end to end (issue 7): automatic dynamic, ``dynamic=True/False``,
`dynamo.mark_dynamic` / `dynamo.mark_static`, the guards symbolic sizes imply, and correctness
for every size the guards admit. Oracle: the same function run by plain NumPy.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from support.oracle import assert_same, check_compiled, make_backend
from support.threads import run_in_threads

import dynamo

#: ULPs allowed for the C backend (its sin/exp are libm/libmvec: within a few ULP of NumPy's,
#: docs/c_backend.md); the eager backend is bit-exact.
ULPS = {"eager": 0, "c": 4}


def _same(got, want, ulps: int = 0) -> None:
    assert_same(want, got, ulps=ulps)


def _run_lengths(fn, lengths, backend="eager", dynamic=None, make_args=None):
    counting = make_backend(backend)
    compiled = dynamo.compile(fn, backend=counting, dynamic=dynamic)
    make_args = make_args or (lambda n: (np.linspace(-1.0, 2.0, n), np.arange(n, dtype=float)))
    for n in lengths:
        args = make_args(n)
        _same(compiled(*args), fn(*args), ULPS[backend])
    return counting.count


def _chain(x, y):
    return np.sin(x) * y + x[1:].sum() - x[:-1].mean()


@pytest.mark.parametrize("backend", ["eager", "c"])
def test_twenty_lengths_compile_at_most_twice(backend):
    assert _run_lengths(_chain, range(2, 22), backend) <= 2


def test_dynamic_true_compiles_once_and_false_once_per_length():
    assert _run_lengths(_chain, range(2, 8), dynamic=True) == 1
    with dynamo.config.patch(cache_size_limit=16):
        assert _run_lengths(_chain, range(2, 8), dynamic=False) == 6


def _broadcast_add(x, y):
    return x + y


def test_sizes_zero_and_one_stay_specialised():
    lengths = [5, 6, 1, 7, 0, 8]

    def args(n):
        return np.ones((n, 3)), np.arange(3.0)

    # 5 (static), 6 (dynamic), 1 and 0 (own versions); 7 and 8 reuse the dynamic one
    assert _run_lengths(_broadcast_add, lengths, make_args=args) == 4


def test_a_size_one_operand_that_broadcasts_is_not_taken_for_a_symbol():
    def f(x, y):
        return x * y

    compiled = dynamo.compile(f, backend=make_backend("eager"), dynamic=True)
    for xn, yn in [(4, 4), (5, 5), (5, 1), (1, 6), (7, 7)]:
        x, y = np.arange(float(xn)), np.arange(float(yn)) + 1
        _same(compiled(x, y), f(x, y))


def test_mismatched_lengths_raise_like_numpy():
    compiled = dynamo.compile(_broadcast_add, backend=make_backend("eager"), dynamic=True)
    _same(compiled(np.ones(4), np.ones(4)), np.ones(4) * 2)
    with pytest.raises(ValueError, match="could not be broadcast"):
        compiled(np.ones(4), np.ones(5))
    _same(compiled(np.ones(6), np.ones(6)), np.ones(6) * 2)


def test_equal_sizes_are_guarded_by_a_size_fact():
    backend = make_backend("eager")
    compiled = dynamo.compile(_broadcast_add, backend=backend, dynamic=True)
    compiled(np.ones(4), np.ones(4))
    (entry,) = dynamo.cache_entries(_broadcast_add)
    text = entry.guards if isinstance(entry.guards, str) else "\n".join(entry.guards)
    assert "x.shape[0] >= 2" in text and "y.shape[0] == x.shape[0]" in text


@pytest.mark.parametrize("index", ["x[1:]", "x[:-1]", "x[::2]", "x[::-1]", "x[2:5]", "x[-3:]",
                                   "x[1:-1, None]", "x[..., 0]"])
def test_slicing_with_constant_bounds_is_right_for_every_length(index):
    namespace = {"np": np}
    exec(f"def f(x):\n    return np.cos({index}) + 1\n", namespace)
    f = namespace["f"]
    counting = make_backend("eager")
    compiled = dynamo.compile(f, backend=counting, dynamic=True)
    for n in range(2, 14):
        x = np.arange(float(n * 2)).reshape(n, 2) if "..." in index or "None" in index \
            else np.arange(float(n))
        _same(compiled(x), f(x))
    assert counting.count <= 4  # a few bound cases (n < 5 for x[2:5], ...), not one per length


def test_reshape_with_minus_one_guards_divisibility():
    def f(x):
        return x.reshape(2, -1).sum(axis=0)

    compiled = dynamo.compile(f, backend=make_backend("eager"), dynamic=True)
    for n in (6, 8, 10):
        _same(compiled(np.arange(float(n))), f(np.arange(float(n))))
    with pytest.raises(ValueError, match="cannot reshape"):
        compiled(np.arange(7.0))


def test_reductions_matmul_and_concatenate_stay_dynamic():
    def f(a, b):
        c = a @ b
        return np.concatenate([c, c * 2]).sum(axis=1) + c.max()

    def args(n):
        return np.arange(float(n * 3)).reshape(n, 3), np.ones((3, 4))

    assert _run_lengths(f, range(2, 12), make_args=args) <= 2


def test_python_use_of_a_size_specialises_and_stays_correct():
    def f(x):
        total = x * 0
        for i in range(x.shape[0]):  # the loop is unrolled: the length is fixed
            total = total + i
        return total

    assert _run_lengths(f, [3, 4, 5, 3], dynamic=True,
                        make_args=lambda n: (np.ones(n),)) == 3


@pytest.mark.parametrize("mark, versions", [(dynamo.mark_dynamic, 1), (dynamo.mark_static, 3)])
def test_mark_dynamic_makes_the_first_compile_symbolic_and_mark_static_never(mark, versions):
    counting = make_backend("eager")
    compiled = dynamo.compile(_broadcast_add, backend=counting)
    for n in (4, 5, 6):
        x = np.ones(n)
        mark(x, 0)
        _same(compiled(x, x), x + x)
    assert counting.count == versions  # (without marks: 2, automatic dynamic)


def test_mark_dynamic_rejects_bad_input_clearly():
    with pytest.raises(TypeError, match="expects a numpy.ndarray"):
        dynamo.mark_dynamic([1, 2], 0)
    with pytest.raises(IndexError, match="out of range"):
        dynamo.mark_dynamic(np.ones(3), 1)
    with pytest.raises(TypeError, match="dim must be an int"):
        dynamo.mark_static(np.ones(3), "0")


def test_reset_forgets_the_sizes_seen():
    counting = make_backend("eager")
    compiled = dynamo.compile(_chain, backend=counting)
    for n in (4, 5):
        compiled(np.ones(n), np.ones(n))
    assert counting.count == 2
    dynamo.reset()
    compiled(np.ones(6), np.ones(6))
    compiled(np.ones(7), np.ones(7))
    assert counting.count == 4  # specialised again first, then dynamic


def test_threads_with_mixed_shapes_all_correct():
    compiled = dynamo.compile(_chain, backend="eager")

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(300):
            n = int(rng.integers(2, 40))
            x, y = rng.standard_normal(n), rng.standard_normal(n)
            np.testing.assert_array_equal(compiled(x, y), _chain(x, y))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run_in_threads(work, 8) == []


# Python scalar arguments ------------------------------------------------------------------------


def _scale(x, s):
    return np.sin(x) * s + 1


@pytest.mark.parametrize("backend", ["eager", "c"])
def test_a_python_float_used_as_a_value_becomes_a_graph_input(backend):
    counting = make_backend(backend)
    compiled = dynamo.compile(_scale, backend=counting)
    x = np.linspace(0.0, 1.0, 16)
    for k in range(12):
        _same(compiled(x, 0.25 * k), _scale(x, 0.25 * k), ULPS[backend])
    assert counting.count == 2  # the first value as a constant, then the float as an input


def test_a_float_graph_input_keeps_numpy_weak_scalar_promotion():
    compiled = dynamo.compile(_scale, backend=make_backend("eager"))
    x = np.linspace(0.0, 1.0, 8, dtype=np.float32)
    for s in (0.5, 1.5, 2.5, -0.0, 3):  # (3: an int, another type: recompiles, stays float32)
        result = compiled(x, s)
        assert result.dtype == np.float32
        _same(result, _scale(x, s))


def test_a_python_int_used_as_a_loop_count_stays_specialised():
    def f(x, n):
        for _ in range(n):
            x = x * 2
        return x

    counting = make_backend("eager")
    compiled = dynamo.compile(f, backend=counting)
    for n in (1, 2, 3, 2):
        _same(compiled(np.ones(3), n), f(np.ones(3), n))
    assert counting.count == 3


def test_dynamic_false_keeps_python_scalars_constant():
    counting = make_backend("eager")
    compiled = dynamo.compile(_scale, backend=counting, dynamic=False)
    for s in (0.5, 1.5, 2.5):
        _same(compiled(np.ones(3), s), _scale(np.ones(3), s))
    assert counting.count == 3


def test_nan_signs_of_python_floats_survive_constants_and_inputs():
    import math

    def f(x, s):
        return x * s

    compiled = dynamo.compile(f, backend=make_backend("eager"))
    x = np.ones(2)
    for s in (-math.nan, math.nan, -math.nan, 1.0, -math.nan):
        got, want = compiled(x, s), f(x, s)
        assert [math.copysign(1, v) for v in got] == [math.copysign(1, v) for v in want], s


# Sizes used in Python ----------------------------------------------------------------------------


def _uses_sizes(x, y):
    n = x.shape[0]
    if x.shape != y.shape:  # validation: a guarded equality, not a fixed size
        raise ValueError("shapes differ")
    out = np.zeros((n, 2)) + x[:, None]
    half = x[: n // 2]
    return out * n + half.sum() + x[n - 1] + len(y) + x.size + y.reshape(n, -1).sum()


def test_sizes_used_in_python_stay_symbolic_in_the_graph():
    counting = make_backend("eager")
    compiled = dynamo.compile(_uses_sizes, backend=counting, dynamic=True)
    for n in (3, 4, 7, 10):
        x, y = np.arange(float(n)), np.ones(n)
        _same(compiled(x, y), _uses_sizes(x, y))
    assert counting.count == 1
    (entry,) = dynamo.cache_entries(_uses_sizes)
    assert "x.shape[0] >= 2" in entry.guards and "x.shape[0] == y.shape[0]" in entry.guards
    assert ".shape" in entry.graph_code  # the size is read when the graph runs


def test_validation_of_sizes_still_raises_like_plain_python():
    compiled = dynamo.compile(_uses_sizes, backend=make_backend("eager"), dynamic=True)
    compiled(np.ones(4), np.ones(4))
    with pytest.raises(ValueError, match="shapes differ"):
        compiled(np.ones(4), np.ones(5))


def test_a_size_that_leaves_the_frame_is_recomputed_from_the_input():
    def f(x):
        return x * 2, x.shape[0] - 1, x.shape, x.shape[0] // 2 + x.shape[0] % 3

    counting = make_backend("eager")
    compiled = dynamo.compile(f, backend=counting, dynamic=True)
    for n in (3, 4, 3, 7):
        x = np.ones(n)
        _same(compiled(x), f(x))
    # (the returned sizes are computed from x.shape at run time: one version for all lengths)
    assert counting.count == 1
    assert "x.shape[0] ==" not in dynamo.cache_entries(f)[0].guards


# Python floats at a graph break -----------------------------------------------------------------


# (control-flow fuzzer pattern `python_float_nan_sign`)
def _times_python_float(s):
    return np.ones(2) * s


# Fixed: a NaN constant keeps its sign in the graph code (-float('nan')) and its guard checks
# the sign; after the value changed, the float is a graph input (unspecialised).
def test_negative_nan_python_float_keeps_its_sign():
    check_compiled(_times_python_float, -math.nan)


# (control-flow fuzzer pattern `resume_of_helper_recompiles_per_value`)
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


# Int arguments as sizes, operands and indices ---------------------------------------------------


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
