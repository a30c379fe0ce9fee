"""`_C.LoopCall` (csrc/loop_call.c): a loop kernel's call made in C gives what the wrapper's
Python path gives (c_loop_nest.LoopKernel._run), for every kind of argument: arrays (aliased
too), Python and NumPy scalars, values of other types, ints beyond int64, dtypes equal to the
kernel's but other objects, a deoptimisation (the rest of the range), a ``return`` of a NumPy
scalar, a loop left unbound locals. The kernel is called directly with the values its loop
starts from; each case also runs whole through dynamo.compile against plain Python."""

from __future__ import annotations

import numpy as np
import pytest

import dynamo
from dynamo import _C, loop_kernels
from dynamo.instructions import UNBOUND

from support.loops import check, fresh_kernels  # noqa: F401 (a fixture)


def accumulate(a, s, n):
    for i in range(n):
        s += a[i]
    return s


def first_over(a, limit):
    for i in range(a.shape[0]):
        if a[i] > limit:
            return a[i]
    return limit


def copy_shifted(dst, src, n):
    for i in range(n):
        dst[i] = src[i] + 1.0
    return dst


def _kernel(fn, *args):
    dynamo.compile(fn, backend="c")(*args)
    (kernel,) = loop_kernels.kernels_for(fn.__code__)
    return kernel


def _both(kernel, iterable, values):
    """(C path, Python path) of one call with these starting values; the C path taken both
    ways: the call the graph makes (`LoopKernel.entry`, the whole call in C, with Python
    callbacks for what it does not run) and the wrapper's (``run``, then Python)."""
    c_call = kernel._c_call
    assert c_call is not None, "no C call was made for this kernel"
    assert type(kernel.entry) is _C.LoopCall
    fast = kernel.entry(iterable, *values)
    wrapped = kernel(iterable, *values)
    assert _same(fast, wrapped, views=True), (fast, wrapped)
    kernel._c_call = None
    try:
        slow = kernel(iterable, *values)
    finally:
        kernel._c_call = c_call
    return fast, slow


def _same(a, b, views: bool = False) -> bool:
    """Equal results: the same arrays (with `views`: or views of one row, made per call)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y, views) for x, y in zip(a, b))
    if views and isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a is not b:
        return a.base is not None and a.base is b.base and (
            a.__array_interface__ == b.__array_interface__)
    if isinstance(a, np.ndarray) or a is UNBOUND:
        return a is b
    if isinstance(a, range):
        return a == b
    return type(a) is type(b) and (a == b or (a != a and b != b))


RNG = np.random.default_rng(5)
A = RNG.random(20)


@pytest.mark.parametrize("s", [0.0, np.float64(1.5), 3, np.int64(2), 2**70, "x", True])
def test_scalars_of_every_kind(s):
    kernel = _kernel(accumulate, A, 0.0, 5)
    values = {"a": A, "s": s, "n": 7}
    fast, slow = _both(kernel, None, tuple(values[n] for n in kernel.nest.inputs))
    assert _same(fast, slow), (fast, slow)


@pytest.mark.parametrize("a", [A, A.astype(np.int64), A.view(np.dtype("f8", metadata={"m": 1})),
                               A.reshape(4, 5), [1.0, 2.0], A[::2]])
def test_arrays_of_other_dtypes_shapes_and_types(a):
    kernel = _kernel(accumulate, A, 0.0, 5)
    values = {"a": a, "s": 0.0, "n": 3}
    fast, slow = _both(kernel, None, tuple(values[n] for n in kernel.nest.inputs))
    assert _same(fast, slow), (fast, slow)


@pytest.mark.parametrize("n", [5, 25])  # 25: an IndexError, so a deoptimisation
def test_a_deoptimisation_returns_the_rest_of_the_range(n):
    kernel = _kernel(accumulate, A, 0.0, 5)
    values = {"a": A, "s": 0.0, "n": n}
    fast, slow = _both(kernel, None, tuple(values[name] for name in kernel.nest.inputs))
    assert _same(fast, slow), (fast, slow)
    assert fast[0] == (0 if n == 25 else 1)
    check(accumulate, A, 0.0, n)


@pytest.mark.parametrize("mode", ["raise", "ignore", "warn"])
def test_the_call_in_c_leaves_other_error_states_to_python(mode):
    """Under ``np.errstate`` other than NumPy's default the kernel does not run (Python runs
    the loop, which raises or warns as NumPy does); an errstate equal to the default runs it."""
    kernel = _kernel(accumulate, A, 0.0, 5)
    values = tuple({"a": A, "s": 0.0, "n": 5}[n] for n in kernel.nest.inputs)
    with np.errstate(divide=mode):
        fast, slow = _both(kernel, None, values)
    assert _same(fast, slow), (fast, slow)
    assert fast[0] == (1 if mode == "warn" else -1)


@pytest.mark.parametrize("limit", [0.5, 2.0, np.float64(0.9)])
def test_a_returned_numpy_scalar(limit):
    kernel = _kernel(first_over, A, 0.5)
    values = {"a": A, "limit": limit}
    fast, slow = _both(kernel, None, tuple(values[n] for n in kernel.nest.inputs))
    assert _same(fast, slow), (fast, slow)
    check(first_over, A, limit)


def test_aliased_and_read_only_arrays():
    kernel = _kernel(copy_shifted, np.zeros(20), A, 5)
    ro = A.copy()
    ro.flags.writeable = False
    for dst, src in [(A.copy(),) * 2, (ro, A), (A.copy(), ro)]:
        values = {"dst": dst, "src": src, "n": 4}
        fast, slow = _both(kernel, None, tuple(values[n] for n in kernel.nest.inputs))
        assert _same(fast, slow), (fast, slow)
    check(copy_shifted, ro, A, 4)


def running_sums(a, out):
    s = 0.0
    for i in range(a.shape[0]):
        s += np.tanh(a[i]) * 0.5
        out[i] = s
    return out


def tanh_total(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += np.tanh(a[i])  # (a batched call: its buffer is the call's, not the kernel's)
    return s


def test_threads_running_one_kernel_at_once_share_nothing():
    """Each call keeps its state on its own C stack (and its buffers on its own heap): four
    threads calling the same kernels at once, the GIL released, each get plain's results."""
    from support.threads import run_in_threads
    compiled = dynamo.compile(running_sums, backend="c")
    shift = dynamo.compile(copy_shifted, backend="c")
    inputs = [RNG.random(20000) * (k + 1) for k in range(4)]
    expected = [running_sums(a, np.empty_like(a)) for a in inputs]
    compiled(inputs[0], np.empty_like(inputs[0]))
    total = dynamo.compile(tanh_total, backend="c")
    totals = [tanh_total(a) for a in inputs]
    total(inputs[0])
    assert any("batch 1 ufunc" in k.nest.text()
               for k in loop_kernels.kernels_for(tanh_total.__code__))

    def work(k: int) -> None:
        for _ in range(20):
            got = compiled(inputs[k], np.empty_like(inputs[k]))
            assert np.array_equal(got, expected[k])
            dst = np.zeros(30)
            assert np.array_equal(shift(dst, inputs[k], 30), inputs[k][:30] + 1.0)
            assert total(inputs[k]) == totals[k]
    assert run_in_threads(work, 4) == []
    assert loop_kernels.kernels_for(running_sums.__code__)


def last_row(A):
    t = 0.0
    for row in A:
        t += row[0]
    return row, t


def test_a_row_local_comes_back_as_the_same_view_from_both_paths():
    """A row is not an input: both paths box it as ``A[i]`` (a new view of that row)."""
    A2 = RNG.random((5, 3))
    kernel = _kernel(last_row, A2)
    values = {"A": A2, "t": 0.0}
    fast, slow = _both(kernel, None, tuple(values[n] for n in kernel.nest.inputs))
    assert fast[0] == slow[0]
    k = kernel.names.index("row")
    for got in (fast[1][k], slow[1][k]):
        assert got.base is A2 and got.__array_interface__ == A2[4].__array_interface__
    check(last_row, A2)
