"""Python functions called inside loop kernels, inlined (loop_nest.inline): the callee's body
runs in the kernel, each call site a frame of its own; a deoptimisation inside a callee hands
the whole iteration to Python, which raises or warns from the callee itself. Plain Python is
the oracle (support.loops.check: value, exception, arrays, warnings)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dynamo
from dynamo import loop_kernels
from support.loops import check, fresh_kernels  # noqa: F401 (a fixture)


def clip(v, lo, hi):
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


def square_plus_one(x):
    y = x * x
    return y + 1.0


def clipped(a, out):
    for i in range(a.shape[0]):
        out[i] = clip(a[i], -0.5, 0.5) + square_plus_one(a[i])
    return out


def horner(x):
    acc = 0.0
    for k in range(4):
        acc = acc * x + (k + 1)
    return acc


def with_a_loop_inside(a):
    s = 0.0
    for v in a:
        s += horner(v) + math.sqrt(abs(v))
    return s


def inverse(x):
    return 1.0 / x


def divides(a):
    t = 0.0
    for i in range(len(a)):
        t += inverse(a[i] - 3.0)
    return t


def py_inverse(x):
    return 1 / x


def divides_ints(n):
    t = 0.0
    for i in range(n):
        t += py_inverse(i - 7)
    return t


def maybe_unbound(x):
    if x > 0.5:
        r = x
    return r


def reads_unbound(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += maybe_unbound(a[i])
    return s


def bump(a, i, by):
    a[i] += by


def writes_through(a, n):
    for i in range(n):
        bump(a, i % a.shape[0], 1.0)
    return a


def both(x):
    return x * 2.0, x - 1.0


def unpacks(a):
    s = 0.0
    for v in a:
        p, q = both(v)
        s += p * q
    return s


def outer_helper(x):
    return inner_helper(x) + 1.0


def inner_helper(x):
    return x * 3.0


def nested_calls(a):
    s = 0.0
    for v in a:
        s += outer_helper(v)
    return s


def fact(k):
    return 1 if k <= 1 else k * fact(k - 1)


def recursive(n):
    t = 0
    for i in range(n):
        t += fact(i % 5)
    return t


def with_default(x, y=(2.0,)):
    return x * y[0]


def calls_with_default(a):
    s = 0.0
    for v in a:
        s += with_default(v)
    return s


def int_then_float(n):
    s = 0.0
    for i in range(n):
        s += clip(i, 2, 5) + clip(i * 0.5, 1.0, 2.0)
    return s


def test_scalar_helpers_are_inlined():
    a = np.random.default_rng(0).standard_normal(500)
    check(clipped, a, np.zeros(500))
    check(with_a_loop_inside, a)


def test_each_call_site_keeps_its_own_types():
    """clip is called with ints at one site and floats at the other: two frames."""
    check(int_then_float, 40)


def test_a_division_by_zero_in_a_callee_raises_from_the_callee():
    a = np.arange(10.0)
    check(divides, a)  # (NumPy float64: inf and a RuntimeWarning at a[3])
    check(divides_ints, 20)  # (Python ints: ZeroDivisionError at i == 7)
    with pytest.raises(ZeroDivisionError) as info:
        dynamo.compile(divides_ints, backend="c")(20)
    assert info.traceback[-1].name == "py_inverse"


def test_an_unbound_local_of_a_callee_raises_there():
    check(reads_unbound, np.array([0.9, 0.7, 0.2, 0.8]))


def test_a_callee_writes_into_an_array():
    check(writes_through, np.zeros(7), 30)


def test_a_callee_returns_a_tuple():
    check(unpacks, np.linspace(-2.0, 2.0, 50))


def test_calls_inside_callees():
    check(nested_calls, np.arange(30.0))


def test_a_recursive_function_is_not_inlined():
    check(recursive, 30, kernel=False)


def test_a_call_that_needs_a_default_that_is_not_a_number_is_not_inlined():
    check(calls_with_default, np.arange(5.0), kernel=False)


def test_a_changed_helper_is_not_run_from_an_old_kernel():
    """The helper's code is part of the kernel: a new ``__code__`` builds another one."""
    namespace = {}
    exec("def helper(x):\n    return x + 1.0\n"
         "def caller(a):\n    s = 0.0\n    for v in a:\n        s += helper(v)\n    return s\n",
         namespace)
    caller, helper = namespace["caller"], namespace["helper"]
    compiled = dynamo.compile(caller, backend="c")
    a = np.arange(10.0)
    assert compiled(a) == caller(a) == 55.0
    helper.__code__ = (lambda x: x * 10.0).__code__
    assert compiled(a) == caller(a) == 450.0
    assert len(loop_kernels.kernels_for(caller.__code__)) == 2


def test_a_fast_copy_holds_the_callees_blocks():
    """clipped's loop calls two loop-free helpers: its fast copy has copies of their blocks
    (labels ending in F), and the chunks run there."""
    check(clipped, np.linspace(-1, 1, 100), np.zeros(100))
    (kernel,) = loop_kernels.kernels_for(clipped.__code__)
    assert any(s.kind == "fast" for s in kernel.nest.stmts)
    text = kernel.nest.text()
    assert "L0_in1:" in text and "L0_in1F:" in text  # (the callee's blocks, by frame)
    assert kernel.fast_chunks() > 0


def fetch(a, i):
    return a[i]


def via_index_helper(a, idx, out):
    """The helper's parameter i is a new value at every call: never taken for a value the
    loop leaves alone (the fast copy must not prove a[i] in range from its first value)."""
    for j in range(idx.shape[0]):
        out[j] = fetch(a, idx[j])
    return out


def test_a_callees_parameters_change_at_every_call():
    a = np.arange(10.0)
    check(via_index_helper, a, np.array([1, 2, 3, 9, 0, 5]), np.zeros(6))
    check(via_index_helper, a, np.array([1, 2, 3, 10, 0, 5]), np.zeros(6))  # (IndexError)


def calls_a_looping_helper(a, out):
    for i in range(a.shape[0]):
        out[i] = horner(a[i])
    return out


def test_a_loop_calling_a_helper_with_a_loop_is_not_innermost():
    """Neither loop has a fast copy: the caller's is not innermost, and a callee's loops
    run checked."""
    check(calls_a_looping_helper, np.linspace(-1, 1, 50), np.zeros(50))
    (kernel,) = loop_kernels.kernels_for(calls_a_looping_helper.__code__)
    assert not [s for s in kernel.nest.stmts if s.kind == "fast"]


def scaled(x, by=2.0, shift=1):
    return x * by + shift


def calls_with_defaults(a):
    s = 0.0
    for v in a:
        s += scaled(v) + scaled(v, 0.5)
    return s


def test_defaults_that_are_numbers_are_constants_guarded_on_their_values():
    a = np.arange(10.0)
    check(calls_with_defaults, a)
    compiled = dynamo.compile(calls_with_defaults, backend="c")
    old = scaled.__defaults__
    try:
        scaled.__defaults__ = (3.0, -1)
        assert compiled(a) == calls_with_defaults(a)
        assert len(loop_kernels.kernels_for(calls_with_defaults.__code__)) == 2
    finally:
        scaled.__defaults__ = old


def window(x, lo=-1.0, hi=1.0, scale=1):
    return clip(x, lo, hi) * scale


def calls_with_keywords(a):
    s = 0.0
    for v in a:
        s += window(v, hi=0.5) + window(v, scale=3, lo=0.0) + window(hi=2.0, x=v)
    return s


def bad_keyword(a):
    s = 0.0
    for v in a:
        s += window(v, top=1.0)  # (TypeError in Python: not inlined)
    return s


def test_keyword_arguments_of_inlined_calls():
    check(calls_with_keywords, np.linspace(-3.0, 3.0, 41))
    check(bad_keyword, np.arange(3.0), kernel=False)


def first_negative(a):
    for v in a:
        if v < 0:
            return v  # (a return from inside the callee's own loop)
    return 0.0


def sums_of_first_negatives(A):
    t = 0.0
    for row in A:
        t += first_negative(row)
    return t


def sums_by_index(A):
    t = 0.0
    for i in range(A.shape[0]):
        t += first_negative(A[i])  # (A[i]: the row, passed on)
    return t


def named_like_a_callee_local(a):
    npd1_v = 0.0
    for v in a:
        npd1_v += clip(v, -1.0, 1.0)
    return npd1_v


def test_a_return_from_a_loop_inside_a_callee():
    A = np.random.default_rng(7).standard_normal((20, 6))
    check(sums_of_first_negatives, A)
    check(sums_by_index, A)


def test_a_local_named_like_a_callee_local_is_not_taken_for_one():
    check(named_like_a_callee_local, np.linspace(-2.0, 2.0, 9), kernel=False)
