"""Reductions of 1-d views inside loop kernels (loop_nest.reductions): ``A[i, :i].sum()``,
``np.sum(x[i:])``, ``x[i:i + k].max()`` call NumPy's own inner loop of np.add / np.maximum /
np.minimum over the view, as NumPy's reduce calls it, so a sum is NumPy's pairwise sum to the
bit. Plain NumPy is the oracle (support.loops.check compares floats by their bytes); where this
NumPy's reduce is not one call of its loop (NumPy 2.2 sums float64 in buffer-sized pieces),
float sums are not lowered and the loop runs as before."""

from __future__ import annotations

import numpy as np
import pytest

from dynamo import loop_kernels
from dynamo.backends.c import c_loop_nest
from dynamo.backends.c.numpy_loops import reduce_loop
from support.loops import check, fresh_kernels  # noqa: F401 (a fixture)

#: float64 sums lower on this NumPy (see the module docstring)
FLOAT_SUMS = reduce_loop("sum", "f8") is not None


def triangle_sums(A, x):
    s = 0.0
    for i in range(A.shape[0]):
        s += A[i, :i].sum() + np.sum(x[i:]) * 0.5 - A[:i, i].sum()
    return s


def prefix_sums(a, out):
    for i in range(a.shape[0]):
        out[i] = a[:i + 1].sum()
    return out


def window_range(x, k, out):
    for i in range(len(x) - k + 1):
        out[i] = x[i:i + k].max() - np.min(x[i:i + k])
    return out


def window_of(x, k):
    """k may be 0: the first max() of an empty window raises NumPy's ValueError."""
    acc = 0.0
    for i in range(len(x)):
        acc += 1.0
        acc += np.amax(x[i:i + k]) + np.amin(x[i:i + k])
    return acc


def whole(a, n):
    t = 0.0
    for _ in range(n):
        t += a.sum() + a.max()
    return t


def sum_2d(A):
    t = 0.0
    for i in range(3):
        t += A.sum()
    return t


def sum_of_bools(m):
    t = 0
    for i in range(3):
        t += m[i:].sum()
    return t


def _wide(rng, n):
    return rng.standard_normal(n) * 10.0 ** rng.uniform(-6, 6, n)


@pytest.mark.parametrize("n", [1, 7, 9, 130, 600])
def test_row_and_column_sums_are_numpys_to_the_bit(n):
    rng = np.random.default_rng(n)
    A = _wide(rng, n * n).reshape(n, n)
    check(triangle_sums, A, _wide(rng, n), kernel=FLOAT_SUMS)


def test_prefix_sums_of_long_vectors_are_pairwise():
    """Past 8192 elements NumPy 2.2 would sum in pieces; NumPy's one-call pairwise sum
    rounds differently from a sequential one: the bits tell which one ran."""
    rng = np.random.default_rng(1)
    a = _wide(rng, 20000)
    out = check(prefix_sums, a[::2].copy()[:9000], np.zeros(9000), kernel=FLOAT_SUMS)
    sequential = np.cumsum(a[::2][:9000])
    assert not np.array_equal(out, sequential)  # (the test can tell the two apart)


def test_strided_and_reversed_views():
    rng = np.random.default_rng(2)
    a = _wide(rng, 3000)
    check(prefix_sums, a[::-3], np.zeros(1000), kernel=FLOAT_SUMS)
    check(prefix_sums, a[::7], np.zeros(429), kernel=FLOAT_SUMS)


def test_int64_sums_wrap_as_numpy_does():
    a = np.array([2 ** 62, 2 ** 62, 2 ** 62, -5, 7] * 40, dtype=np.int64)
    out = check(prefix_sums, a, np.zeros(200, np.int64))
    assert out.min() < 0  # (it wrapped: NumPy's add.reduce of int64 does, silently)


def test_max_and_min_with_nans_and_signed_zeros():
    x = np.array([0.0, -0.0, 1.5, np.nan, -2.0, -0.0, 0.0, 3.0, -np.inf, 2.0] * 30)
    for k in (1, 2, 3, 8, 40):
        check(window_range, x, k, np.zeros(len(x) - k + 1))


def test_int_max_and_min():
    x = np.random.default_rng(3).integers(-2 ** 63, 2 ** 63 - 1, 500)
    check(window_range, x, 5, np.zeros(496, np.int64))


def test_max_of_an_empty_view_raises_at_its_iteration():
    x = np.arange(20.0)
    check(window_of, x, 3)  # (the windows at the end are short, then empty: ValueError)
    check(window_of, x, 0)


def test_whole_arrays_and_function_forms():
    rng = np.random.default_rng(4)
    check(whole, _wide(rng, 777), 5, kernel=FLOAT_SUMS)
    check(whole, rng.integers(-1000, 1000, 50), 5)


def test_a_float_sum_that_overflows_warns_as_numpy_does():
    a = np.full(40, 1e307)
    check(prefix_sums, a, np.zeros(40), kernel=FLOAT_SUMS)


def test_what_is_not_lowered_runs_as_before():
    check(sum_2d, np.ones((4, 5)), kernel=False)
    check(sum_of_bools, np.array([True, False, True, True]), kernel=False)


def test_a_numpy_whose_reduce_differs_keeps_the_loop_in_python(monkeypatch):
    """reduce_loop says None (as on NumPy 2.2 for float sums): the kernel is refused when it
    is built, and the loop keeps today's treatment with NumPy's own results."""
    monkeypatch.setattr(c_loop_nest, "reduce_loop", lambda name, dt: None)
    check(prefix_sums, np.arange(50.0), np.zeros(50), kernel=False)
    assert not loop_kernels.kernels_for(prefix_sums.__code__)


def test_the_kernel_names_each_loop_it_calls():
    check(window_range, np.arange(30.0), 4, np.zeros(27))
    (kernel,) = loop_kernels.kernels_for(window_range.__code__)
    assert "numpy.maximum dd->d (max)" in kernel.source
    assert "npd_fold_f64(" in kernel.source


def other_calling_forms(x, out):
    for i in range(1, x.shape[0]):
        out[i] = (x[:i].sum(0) + np.sum(x[:i], axis=0) + x[:i].max(initial=-1.0)
                  + np.min(x[:i], keepdims=True)[0] + np.maximum(x[i], 0.5, dtype=np.float64))
    return out


def test_other_calling_forms_keep_their_results():
    """axis, initial, keepdims, dtype: not lowered (the loop runs as before), NumPy's values."""
    x = np.random.default_rng(9).standard_normal(30)
    check(other_calling_forms, x, np.zeros(30), kernel=False)


def test_a_probe_verdict_is_kept_for_the_next_process(tmp_path, monkeypatch):
    """The probes of NumPy's reduction loops (4-11 ms each) run once per NumPy, CPU and buffer
    size: their verdict is a record of the kernel cache directory, which decides from then on
    (a stored 'false' refuses the loop without probing; another buffer size probes again)."""
    from dynamo.backends.c import cache, numpy_loops
    monkeypatch.setenv("DYNAMO_CACHE_DIR", str(tmp_path))
    probed = []
    real = numpy_loops._reduce_probes
    monkeypatch.setattr(numpy_loops, "_reduce_probes", lambda dt: probed.append(dt) or real(dt))
    first = numpy_loops.reduce_loop.__wrapped__("max", "f8")
    assert first is not None and len(probed) == 1
    assert numpy_loops.reduce_loop.__wrapped__("max", "f8") == first and len(probed) == 1
    (record,) = (tmp_path / "probes").glob("*/*.json")
    key, _, _ = record.read_text().split("\n", 2)
    cache.KernelCache(tmp_path).write_record("probes", key, "false")
    assert numpy_loops.reduce_loop.__wrapped__("max", "f8") is None and len(probed) == 1
    saved = np.getbufsize()
    try:
        np.setbufsize(saved * 2)
        assert numpy_loops.reduce_loop.__wrapped__("max", "f8") == first and len(probed) == 2
    finally:
        np.setbufsize(saved)
