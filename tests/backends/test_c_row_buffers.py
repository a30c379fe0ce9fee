"""Performance-motivated code paths of the C backend, checked for correctness.

* Row buffers (`c_reduction.row_buffers`): softmax-like kernels store the summed values in the
  epilogue output and read them back instead of recomputing ``exp``; results must still equal
  NumPy (pairwise sums in NumPy's order) for contiguous and strided rows, float32 and float64.
* Calibration (`calibration.calibrate`): best-of-N interleaved timings decide kernel vs
  NumPy; the extra runs must not warn a second time (the first call warns once, from the
  chosen path).
"""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest

from support.c_graphs import build

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")




def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("view", ["contiguous", "strided rows", "odd width"])
def test_softmax_row_buffer_matches_numpy(dtype, view):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((33, 300)) * 5).astype(dtype)
    x = {"contiguous": x, "strided rows": x[:, ::2], "odd width": x[:, :131]}[view]
    gm, f = build(softmax, [x])
    (runner,) = f.runners.values()
    from dynamo.backends.c.c_reduction import row_buffers
    from dynamo.backends.c.codegen_c import kernel_source as src_of

    assert row_buffers(runner.kernel) == {1: 0}  # the sum's exp lives in the output row
    src = src_of(runner.kernel)
    assert "pwb(&row, 0, inner)" in src
    got, want = f(x), gm.forward(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    rtol = 1e-5 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=rtol * 10)


def test_row_buffer_with_sum_also_returned_and_mean():
    def fn(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        s = e.sum(axis=1, keepdims=True)
        return e / s, s, np.log(e.mean(axis=1, keepdims=True)) + e

    x = np.random.default_rng(4).standard_normal((17, 257))
    gm, f = build(fn, [x])
    got, want = f(x), gm.forward(x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-300)


def test_no_row_buffer_when_epilogue_does_not_read_the_value():
    def layernorm(x):
        m = x.mean(axis=1, keepdims=True)
        v = ((x - m) ** 2).mean(axis=1, keepdims=True)
        return (x - m) / np.sqrt(v + 1e-5)

    x = np.random.default_rng(5).standard_normal((9, 100))
    gm, f = build(layernorm, [x])
    from dynamo.backends.c.c_reduction import row_buffers

    (runner,) = f.runners.values()
    assert row_buffers(runner.kernel) == {}
    np.testing.assert_allclose(f(x), gm.forward(x), rtol=1e-13)


def test_calibration_is_best_of_several_and_warns_once():
    x = np.linspace(-1.0, 1.0, 50_000)
    x[7] = 0.0
    gm, f = build(lambda a: np.log(np.abs(a)) * 2.0, [x], calibrate=True)
    (runner,) = f.runners.values()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(divide="warn"):
            got = f(x)
    assert [w.category for w in caught] == [RuntimeWarning]  # once, not per round
    kernel_s, numpy_s = runner.calibration
    assert 0 < kernel_s and 0 < numpy_s
    assert runner.use_kernel == (kernel_s <= numpy_s)
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(got, gm.forward(x), rtol=1e-14)


def test_fast_max_min_of_loads_keeps_numpy_nan_and_flag_semantics():
    # Plain-load max/min phases use ordinary compares and restore FE_INVALID afterwards.
    x = np.random.default_rng(6).standard_normal((40, 300))
    x[3, 7], x[4, 299], x[6, 100] = np.nan, np.nan, np.inf
    x[5, :] = -0.0
    x[5, 9] = 0.0
    gm, f = build(lambda a: (a.max(axis=1), a.min(axis=1), np.max(a)), [x])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a spurious 'invalid value' warning fails the test
        with np.errstate(all="warn"):
            got = f(x)
    want = gm.forward(x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        assert np.array_equal(np.signbit(g), np.signbit(w))


def test_max_of_computed_values_still_reports_invalid():
    x = np.linspace(-1.0, 1.0, 600).reshape(2, 300)
    gm, f = build(lambda a: np.log(a).max(axis=1), [x])
    with pytest.warns(RuntimeWarning, match="invalid"):
        with np.errstate(invalid="warn", divide="ignore"):
            got = f(x)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, gm.forward(x))
