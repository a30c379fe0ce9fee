"""The C backend's kernels give NumPy's bits for every math function they lower.

Every ufunc the C lowering knows (`c_expressions.OPS`, so a newly lowered function is tested
automatically) that has a float32/float64 loop runs as a kernel - forced: ``min_size=0``,
no calibration, so NumPy's path is never chosen instead - over a dense sweep (strided over
all bit patterns, so every exponent, subnormals, +-0, +-inf and NaNs; plus ordinary ranges and
huge/tiny values), and must equal NumPy's result byte for byte, NaN payloads included.
Transcendentals (exp, sin, ...) are NumPy's own inner loops called on blocks
(`c_expressions.NUMPY_LOOP`); the rest are IEEE operations. Chains of math, constants as
operands, strided inputs, rolled reads and a row kernel's epilogue take the staged code paths.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from dynamo.backends.c.c_expressions import NUMPY_LOOP, OPS
from dynamo.backends.c.lowering import lower
from support.c_graphs import build, same_bits

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

FLOATS = ["float32", "float64"]
_UINT = {"float32": np.uint32, "float64": np.uint64}


def lowered_ufuncs(nin: int, dtype: str) -> list[str]:
    """Names of the ufuncs with a C lowering that have a ``dtype`` loop with ``nin`` inputs."""
    sig = np.dtype(dtype).char * nin + "->"
    return sorted(name for name in OPS
                  if isinstance(getattr(np, name, None), np.ufunc)
                  and getattr(np, name).nin == nin and getattr(np, name).nout == 1
                  and any(t.startswith(sig) for t in getattr(np, name).types))


def sweep(dtype: str, n: int = 120_000, seed: int = 0) -> np.ndarray:
    """A dense sweep of ``dtype`` values (see the module docstring), shuffled."""
    dt, ut = np.dtype(dtype), _UINT[dtype]
    fi = np.finfo(dt)
    rng = np.random.default_rng(seed)
    bits = np.arange(n // 3, dtype=ut) * ut(np.iinfo(ut).max // (n // 3))
    random_bits = rng.integers(0, np.iinfo(ut).max, n // 6, dtype=ut, endpoint=True)
    with np.errstate(all="ignore"):  # (1e300 and 710.0 overflow float32: inf, as intended)
        special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 0.5, -0.5, 2.0,
                            fi.tiny, -fi.tiny, fi.smallest_subnormal, -fi.smallest_subnormal,
                            fi.max, -fi.max, fi.eps, 88.72, 89.0, -103.9, 709.78, 710.0, -745.2,
                            np.pi / 2, np.pi, 1e-300, 1e300, 1 - fi.epsneg, 1 + fi.eps],
                           dtype=dt)
        parts = [bits.view(dt), random_bits.view(dt), special,
                 rng.uniform(-10, 10, n // 6).astype(dt), rng.uniform(-1, 1, n // 12).astype(dt),
                 (rng.uniform(-1, 1, n // 12) * 10.0 ** rng.uniform(-40, 40, n // 12)).astype(dt),
                 rng.uniform(-800, 800, n // 12).astype(dt),
                 (np.arange(1, n // 12) * 1e-3).astype(dt)]
    x = np.concatenate(parts)
    rng.shuffle(x)
    return x


def run_forced(fn, inputs):
    """(compiled result, NumPy's result); every kernel must run and every call node lower."""
    gm, f = build(fn, inputs)
    for node in gm.graph.nodes:
        if node.op == "call_function":
            plan, why = lower(node)
            assert plan is not None, f"{node.target.__name__} is not lowered: {why}"
    runners = list(f.runners.values())
    assert runners, "no kernel was built"
    with np.errstate(all="ignore"):
        want, got = gm.forward(*inputs), f(*inputs)
    assert all(r.calls >= 1 and r.use_kernel is True for r in runners)
    return got, want


#: Commutative ops whose NaN payload, when both operands are NaNs, is not defined by the
#: operation: NumPy's own loop returns the first operand's for two arrays but the other one's
#: when the second is a scalar (stride 0), and gcc may swap the operands of ``a + b``. There
#: (only there) the result must be a NaN, any NaN: docs/c_backend.md says so.
TWO_NAN_PAYLOAD_FREE = {"add", "multiply"}


def assert_same_bits(names, got, want, inputs, nan_payloads=True):
    """Byte equality per output; for `TWO_NAN_PAYLOAD_FREE` ops (or everywhere, for chains
    that may add two NaNs: ``nan_payloads=False``) a NaN in both results is equal."""
    bad = []
    for name, g, w in zip(names, got, want):
        if name in TWO_NAN_PAYLOAD_FREE and len(inputs) == 2:
            both = np.isnan(inputs[0]) & np.isnan(inputs[1])
            assert np.isnan(g[both]).all() and np.isnan(w[both]).all()
            g, w = g[~both], w[~both]
        elif not nan_payloads:
            both = np.isnan(g) & np.isnan(w)
            g, w = g[~both], w[~both]
        if not same_bits(g, w):
            g, w = np.asarray(g).ravel(), np.asarray(w).ravel()
            diff = g.view(np.uint8).reshape(g.size, -1) != w.view(np.uint8).reshape(w.size, -1)
            where = np.flatnonzero(diff.any(axis=1))
            bad.append(f"{name}: {where.size} of {g.size} differ, e.g. {g[where[0]]!r} != "
                       f"{w[where[0]]!r} (at {where[0]})")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_math_is_numpys_bits(dtype):
    names = lowered_ufuncs(1, dtype)
    assert {"exp", "log", "sin", "cos", "tanh", "arctan", "cbrt", "log1p"} <= set(names)
    x = sweep(dtype)
    got, want = run_forced(lambda a: tuple(getattr(np, n)(a) for n in names), [x])
    assert_same_bits(names, got, want, [x])


@pytest.mark.parametrize("dtype", FLOATS)
def test_binary_math_is_numpys_bits(dtype):
    names = lowered_ufuncs(2, dtype)
    assert {"arctan2", "hypot", "add", "divide"} <= set(names)
    x = sweep(dtype, seed=1)
    y = sweep(dtype, seed=2)[:x.size]
    # every special value against every other (the sweep pairs them only by chance)
    sp = x[~np.isfinite(x) | (x == 0)][:20]
    sp = np.concatenate([sp, np.array([1.0, -1.0, 2.5, 1e-30], dtype=dtype)])
    gx, gy = np.meshgrid(sp, np.concatenate([sp, y[:50]]))
    x, y = np.concatenate([x, gx.ravel()]), np.concatenate([y, gy.ravel()])
    got, want = run_forced(lambda a, b: tuple(getattr(np, n)(a, b) for n in names), [x, y])
    assert_same_bits(names, got, want, [x, y])


@pytest.mark.parametrize("dtype", FLOATS)
def test_chains_constants_and_strided_inputs_are_numpys_bits(dtype):
    # math of math (stages), a constant operand, a value used before and after a NumPy loop,
    # a forced (flag-only) value in a where branch, outputs of several stages
    def fn(a, b):
        s = np.sin(a) * b
        e = np.exp(np.tanh(s) * 2.0 + np.log1p(np.abs(b)))
        return (e + s, np.arctan2(a, 2.0), np.hypot(3.0, b),
                np.where(a > 0, np.cbrt(a), b), s * 1.5)

    rng = np.random.default_rng(5)
    x = (rng.standard_normal((300, 1038)) * 4).astype(dtype)
    y = (rng.standard_normal((300, 1038)) * 4).astype(dtype)
    x.ravel()[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40]
    for layout, a, b in [("C", x, y), ("strided", x[:, ::2], y[:, 1::2]), ("F", x.T, y.T),
                         ("offset rows", x[1:], y[:-1])]:
        got, want = run_forced(fn, [a, b])
        assert_same_bits([f"{layout} out{i}" for i in range(5)], got, want, [a, b],
                         nan_payloads=False)


@pytest.mark.parametrize("dtype", FLOATS)
def test_row_kernels_and_rolls_with_math_are_numpys_bits(dtype):
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((64, 3001)) * 30).astype(dtype)

    def softmax(a):
        e = np.exp(a - a.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True), np.log(e.sum(axis=1))

    def layer(a):  # an epilogue with math over a row's reduction results
        m = a.mean(axis=1, keepdims=True)
        return np.tanh((a - m) * 0.5) + np.sin(m)

    def stencil(a):
        return np.exp(np.roll(a, 1, axis=1) * 0.01) - np.cos(np.roll(a, -3, axis=0))

    def reductions(a):  # reductions of math: rows filled block by block, then reduced
        return (np.exp(a * 0.01).max(axis=1), np.sum(np.sin(a)), np.argmax(np.cos(a), axis=1),
                np.mean(np.log1p(np.abs(a)), axis=1), np.prod(np.tanh(a * 1e-4) + 1.0, axis=1))

    for fn in (softmax, layer, stencil, reductions):
        got, want = run_forced(fn, [x])
        got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
        assert_same_bits([fn.__name__] * len(want), got, want, [x], nan_payloads=False)


def test_transcendentals_call_numpys_loops():
    # The kernels' C calls NumPy's loop for these (readable, printed by dynamo.explain).
    from dynamo.backends.c.codegen_c import kernel_source

    assert {"exp", "log", "sin", "cos", "tan", "tanh", "arctan", "arcsin", "cbrt", "log1p",
            "expm1", "exp2", "log2", "log10", "arctan2", "hypot", "sinh", "cosh"} <= NUMPY_LOOP
    x = np.linspace(-3, 3, 1000)
    gm, f = build(lambda a: np.exp(np.sin(a)) + 1.0, [x])
    (runner,) = f.runners.values()
    src = kernel_source(runner.kernel)
    assert "DYN_NUMPY1(sin_f8" in src and "DYN_NUMPY1(exp_f8" in src and "exp(" not in src


@pytest.mark.parametrize("dtype", FLOATS)
def test_negative_strides_into_numpy_loops_take_numpys_path(dtype):
    # NumPy runs exp on a reversed input itself, through another code path of its loop (other
    # bits for a few percent of the values); the kernel would call it on contiguous blocks. So
    # that layout runs NumPy's path; a contiguous copy, and a temporary in between, run C.
    x = sweep(dtype)
    gm, f = build(lambda a: (np.arcsin(a), np.cbrt(a) * 2.0, np.exp(a * 0.5)), [x])
    (runner,) = f.runners.values()
    for a, runs in [(x[::-1], False), (x[::-1].copy(), True)]:
        before = runner.calls
        with np.errstate(all="ignore"):
            want, got = gm.forward(a), f(a)
        assert (runner.calls > before) is runs
        assert_same_bits(["arcsin", "cbrt", "exp"], got, want, [a])
