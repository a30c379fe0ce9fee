"""Numerics of the C backend: every lowered op against eager NumPy (the graph's own forward).

Graphs are built by hand with `fx.Proxy`, annotated with `propagate_shapes`, compiled with
``min_size=0`` (so even tiny arrays go through C). Many ops share one graph (one kernel with
many outputs) and kernels are shape-generic, so each test file compiles only a few libraries.
Checks: values (exact: NumPy's bits, math functions included), dtypes, shapes, ndarray vs NumPy scalar. Every check also asserts that each kernel
really ran (`kernel_calls`): with nothing lowered the backend returns ``gm.forward`` itself, and
comparing it with ``gm.forward`` could not fail.
"""

from __future__ import annotations

import operator
import shutil
import warnings

import numpy as np
import pytest

from support.c_graphs import build

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float32", "float64"]
ALL = ["bool"] + INTS + FLOATS




def assert_same(got, want, ulp=0, rtol=0.0):
    """Same type, dtype, shape; integer/bool values exact; floats within ``ulp`` / ``rtol``."""
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w, ulp, rtol)
        return
    assert type(got) is type(want), (type(got), type(want))
    if not isinstance(want, (np.ndarray, np.generic)):
        assert got == want
        return
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert np.shape(got) == np.shape(want)
    g, w = np.asarray(got), np.asarray(want)
    if w.dtype.kind != "f":
        np.testing.assert_array_equal(g, w)
        return
    assert np.array_equal(np.isnan(g), np.isnan(w)), "NaN positions differ"
    fin = ~np.isnan(w)
    gf, wf = g[fin], w[fin]
    exact = gf == wf
    if ulp == 0 and rtol == 0.0:
        assert exact.all(), f"max abs diff {np.max(np.abs(gf - wf), initial=0)}"
        return
    with np.errstate(all="ignore"):
        tol = np.maximum(ulp * np.spacing(np.abs(wf).astype(w.dtype)), rtol * np.abs(wf))
        bad = ~exact & ~(np.abs(gf.astype(np.float64) - wf) <= tol)
    assert not bad.any(), f"{bad.sum()} elements off, e.g. got {gf[bad][:3]} want {wf[bad][:3]}"


def sample(dtype, shape=(5, 7), seed=0, special=True):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
        if special and a.size >= 4:
            flat = a.reshape(-1)
            flat[:4] = [info.min, info.max, 0, 1]
        return a
    a = (rng.standard_normal(shape) * 3).astype(dt)
    if special and a.size >= 6:
        flat = a.reshape(-1)
        flat[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0]
    return a


def kernel_calls(f) -> list[int]:
    """Launches of each kernel of compiled function ``f``; fails unless ``f`` has kernels (the
    backend returns ``gm.forward`` itself when nothing lowers or the build fails, and comparing
    that with ``gm.forward`` proves nothing)."""
    runners = getattr(f, "runners", None)
    assert runners, "no C kernel was built for this graph"
    return [r.calls for r in runners.values()]


def check(fn, inputs, ulp=0, rtol=0.0, every_kernel=True, **options):
    """Compile ``fn``, run it and eager NumPy, compare; every kernel must have run (or, with
    ``every_kernel=False``, at least one: kernels over empty domains launch nothing)."""
    gm, f = build(fn, inputs, **options)
    before = kernel_calls(f)
    with np.errstate(all="ignore"):
        want = gm.forward(*inputs)
        got = f(*inputs)
    after = kernel_calls(f)
    ran = [a > b for a, b in zip(after, before)]
    assert all(ran) if every_kernel else any(ran), f"kernels did not run: {before} -> {after}"
    assert_same(got, want, ulp, rtol)
    return gm, f


# -- pointwise ops ---------------------------------------------------------------------------

BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, np.maximum, np.minimum,
          operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne,
          np.logical_and, np.logical_or, np.logical_xor, operator.and_, operator.or_,
          operator.xor, np.fmax, np.fmin, np.arctan2, np.hypot, np.copysign]


def _valid(op, *dtypes):
    try:
        with np.errstate(all="ignore"):
            op(*(np.ones(2, d) for d in dtypes))
        return True
    except TypeError:
        return False


@pytest.mark.parametrize("dtype", ALL)
def test_binary_ops_same_dtype(dtype):
    ops = [op for op in BINARY if _valid(op, dtype, dtype)]
    a, b = sample(dtype, seed=1), sample(dtype, seed=2)
    check(lambda x, y: tuple(op(x, y) for op in ops), [a, b])  # arctan2, hypot: NumPy's loops


@pytest.mark.parametrize("pair", [("int8", "int16"), ("uint8", "int8"), ("int32", "float32"),
                                  ("bool", "float64"), ("uint32", "int64"), ("float32", "float64"),
                                  ("int64", "float32")])
def test_binary_ops_mixed_dtypes(pair):
    a, b = sample(pair[0], seed=3), sample(pair[1], seed=4)
    ops = [operator.add, operator.mul, operator.truediv, np.maximum, operator.lt, operator.eq]
    ops = [op for op in ops if _valid(op, *pair)]
    check(lambda x, y: tuple(op(x, y) for op in ops), [a, b])


UNARY_EXACT = [operator.neg, np.absolute, np.sign, np.square, np.sqrt, np.floor, np.ceil,
               np.trunc, np.rint, np.isnan, np.isinf, np.isfinite, np.signbit, np.logical_not,
               operator.invert, np.positive, np.reciprocal]
UNARY_MATH = [np.exp, np.exp2, np.expm1, np.log, np.log2, np.log10, np.log1p, np.sin, np.cos,
              np.tan, np.arcsin, np.arccos, np.arctan, np.sinh, np.cosh, np.tanh, np.arcsinh,
              np.arccosh, np.arctanh, np.cbrt]


@pytest.mark.parametrize("dtype", ALL)
def test_unary_ops(dtype):
    a = sample(dtype, shape=(4, 33), seed=5)
    ops = [op for op in UNARY_EXACT if _valid(op, dtype)
           and not (op is np.reciprocal and dtype not in FLOATS)]
    check(lambda x: tuple(op(x) for op in ops), [a])


@pytest.mark.parametrize("dtype", FLOATS)
def test_transcendental_is_numpys_bits(dtype):
    # Kernels call NumPy's own loops for these (c_expressions.NUMPY_LOOP): NumPy's bits.
    a = sample(dtype, shape=(3, 50), seed=6)
    a[1] = np.linspace(-0.99, 0.99, 50)  # in range for arcsin/arctanh
    a[2] = np.linspace(1.0, 30.0, 50)  # arccosh / log
    check(lambda x: tuple(op(x) for op in UNARY_MATH), [a])


def test_integer_overflow_wraps_like_numpy():
    for dt in INTS:
        info = np.iinfo(dt)
        a = np.array([info.min, info.max, -1 if info.min else 1, 7], dtype=dt)
        b = np.array([info.max, info.max, info.min, 3], dtype=dt)
        check(lambda x, y: (x + y, x - y, x * y, -x, abs(x), x * x, np.square(y), x ** 3),
              [a, b])


@pytest.mark.parametrize("dtype", ["int16", "uint64", "float32", "float64"])
def test_power_strength_reduction(dtype):
    a = sample(dtype, seed=7, special=False) % 50
    gm, f = check(lambda x: (x ** 2, x ** 0, x ** 1), [a])
    src = str(gm.meta["fusion_report"])
    assert "pow(" not in src and "powf(" not in src
    if dtype.startswith("float"):  # NumPy's pow loop: left to NumPy (exact), plus a kernel
        gm, f = check(lambda x: (x ** 3, np.power(x, 4) * 2.0, x + 1.0), [a])
    else:
        gm, f = check(lambda x: (x ** 3, x ** 4, np.power(x, 5)), [a])
    src = str(gm.meta["fusion_report"])
    assert "pow(" not in src and "powf(" not in src


def test_float_power_general():
    a = np.abs(sample("float64", seed=8)) + 0.5
    check(lambda x: (x ** 2.5, np.power(x, -1.5), x * 3.0), [a])


@pytest.mark.parametrize("dtype", FLOATS)
def test_power_one_half_is_sqrt_like_numpy(dtype):
    a = np.array([-0.0, -np.inf, np.inf, 4.0, 2.0, -1.0, np.nan, 0.0], dtype=dtype)
    check(lambda x: (x ** 0.5, np.power(x, 0.5)), [a])


def test_nep50_weak_python_scalars():
    f32 = sample("float32", seed=9, special=False)
    i8 = sample("int8", seed=10)
    u8 = sample("uint8", seed=11)
    check(lambda x: (x * 2.0, x + 1, 3 - x, x / 7, x > 0.5), [f32])
    check(lambda x, y: (x + 1, x * 3, y + 200, y - 1, x > -1, x == 5), [i8, u8])
    check(lambda x: (x * 1.5, x + True), [i8])  # int * float -> float64


def test_numpy_scalar_inputs_and_0d_results():
    x = np.float32(2.5)
    y = np.array(3.0)
    gm, f = check(lambda a, b: (a * b, a + 1, np.exp(b), b * 2), [x, y])
    assert isinstance(f(x, y)[0], np.float64)
    # Integer +, -, * on NumPy scalars are NumPy's scalar math (it warns on overflow): those
    # stay NumPy calls; ufunc calls and bitwise ops on them still run as kernels.
    check(lambda a: (np.multiply(a, 2) + np.int16(1), (a & 6) ^ 1), [np.int16(7)],
          every_kernel=False)


def test_where_clip_astype():
    a = sample("float64", seed=12)
    b = sample("float32", seed=13)
    c = sample("int32", seed=14)
    check(lambda x, y, z: (np.where(x > 0, x, y), np.where(z > 0, z, 0), np.clip(x, -1.0, 2.0),
                           np.clip(z, -5, 10), np.clip(x, None, 0.5), y.astype(np.float64),
                           z.astype(np.float32), x.astype(np.float32), z.astype(np.int8),
                           z.astype(bool), x.astype(bool), (x > 0).astype(np.int64)), [a, b, c])


def test_signed_zeros_and_nan_in_minmax_and_clip():
    a = np.array([-0.0, 0.0, -0.0, 0.0, np.nan, 1.0, 0.5, -3.0] * 4)
    b = np.array([0.0, -0.0, -0.0, 0.0, 1.0, np.nan, np.nan, 0.0] * 4)
    gm, f = build(lambda x, y: (np.maximum(x, y), np.minimum(x, y), np.fmax(x, y), np.fmin(x, y),
                                np.clip(x, 0.0, 1.0), np.clip(x, y, 2.0), np.clip(x, -1.0, y),
                                np.sign(x)), [a, b])
    with np.errstate(all="ignore"):
        got, want = f(a, b), gm.forward(a, b)
    assert all(kernel_calls(f)) and len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w))


# -- layouts -----------------------------------------------------------------------------------

def _chain(x, y):
    return (x * 2.0 - y) * -x + y / 3.0


def test_broadcasting_shapes():
    a = sample("float64", shape=(4, 1, 6), seed=15)
    b = sample("float64", shape=(5, 1), seed=16)
    check(_chain, [a, b])
    check(_chain, [a, np.float64(0.5)])
    check(_chain, [np.array(2.0), a])


@pytest.mark.parametrize("view", ["T", "step", "negative", "broadcast_to", "fortran"])
def test_non_contiguous_inputs_use_runtime_strides(view):
    base = sample("float64", shape=(12, 10), seed=17)
    other = sample("float64", shape=(12, 10), seed=18)
    views = {
        "T": (base.T, other.T.copy()),
        "step": (base[::2, 1::3], other[::2, ::3][:, :3]),
        "negative": (base[::-1, ::-2], other[:, ::2]),
        "broadcast_to": (np.broadcast_to(base[:1], (12, 10)), other),
        "fortran": (np.asfortranarray(base), other),
    }
    x, y = views[view]
    x0 = x.copy()
    check(_chain, [x, y])
    np.testing.assert_array_equal(x, x0)  # inputs untouched


def test_empty_and_zero_d():
    gm, f = build(_chain, [np.zeros((0, 3)), np.ones(3)])
    assert not any(kernel_calls(f))  # an empty domain launches nothing
    assert_same(f(np.zeros((0, 3)), np.ones(3)), gm.forward(np.zeros((0, 3)), np.ones(3)))
    check(lambda x: (x + 1, np.sum(x), np.prod(x), np.any(x), np.all(x)), [np.zeros((3, 0))],
          every_kernel=False)
    check(_chain, [np.array(1.5), np.array(-2.0)])


# -- reductions --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
def test_reductions_all_axes(dtype):
    red = [np.sum, np.prod, np.max, np.min, np.argmax, np.argmin, np.any, np.all, np.mean]
    if dtype == "bool":
        red = [np.sum, np.any, np.all, np.max, np.argmax, np.mean]
    rtol = {"float32": 2e-6, "float64": 1e-13}.get(dtype, 0.0)
    # axis=0 over a narrow array: NumPy adds row after row there, which the row kernel does
    # only for kept runs of <= kernel.SEQUENTIAL_MAX elements (wider ones stay NumPy calls).
    for axis, keep, shape in [(None, False, (6, 300)), (1, False, (6, 300)), (0, True, (300, 4)),
                              ((0, 1), True, (6, 300)), (-1, True, (6, 300))]:
        a = sample(dtype, shape=shape, seed=19, special=False)
        if True:
            ops = [r for r in red if not (r in (np.argmax, np.argmin) and isinstance(axis, tuple))]
            kw = [dict(axis=axis, keepdims=keep) if r not in (np.argmax, np.argmin) or axis
                  is not None or keep else dict(axis=axis) for r in ops]
            check(lambda x: tuple(r(x, **k) for r, k in zip(ops, kw)), [a], rtol=rtol)


def test_float_sum_matches_numpy_pairwise_bitwise():
    x = np.random.default_rng(20).standard_normal(100_003)
    check(lambda a: (np.sum(a), a.sum(), np.mean(a)), [x])
    xf = x.astype(np.float32)
    check(lambda a: (np.sum(a), a.mean()), [xf])


def test_reduction_prologue_and_strided():
    x = np.random.default_rng(21).standard_normal((64, 130))
    y = np.random.default_rng(22).standard_normal((130,))
    check(lambda a, b: (np.sum(np.sqrt(a * a + b * b), axis=1), np.max(np.abs(a - b), axis=1),
                        (a > b).any(axis=1)), [x, y], rtol=1e-13)
    # Sums NumPy accumulates row after row (inner loop along a kept dim): narrow ones only.
    check(lambda a, b: (a * b).sum(axis=0), [x[:, :4].copy(), y[:4].copy()], rtol=1e-13)
    check(lambda a: (a.sum(axis=1), a.max(axis=0), np.argmax(a, axis=0)), [x[:, :4].T],
          rtol=1e-13)
    check(lambda a: (a.sum(axis=1), a.argmin()), [x[::-3, ::2]], rtol=1e-13)


def test_reductions_nan_inf():
    x = sample("float64", shape=(4, 9), seed=23)  # NaN, +-inf in row 0
    check(lambda a: (np.max(a, axis=1), np.min(a, axis=1), np.argmax(a, axis=1),
                     np.argmin(a), np.sum(a, axis=1), np.any(a, axis=1)), [x])


def test_integer_sum_wraps_and_promotes():
    a = np.full(1000, 2**62, dtype=np.int64)
    check(lambda x: (np.sum(x), np.prod(x[:3])), [a])
    check(lambda x: (x.sum(), x.sum(axis=0), np.mean(x)), [sample("int8", seed=24)])
    check(lambda x: (x.sum(), np.prod(x, axis=1)), [sample("uint16", seed=25)])


def test_softmax_and_layernorm_patterns():
    x = np.random.default_rng(26).standard_normal((32, 200))

    def softmax(a):
        m = np.max(a, axis=-1, keepdims=True)
        e = np.exp(a - m)
        return e / np.sum(e, axis=-1, keepdims=True)

    def layernorm(a):
        mu = a.mean(axis=-1, keepdims=True)
        d = a - mu
        var = (d * d).mean(axis=-1, keepdims=True)
        return d / np.sqrt(var + 1e-5)

    check(softmax, [x], rtol=1e-14)
    check(layernorm, [x], rtol=1e-13)


# -- floating-point errors -------------------------------------------------------------------

def test_fp_warnings_follow_errstate():
    x = np.array([1.0, 0.0, -1.0, 2.0] * 10)
    gm, f = build(lambda a: (np.log(a), a / 0.0), [x])
    recorded = []
    for fn in (f, gm.forward):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            with np.errstate(all="warn", under="ignore"):
                fn(x)
        recorded.append([(w.category, str(w.message)) for w in rec])
    assert all(kernel_calls(f))
    # The kernel flagged: its NumPy path ran, so the messages are NumPy's, naming each ufunc.
    assert recorded[0] == recorded[1]
    assert ("divide by zero encountered in log") in [m for _, m in recorded[0]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="ignore"):
            assert_same(f(x), gm.forward(x))
    with np.errstate(divide="raise", invalid="ignore"), pytest.raises(FloatingPointError):
        f(x)


def test_no_spurious_invalid_from_nan_comparisons():
    x = np.array([np.nan, 1.0, 2.0, np.nan] * 8)
    gm, f = build(lambda a: (a < 1.0, a >= a, np.maximum(a, 0.5), np.argmax(a), np.max(a)), [x])
    # under='ignore': with underflow reported, kernels do not run at all (see fp_warn_mask).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="warn", under="ignore"):
            assert_same(f(x), gm.forward(x))
    assert all(kernel_calls(f))


def test_parallel_threads_same_result():
    x = np.random.default_rng(27).standard_normal((300, 1000))
    check(lambda a: (a * 2 + 1, np.sum(a * a, axis=1), np.exp(a).sum()), [x], rtol=1e-13,
          threads=2, parallel_threshold=1000, block=4096)
