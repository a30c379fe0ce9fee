"""Regressions from the differential fuzzer (tests/fuzz): C-backend mismatches with NumPy.

Issue 8 of npdynamo ("no mismatch"): each test is one former `KNOWN_BUGS` entry of
tests/fuzz/test_differential.py, reduced to the graph that showed it, and checks the bits,
layouts, warnings or exceptions against eager NumPy (the graph's own ``gm.forward``), plus that
the C kernel really ran (or, where the fix leaves an op to NumPy, that it did and the rest of the
graph is still a kernel).
"""

from __future__ import annotations

import itertools
import shutil
import warnings

import numpy as np
import pytest

from dynamo.backends.c.loop_ir import Const
from support.c_graphs import build, same_bits

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def calls(f) -> int:
    assert getattr(f, "runners", None), "no C kernel was built for this graph"
    return sum(r.calls for r in f.runners.values())


def recorded(fn, args, **errstate):
    """(result or None, [(category, message)], (exception type, message) or None)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with np.errstate(**errstate):
                result, error = fn(*args), None
        except Exception as exc:
            result, error = None, (type(exc), str(exc))
    return result, [(w.category, str(w.message)) for w in caught], error


def assert_like_numpy(f, gm, args, **errstate):
    """The compiled graph and eager NumPy agree on bits, warnings (in order) and exceptions."""
    want = recorded(gm.forward, args, **errstate)
    got = recorded(f, args, **errstate)
    assert got[1] == want[1], f"warnings: compiled {got[1]}, NumPy {want[1]}"
    assert got[2] == want[2], f"exception: compiled {got[2]}, NumPy {want[2]}"
    if want[2] is None:
        assert same_bits(got[0], want[0]), f"compiled {got[0]!r}, NumPy {want[0]!r}"
    return want


# -- c-clip-signed-zero, c-negative-zero-constant ------------------------------------------------

SIGNED = np.array([0.0, 1.0, -1.0, -0.0, np.nan, np.inf, -np.inf, 2.5])


@pytest.mark.parametrize("fn", [
    lambda a: np.clip(a, -0.0, 0.0),
    lambda a: np.clip(a, 0.0, -0.0),
    lambda a: np.where(a > 0, a, -0.0),
    lambda a: a * 0 + -0.0,
    lambda a: (np.maximum(a, 0.0), np.maximum(a, -0.0), np.minimum(a, -0.0)),
], ids=["clip-lo-neg", "clip-hi-neg", "where", "mul-add", "max-min"])
def test_negative_and_positive_zero_constants_stay_apart(fn):
    # Issue: constants were merged by value inside a kernel (0.0 == -0.0 in Python), so
    # np.clip(x, -0.0, 0.0) clipped to -0.0 on both sides and np.where(a > 0, a, -0.0) next
    # to a 0 constant wrote +0.0.
    for dtype in ("float64", "float32"):
        x = SIGNED.astype(dtype)
        gm, f = build(fn, [x])
        before = calls(f)
        assert_like_numpy(f, gm, [x], all="ignore")
        assert calls(f) == before + 1


def test_const_equality_is_by_bits():
    f8 = np.dtype(np.float64)
    assert Const(-0.0, f8) != Const(0.0, f8)
    assert len({Const(-0.0, f8), Const(0.0, f8)}) == 2
    assert Const(float("nan"), f8) == Const(float("nan"), f8)
    assert Const(1, np.dtype(np.int8)) != Const(1, np.dtype(np.int16))


# -- c-layout-fused-temporary --------------------------------------------------------------------

def test_output_layout_follows_fused_away_temporaries():
    # Issue: `a.astype(np.int32) <= +a` with `a` broadcast along axis 0: the astype (a NumPy
    # call) is F-ordered, NumPy's `+a` temporary C-ordered, and C wins the conflict; the
    # kernel read `a` itself (stride 0 never decides), so only the F vote counted.
    a = np.broadcast_to(np.array([[1.0, 2.0, 3.0]], np.float32), (2, 3))
    gm, f = build(lambda x: x.astype(np.int32) <= +x, [a])
    got, want = f(a), gm.forward(a)
    assert calls(f) == 1
    assert got.strides == want.strides == (3, 1)
    assert same_bits(got, want)


def _views(rng):
    base = rng.standard_normal((4, 6, 5)).astype(np.float32)
    yield "C", base
    yield "F", np.asfortranarray(base)
    yield "T", np.ascontiguousarray(base.transpose(2, 1, 0)).transpose(2, 1, 0)
    yield "neg", base[::-1, :, ::-1]
    yield "slice", np.repeat(base, 2, axis=1)[:, ::2]
    yield "bcast0", np.broadcast_to(base[:1], base.shape)
    yield "bcast2", np.broadcast_to(base[:, :, :1], base.shape)
    yield "rolled", np.ascontiguousarray(np.moveaxis(base, 1, 0)).swapaxes(0, 1)


LAYOUT_GRAPHS = {
    "astype-vs-pos": lambda x, y: x.astype(np.float64) <= +y,
    "casts": lambda x, y: x.astype(np.float64) * 2.0 + y.astype(np.float64),
    "where": lambda x, y: np.where(x > 0, -y, x * 2.0),
    "chain": lambda x, y: np.abs(-x) - (y + 1.0),
    "astype-of-sum": lambda x, y: (x + y).astype(np.float64),
}


@pytest.mark.parametrize("name", sorted(LAYOUT_GRAPHS))
def test_output_layout_equals_numpys_for_every_pair_of_layouts(name):
    rng = np.random.default_rng(11)
    views = dict(_views(rng))
    fn = LAYOUT_GRAPHS[name]
    gm, f = build(fn, [views["C"], views["C"]])
    for (nx, x), (ny, y) in itertools.product(views.items(), views.items()):
        before = calls(f)
        with np.errstate(all="ignore"):
            got, want = f(x, y), gm.forward(x, y)
        assert calls(f) == before + 1, f"{nx}/{ny}: the kernel did not run"
        assert got.strides == want.strides, f"{nx}/{ny}: {got.strides} != {want.strides}"
        assert same_bits(got, want), f"{nx}/{ny}"


# -- c-schedule-reorders-raise -------------------------------------------------------------------

def test_errstate_raise_reports_the_first_failing_statement():
    # Issue: `v0 = np.cos(a1); v1 = 1 / a0; return -v0`: cos is fused into the kernel of
    # `-v0`, scheduled after the division, so under errstate(all='raise') the division raised
    # first; NumPy raises "invalid value encountered in cos".
    a0 = np.array(False)
    a1 = np.array([1.0, np.inf, 2.0, 3.0])

    def fn(x, y):
        v0 = np.cos(y)
        _ = 1 / x
        return -v0

    gm, f = build(fn, [a0, a1])
    assert any(r.kernel.kind == "pointwise" and len(r.kernel.members) == 2
               for r in f.runners.values()), "cos and negative should share a kernel"
    want = assert_like_numpy(f, gm, [a0, a1], all="raise")
    assert want[2] == (FloatingPointError, "invalid value encountered in cos")
    ok = [np.array(True), np.array([1.0, 2.0, 3.0, 4.0])]
    before = calls(f)
    np.testing.assert_array_max_ulp(f(*ok), gm.forward(*ok), maxulp=4)  # cos: libm's
    assert calls(f) > before  # default errstate: the kernels run


# -- c-raise-drops-warning (tests/fuzz/test_loops_differential.py, seed 5398) ---------------------

RAISE_GRAPHS = {
    # `1 / x` and `y[i] + 1` shared a kernel, which ran after the index `y[i]`.
    "shared-kernel": lambda x, y, i: (1.0 / x, y[i] + 1.0),
    # `1 / x` was inlined into the kernel of `v + y[i]`.
    "inlined": lambda x, y, i: (lambda v: v + y[i])(1.0 / x),
}


@pytest.mark.parametrize("name", sorted(RAISE_GRAPHS))
def test_an_index_that_raises_keeps_the_warnings_of_earlier_statements(name):
    # Issue: the loop fuzzer's `x2 /= B[i]; A[i, i] -= v4` (one kernel for the division and
    # the subtraction, run after `A[i, i]`): at `B[i] == 0.0` with `i` out of bounds for `A`,
    # NumPy warns "divide by zero", then raises IndexError; the compiled graph raised without
    # warning. No kernel now spans a NumPy call that may raise.
    x = np.array([0.0, 1.0, 2.0, 4.0])
    y = np.array([1.0, 2.0, 3.0, 4.0])
    gm, f = build(RAISE_GRAPHS[name], [x, y, np.arange(4)])
    want = assert_like_numpy(f, gm, [x, y, np.array([0, 1, 2, 9])])
    assert want[1] == [(RuntimeWarning, "divide by zero encountered in divide")]
    assert want[2] is not None and want[2][0] is IndexError
    before = calls(f)
    assert_like_numpy(f, gm, [x + 1.0, y, np.arange(4)])
    assert calls(f) == before + 2  # the division and the addition are still kernels


# -- c-power-3-4-multiplies ----------------------------------------------------------------------

@pytest.mark.parametrize("exponent", [3, 4, 3.0, 2.5, -2])
def test_float_powers_numpy_computes_with_its_pow_stay_numpy(exponent):
    # Issue: x ** 3 was two multiplies (266 of 1000 values differed in the last bit), then a
    # pow call (still a few percent differed: NumPy's pow is its own SIMD one).
    x = np.random.default_rng(27).standard_normal(1000) * 4
    gm, f = build(lambda a: (a ** exponent, a * 2.0), [x])
    before = calls(f)
    assert_like_numpy(f, gm, [x], all="ignore")
    assert calls(f) == before + 1  # a * 2.0 is still a kernel
    assert "NumPy's pow loop" in str(gm.meta["fusion_report"])


# -- c-sum-outer-axis-order (fixed with the reduction-order work, test_c_exactness.py) ------------

@pytest.mark.parametrize("order", ["C", "F"])
def test_sum_over_outer_axis_adds_in_numpys_order(order):
    # The fuzzer's repro: NumPy adds row after row over a non-inner axis of a C array (pairwise
    # only along the inner axis); the kernel summed each column pairwise (last-bit differences
    # in all 3 columns).
    a = np.asarray(np.random.default_rng(7412).standard_normal((129, 3)) * 4, order=order)
    gm, f = build(lambda x: (np.sum(x, axis=0), np.mean(x, axis=0)), [a])
    before = calls(f)
    assert_like_numpy(f, gm, [a])
    assert calls(f) == before + 1


# -- c-where-lazy-fp-flags, c-dead-kernel-value-fp-flags ------------------------------------------

FLAG_GRAPHS = {
    "where-branch": (lambda a, b, c: np.where(c, a / b, 0.0), "sink"),
    "where-other-branch": (lambda a, b, c: np.where(c, 0.0, np.log(1.5 - a) * 2.0), "sink"),
    "self-compare": (lambda a, b, c: (1.0 / b) > (1.0 / b), "sink"),
    "self-compare-one-node": (lambda a, b, c: (lambda v: (v < v, a + 1.0))(a / b), "sink"),
    "power-zero": (lambda a, b, c: (a / b) ** 0, "sink"),
    "nan-compare": (lambda a, b, c: (a / b) == np.nan, "sink"),
    "xor-self": (lambda a, b, c: (lambda v: np.logical_xor(v, v))(a / b > 1.0), "sink"),
    "epilogue": (lambda a, b, c: np.where(c, a / b, a - a.sum(keepdims=True)), "sink"),
    "reduction": (lambda a, b, c: np.sum(np.where(c, a / b, 0.0)), "stored truediv"),
}


@pytest.mark.parametrize("name", sorted(FLAG_GRAPHS))
@pytest.mark.parametrize("size", [2, 1000])
def test_fp_flags_of_values_gcc_could_skip_are_kept(name, size):
    # Issue: gcc computes a `where` branch only where it is selected (`np.where(c, a / b,
    # 0.0)` lost NumPy's "divide by zero" for the unselected elements) and drops a value only
    # compared with itself (`v > v` folds to false): their FP flags were lost. Such values are
    # now kept alive (their bits ORed into a flag sink the kernel hands to an empty asm) or,
    # inside a reduction's element function, stored: every element is computed, as in NumPy.
    fn, how = FLAG_GRAPHS[name]
    a = np.tile([1.0, 2.0], size // 2)
    b = np.tile([0.0, 1.0], size // 2)
    c = np.tile([False, True], size // 2)
    gm, f = build(fn, [a, b, c])
    report = str(gm.meta["fusion_report"])
    if how == "sink":
        assert "keep |= DYN_BITS(" in report
    else:
        assert f"{how}: may raise FP flags" in report
    want = assert_like_numpy(f, gm, [a, b, c])
    assert want[1], "NumPy warns here"
    before = calls(f)
    with np.errstate(divide="ignore", invalid="ignore"):  # the kernels' results are kept
        assert_like_numpy(f, gm, [a, b, c])
    assert calls(f) > before, "the kernel did not run"
    strided = [np.repeat(v, 2)[::2] for v in (a, b, c)]
    assert_like_numpy(f, gm, strided)


# -- c-scalar-int-overflow-warning ---------------------------------------------------------------

@pytest.mark.parametrize("op", ["neg", "add", "sub", "mul", "abs"])
def test_integer_operators_on_numpy_scalars_warn_on_overflow(op):
    # Issue: `-np.bitwise_and(a, a)` with a = np.array(254, np.uint8) is NumPy scalar math,
    # which warns "overflow encountered in scalar negative" (raises under errstate 'raise');
    # the kernel wrapped silently. Those ops stay NumPy; `a + 1` (0-d array: the ufunc,
    # which wraps silently) is still a kernel.
    exprs = {"neg": lambda v: -v, "add": lambda v: v + 200, "sub": lambda v: v - np.int8(100),
             "mul": lambda v: v * v, "abs": lambda v: abs(v)}
    dtype = np.int8 if op in ("sub", "abs") else np.uint8
    a = np.array(np.iinfo(dtype).min if op == "abs" else -100 if op == "sub" else 254, dtype)
    expr = exprs[op]

    def fn(x):
        v = np.bitwise_and(x, x)
        return expr(v), x + 1

    gm, f = build(fn, [a])
    assert "on NumPy integer scalars" in str(gm.meta["fusion_report"])
    before = calls(f)
    want = assert_like_numpy(f, gm, [a])
    assert want[1] and "overflow encountered in scalar" in want[1][0][1]
    assert calls(f) > before
    want = assert_like_numpy(f, gm, [a], all="raise")
    assert want[2] is not None and want[2][0] is FloatingPointError
