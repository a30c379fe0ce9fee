"""The C backend's sums, means, products and powers are NumPy's bits, in every layout.

Float addition is not associative, so a reduction kernel equals NumPy only if it adds in NumPy's
order: the reduction's nditer orders the axes by the input's strides, merges the ones it can,
sums pairwise along the innermost dim only when that dim is reduced (``out += pairwise(run)``)
and otherwise adds row after row into the result (``out[j] += x[i, j]``). The kernel follows
that order (`kernel.reduce_iteration`) or gives way to NumPy. ``x ** k`` follows NumPy's power
loop: ``k == 2`` (square), ``-1`` (reciprocal) and ``0.5`` (sqrt) are special-cased, 0 and 1
are exact, and every other float exponent stays a NumPy call (NumPy's own pow: its last bit
cannot be reproduced).

The oracle is the graph's eager ``gm.forward`` (NumPy itself), compared byte for byte; tests
check that the kernel really ran where it is expected to.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from support.c_graphs import build, same_bits

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

FLOATS = ["float32", "float64"]


def layouts(a: np.ndarray) -> dict[str, np.ndarray]:
    """The values of ``a`` as C, F, transposed-storage, reversed and sliced views."""
    out = {"C": a, "F": np.asfortranarray(a), "neg0": a[::-1],
           "sliced0": np.repeat(a, 2, axis=0)[::2]}
    if a.ndim > 1:
        out["negL"] = a[..., ::-1]
        out["slicedL"] = np.repeat(a, 2, axis=-1)[..., ::2]
        out["Tstore"] = np.ascontiguousarray(np.swapaxes(a, 0, -1)).swapaxes(0, -1)
        out["negall"] = a[(slice(None, None, -1),) * a.ndim]
    if a.ndim > 2:
        out["rolled"] = np.ascontiguousarray(np.moveaxis(a, 1, 0)).swapaxes(0, 1)
    return out


def check_layouts(fn, a: np.ndarray) -> int:
    """Compare ``fn`` compiled and eager on every layout of ``a``; returns kernel launches."""
    gm, f = build(fn, [a])
    runners = list(f.runners.values())
    assert runners, "the graph was not lowered to a kernel"
    for name, x in layouts(a).items():
        with np.errstate(all="ignore"):
            want, got = gm.forward(x), f(x)
        assert same_bits(got, want), f"{name}: {got!r:.200} != {want!r:.200}"
    return sum(r.calls for r in runners)


REDUCERS = {
    "sum": lambda ax, kd: (lambda x: x.sum(axis=ax, keepdims=kd)),
    "mean": lambda ax, kd: (lambda x: np.mean(x, axis=ax, keepdims=kd)),
    "prod": lambda ax, kd: (lambda x: np.prod(x, axis=ax, keepdims=kd)),
    "sumsq": lambda ax, kd: (lambda x: np.sum(x * x, axis=ax, keepdims=kd)),
}

SHAPES_AXES = [
    ((20, 3), 0), ((20, 3), 1), ((20, 3), None), ((3, 20), 0), ((1000, 7), 0), ((7, 1000), 0),
    ((7, 1000), 1), ((1000, 3), None), ((129, 130), 0), ((129, 130), 1), ((1, 17), 0),
    ((17, 1), 0), ((1000,), 0), ((333,), None), ((4, 5, 6), (0, 2)), ((4, 5, 6), (0, 1)),
    ((4, 5, 6), 1), ((9, 130, 3), (1, 2)), ((9, 130, 3), 0), ((2, 3, 300), None),
]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", sorted(REDUCERS))
def test_reductions_match_numpy_bits_in_every_layout(op, dtype, keepdims):
    rng = np.random.default_rng(7)
    for shape, axis in SHAPES_AXES:
        a = rng.standard_normal(shape) * 10
        if op == "prod":
            a = 1.0 + a / 1000.0
        a = a.astype(dtype)
        check_layouts(REDUCERS[op](axis, keepdims), a)


@pytest.mark.parametrize("dtype", FLOATS)
def test_sum_over_leading_axis_adds_row_after_row(dtype):
    # Issue: the kernel summed each column pairwise; NumPy's inner loop runs along the kept
    # (contiguous) axis, so each output element is a running sum over the rows.
    x = (np.arange(60) / 7).astype(dtype).reshape(20, 3)
    gm, f = build(lambda a: a.sum(axis=0), [x])
    assert same_bits(f(x), x.sum(axis=0))
    (runner,) = f.runners.values()
    assert runner.calls == 1
    y = (np.arange(30_000) / 7).astype(dtype).reshape(10_000, 3)
    gm, f = build(lambda a: a.sum(axis=0), [y])
    assert same_bits(f(y), y.sum(axis=0))


def test_full_sum_of_transposed_array_follows_memory_order():
    # Issue: the kernel summed in C (logical) order; NumPy sums in memory order.
    x = (np.arange(12.0) / 7).reshape(4, 3).T
    gm, f = build(lambda a: a.sum(), [x])
    assert same_bits(f(x), x.sum())
    rng = np.random.default_rng(3)
    gm, f = build(lambda a: a.sum(), [rng.standard_normal((40, 30)).T])
    (runner,) = f.runners.values()
    for _ in range(20):
        y = rng.standard_normal((40, 30)).T
        assert same_bits(f(y), y.sum())
    assert runner.calls == 20


def test_mean_over_leading_axis_and_fused_prologue_match():
    x = np.random.default_rng(1).standard_normal((500, 5)).astype(np.float32)
    assert check_layouts(lambda a: (np.mean(a, axis=0), np.sum((a - 1.0) * a, axis=0)), x)


def power_inputs(dtype: str) -> np.ndarray:
    rng = np.random.default_rng(4)
    return np.concatenate([np.linspace(-2.5, 3.3, 50), rng.uniform(-50, 50, 2000),
                           [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, 1e30, -1e30]]).astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("exponent", [0, 1, 2, -1, 0.5, 2.0, -1.0, 0.0])
def test_float_power_special_cases_match_numpy_bits(dtype, exponent):
    # NumPy squares for 2, takes the reciprocal for -1 (issue: the kernel called pow, 3 of
    # 5050 float64 values differed) and sqrt for 0.5; x ** 0 and x ** 1 are exact.
    x = power_inputs(dtype)
    gm, f = build(lambda a: a ** exponent, [x])
    with np.errstate(all="ignore"):
        got, want = f(x), gm.forward(x)
    assert same_bits(got, want)
    (runner,) = f.runners.values()
    assert runner.calls == 1


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("exponent", [3, 4, 5, -2, -0.5, 1.5, 3.0])
def test_other_float_powers_stay_numpy_calls(dtype, exponent):
    # Issue: x ** 3 and x ** 4 were repeated multiplies (a rounding per step: 26% of x ** 3
    # differed from NumPy), then glibc's pow (a few percent still differed in the last bit:
    # NumPy calls its own SIMD pow, SVML's on this machine). The backend does not guess bits:
    # every other float exponent is left to NumPy, and the rest of the graph still fuses.
    x = power_inputs(dtype)
    gm, f = build(lambda a: (a ** exponent) * 2.0 + 1.0, [x])
    with np.errstate(all="ignore"):
        got, want = f(x), gm.forward(x)
    assert same_bits(got, want)
    report = gm.meta["fusion_report"]
    assert "pow" in str(report) and "NumPy's pow loop" in str(report)
    (runner,) = f.runners.values()  # the multiply-add around it is still a kernel
    assert runner.calls == 1 and "pow(" not in str(report)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint16", "uint64"])
@pytest.mark.parametrize("exponent", [0, 1, 2, 3, 4, 7, 63])
def test_integer_power_matches_numpy(dtype, exponent):
    x = np.arange(-40, 40).astype(dtype)
    gm, f = build(lambda a: a ** exponent, [x])
    assert same_bits(f(x), gm.forward(x))


@pytest.mark.parametrize("shape", [(8192,), (90, 90), (9000,), (3, 5000)])
def test_integer_mean_follows_numpys_buffered_cast(shape):
    # np.mean of integers casts inside the reduce: NumPy copies the input through its
    # 8192-element buffer and sums each buffer pairwise. The kernel runs only when one buffer
    # holds the whole input (else the NumPy path runs); large int64 values make order visible.
    x = np.random.default_rng(9).integers(0, 2**62, shape)
    calls = check_layouts(lambda a: (np.mean(a), np.mean(a, axis=-1)), x)
    assert (calls > 0) == (x.size <= np.getbufsize())


def test_full_sum_of_broadcast_expression_stays_numpy():
    # NumPy sums the (contiguous) temporary a * b as one pairwise run; the kernel cannot walk
    # a broadcast operand as one run, so the NumPy path computes it (it used to add per-row
    # pairwise sums: different bits).
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((64, 130)), rng.standard_normal(130)
    gm, f = build(lambda a, b: np.sum(a * b), [x, y])
    assert same_bits(f(x, y), gm.forward(x, y))
    (runner,) = f.runners.values()
    assert runner.calls == 0
