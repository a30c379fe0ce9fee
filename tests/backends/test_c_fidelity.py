"""The C backend never changes the program: warnings, layouts and bits equal eager NumPy's.

Issue 8 ("never crash, never change the program"), C-backend items:

* Floating-point warnings: for every ufunc the backend lowers, on inf, -inf, nan, 0, -0, huge,
  tiny (and ordinary) values, the compiled graph warns exactly like NumPy (category and message,
  in order) under the default errstate and ``errstate(all="warn")``, raises the same exception
  under ``errstate(all="raise")``, and returns NumPy's values. A kernel that raised a flag whose
  mode is 'warn' gives way to its NumPy path (`kernel.fp_warn_mask`), so the messages name the
  ufunc and libm's spurious flags (``hypot(inf, nan)``) never surface.
* NEP 50 casts: ``float32_array + 1e308`` warns "overflow encountered in cast" like NumPy.
* Layout per output: outputs of one kernel each get NumPy's layout (order 'K' over their own
  inputs), even when they read inputs of different layouts.
* Determinism: calibration on the first call does not change what that call returns; every call
  returns the same bits.

The oracle is the graph's eager ``gm.forward``; every test checks that the kernel really ran.
"""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest

from dynamo.backends.c import calibration
from dynamo.backends.c.c_expressions import OPS
from support.c_graphs import build, same_bits

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

FLOATS = ["float32", "float64"]
#: Every ufunc with a C lowering (power is covered with constant exponents below).
LOWERED = sorted(n for n in OPS if isinstance(getattr(np, n, None), np.ufunc) and n != "power")
UNARY = [n for n in LOWERED if getattr(np, n).nin == 1]
BINARY = [n for n in LOWERED if getattr(np, n).nin == 2]
EXACT = {"add", "subtract", "multiply", "divide", "negative", "positive", "absolute", "sign",
         "square", "reciprocal", "maximum", "minimum", "fmax", "fmin", "sqrt", "floor", "ceil",
         "trunc", "rint", "copysign", "fmod"}


def specials(dtype: str) -> np.ndarray:
    fi = np.finfo(dtype)
    return np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, fi.max, -fi.max, fi.smallest_subnormal,
                     fi.tiny, 1.0, -1.0, 0.5, -2.5, 3.0, 1e4, -0.75], dtype=dtype)


def unary_input(dtype: str) -> np.ndarray:
    return np.tile(specials(dtype), 3)


def binary_inputs(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.meshgrid(specials(dtype), specials(dtype))
    return x.copy(), y.copy()


def run_recording(fn, args, **errstate):
    """(result, [(category, message)...], exception or None) of ``fn(*args)``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with np.errstate(**errstate):
                result = fn(*args)
        except FloatingPointError as exc:
            result, error = None, (type(exc), str(exc))
        else:
            error = None
    return result, [(w.category, str(w.message)) for w in caught], error


def assert_values(got, want, exact: bool) -> None:
    if isinstance(want, tuple):
        assert type(got) is tuple and len(got) == len(want)
        for g, w in zip(got, want):
            assert_values(g, w, exact)
        return
    assert type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want)), "NaN positions differ"
    if want.dtype.kind != "f" or exact:
        ok = np.isnan(want) | (got == want)
        assert ok.all(), f"got {got[~ok][:4]} want {want[~ok][:4]}"
        if want.dtype.kind == "f":
            assert np.array_equal(np.signbit(got[~np.isnan(want)]),
                                  np.signbit(want[~np.isnan(want)]))
        return
    fin = np.isfinite(want)
    assert np.array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)])
    with np.errstate(all="ignore"):
        tol = 4 * np.spacing(np.abs(want[fin]))
        assert (np.abs(got[fin].astype(np.float64) - want[fin]) <= tol).all()


MODES = [dict(), dict(all="warn"), dict(all="raise"), dict(all="ignore")]


def strided(a: np.ndarray) -> np.ndarray:
    """The same values as a non-contiguous view (the kernel's strided, non-simd loop)."""
    return np.repeat(a, 2, axis=-1)[..., ::2]


def check_fidelity(fn, args, exact: bool) -> None:
    gm, f = build(fn, args)
    runners = list(f.runners.values())
    assert runners, "the graph was not lowered to a kernel"
    for errstate, args in [(m, args) for m in MODES] + [(dict(), [strided(a) for a in args])]:
        calls = sum(r.calls for r in runners)
        want = run_recording(gm.forward, args, **errstate)
        got = run_recording(f, args, **errstate)
        assert got[1] == want[1], f"warnings under errstate({errstate})"
        assert got[2] == want[2], f"exception under errstate({errstate})"
        if want[0] is not None:
            assert_values(got[0], want[0], exact)
        if errstate.get("all") in (None, "ignore"):  # 'under' reported: NumPy only
            assert sum(r.calls for r in runners) == calls + len(runners), "no kernel ran"


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", UNARY)
def test_unary_ufunc_warnings_and_values_match_numpy(name, dtype):
    uf = getattr(np, name)
    if name in ("invert", "logical_not") or not _accepts(uf, dtype):
        pytest.skip(f"{name} has no {dtype} loop")
    check_fidelity(lambda x: uf(x), [unary_input(dtype)], name in EXACT)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", BINARY)
def test_binary_ufunc_warnings_and_values_match_numpy(name, dtype):
    uf = getattr(np, name)
    if not _accepts(uf, dtype):
        pytest.skip(f"{name} has no {dtype} loop")
    check_fidelity(lambda x, y: uf(x, y), list(binary_inputs(dtype)), name in EXACT)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("exponent", [0.5, 2, -1])
def test_power_with_constant_exponent_matches_numpy(exponent, dtype):
    check_fidelity(lambda x: x ** exponent, [unary_input(dtype)], True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_fused_chain_warnings_name_each_ufunc_in_order(dtype):
    # log(0) divides by zero, -inf * 0 is invalid: NumPy names both ufuncs, in that order.
    x = unary_input(dtype)
    check_fidelity(lambda a: (np.log(a) * 0.0 + np.arcsin(a), np.sqrt(a) - 1.0), [x], False)


@pytest.mark.parametrize("dtype", FLOATS)
def test_reduction_overflow_warns_like_numpy(dtype):
    x = np.full((4, 64), np.finfo(dtype).max / 8, dtype=dtype)
    check_fidelity(lambda a: (np.sum(a, axis=1), np.exp(a).max(axis=1)), [x], True)


def test_weak_python_float_overflowing_float32_warns_on_cast():
    x = np.ones(64, np.float32)
    gm, f = build(lambda a: (a + 1e308, a * 2.0), [x])
    for errstate in MODES:
        want = run_recording(gm.forward, [x], **errstate)
        got = run_recording(f, [x], **errstate)
        assert got[1] == want[1] and got[2] == want[2]
    assert run_recording(f, [x])[1] == [(RuntimeWarning, "overflow encountered in cast")]
    assert sum(r.calls for r in f.runners.values()) > 0  # a * 2.0 still runs as C


def _accepts(uf, dtype) -> bool:
    try:
        with np.errstate(all="ignore"):
            uf(*([np.ones(2, dtype)] * uf.nin))
        return True
    except TypeError:
        return False


# -- layout per output -------------------------------------------------------------------------

def _layout_same(got, want) -> None:
    assert got.strides == want.strides, (got.strides, want.strides)
    assert got.flags.c_contiguous == want.flags.c_contiguous
    assert got.flags.f_contiguous == want.flags.f_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-15)


@pytest.mark.parametrize("case", ["c_and_f", "f_and_c", "t_and_c_3d", "mixed_pair"])
def test_each_output_gets_numpys_layout(case):
    rng = np.random.default_rng(3)
    c = rng.standard_normal((40, 30))
    fo = np.asfortranarray(rng.standard_normal((40, 30)))
    t3 = rng.standard_normal((5, 6, 7)).transpose(2, 0, 1)
    c3 = rng.standard_normal((7, 5, 6))
    fns = {
        "c_and_f": (lambda a, b: (a * 2.0, b * 3.0), [c, fo]),
        "f_and_c": (lambda a, b: (a * 2.0, b * 3.0, a + 1.0), [fo, c]),
        "t_and_c_3d": (lambda a, b: (np.exp(a), b - 1.0, a + b), [t3, c3]),
        "mixed_pair": (lambda a, b: (a + b, b * b, a - 1.0), [fo, c]),
    }
    fn, args = fns[case]
    gm, f = build(fn, args)
    got, want = f(*args), gm.forward(*args)
    assert len(got) == len(want)
    assert sum(r.calls for r in f.runners.values()) == 1
    for g, w in zip(got, want):
        _layout_same(g, w)


def test_epilogue_output_layout_follows_its_own_inputs():
    # The kernel's operands disagree (C wins overall) but the epilogue output reads only the
    # Fortran-ordered input: NumPy returns it Fortran-ordered.
    rng = np.random.default_rng(4)
    a = np.asfortranarray(rng.standard_normal((30, 20)))
    b = rng.standard_normal((30, 20))
    gm, f = build(lambda x, y: x * 2.0 - np.sum(x * y, axis=1, keepdims=True), [a, b])
    (runner,) = f.runners.values()
    assert runner.kernel.kind == "reduction" and runner.kernel.outputs  # an epilogue
    got, want = [f(a, b)], [gm.forward(a, b)]
    for g, w in zip(got, want):
        assert g.strides == w.strides
        np.testing.assert_allclose(g, w, rtol=1e-14)


# -- determinism -------------------------------------------------------------------------------

#: A graph that is one kernel over its argument (the whole-graph C call, `small._WholeGraph`),
#: and one of two kernels (a pointwise chain and a reduction: the generated program, one
#: `_kernel_step` per kernel).
DETERMINISM_GRAPHS = {
    "one_kernel": lambda a: np.sin(a) * np.exp(a * 0.01) + np.tanh(a),
    "two_kernels": lambda a: (np.sin(a) * np.exp(a * 0.01) + np.tanh(a),
                              np.sum(np.sin(a), axis=0)),
}


#: Kernels give NumPy's bits unless asked not to: with ``fastmath`` gcc contracts ``a * b + c``
#: into an FMA (one rounding), so the pointwise kernel's output differs from NumPy's.
DIFFERENT_BITS = {"fastmath": True}


def _differs_from_numpy(graph="one_kernel"):
    """A graph whose kernels' result differs from NumPy's in at least one bit on ``x`` (with
    `DIFFERENT_BITS`: the pointwise kernel's output; the sum may agree), and what the kernels
    return (``calibrate=False``: the kernels always run)."""
    x = np.random.default_rng(5).uniform(-20, 20, 50_000)
    fn = DETERMINISM_GRAPHS[graph]
    gm, f = build(fn, [x], calibrate=False, **DIFFERENT_BITS)
    with np.errstate(all="ignore"):
        by_kernels, by_numpy = f(x), gm.forward(x)
    assert not same_bits(by_kernels, by_numpy), "kernel and NumPy agree bit for bit"
    return fn, x, by_kernels


@pytest.mark.parametrize("graph", sorted(DETERMINISM_GRAPHS))
@pytest.mark.parametrize("verdict", [False, True])
def test_every_call_returns_the_same_bits(monkeypatch, verdict, graph):
    # Calibration on the first call must not change what that call returns: calls 1..4 return
    # the same bits, those of the path the verdict chose (NumPy's, or the kernels').
    fn, x, by_kernels = _differs_from_numpy(graph)
    monkeypatch.setattr(calibration, "calibrate", lambda *args, **kw: verdict)
    gm, f = build(fn, [x], calibrate=True, **DIFFERENT_BITS)
    runners = list(f.runners.values())
    assert len(runners) == (1 if graph == "one_kernel" else 2)
    assert hasattr(f, "program_code") is (graph == "two_kernels")  # the per-kernel steps
    results = [f(x) for _ in range(4)]
    for runner in runners:
        assert runner.use_kernel is verdict and runner.calls >= 1
    for r in results[1:]:
        assert same_bits(r, results[0])
    expected = by_kernels if verdict else gm.forward(x)
    assert same_bits(results[0], expected)


def test_real_calibration_is_deterministic():
    fn, x, _ = _differs_from_numpy()
    gm, f = build(fn, [x], calibrate=True, **DIFFERENT_BITS)
    results = [f(x) for _ in range(3)]
    (runner,) = f.runners.values()
    assert runner.use_kernel in (True, False) and runner.calibration is not None
    assert all(r.tobytes() == results[0].tobytes() for r in results)


@pytest.mark.parametrize("dtype", FLOATS)
def test_where_clip_and_casts_match_numpy(dtype):
    # float64 -> float32 of a huge value: NumPy warns "overflow encountered in cast".
    x = unary_input(dtype)
    check_fidelity(lambda a: (a.astype(np.float32), a.astype(np.float64), np.clip(a, -1.0, 2.0),
                              np.where(a > 0, a, -a), (a > 1).astype(np.float64)), [x], True)
