"""NumPy ufuncs on scalars inside loop kernels (scalars.ufunc_call): ``np.tanh(a[i, i])`` calls
NumPy's own float64 loop of the ufunc on one element, as NumPy does for a scalar, so the bits
are NumPy's whatever SIMD code it picked for this CPU, and its IEEE flags make the kernel hand
the iteration to NumPy, which warns. Plain NumPy is the oracle, bit for bit, over a wide range
of arguments (support.loops.check compares floats by their bytes)."""

from __future__ import annotations

import numpy as np
import pytest

from support.loops import check, fresh_kernels  # noqa: F401 (a fixture)


def go_fast(a):
    """The Numba documentation's first example (benchmarks/suite/particles.py)."""
    trace = 0.0
    for i in range(a.shape[0]):
        trace += np.tanh(a[i, i])
    return a + trace


def apply(name):
    """``out[i] = np.<name>(a[i])`` for each i (a module-level function of its own: the ufunc
    is named through the global ``np``, as users write it)."""
    namespace = {"np": np}
    exec(f"def each_{name}(a, out):\n"
         f"    for i in range(a.shape[0]):\n"
         f"        out[i] = np.{name}(a[i])\n"
         f"    return out\n", namespace)
    return namespace[f"each_{name}"]


def after_overflow(name):
    """An overflow (NumPy warns) and then, in the same iteration, ``np.<name>``: some of
    NumPy's loops clear the IEEE flags, which must not hide the earlier overflow."""
    namespace = {"np": np}
    exec(f"def overflow_then_{name}(a, out):\n"
         f"    for i in range(a.shape[0]):\n"
         f"        out[i] = a[i] * 1e300\n"
         f"        out[i] += np.{name}(a[i] * 0.0 + 0.5)\n"
         f"    return out\n", namespace)
    return namespace[f"overflow_then_{name}"]


def mixed(a):
    s = 0.0
    for v in a:
        s += np.exp(-v * v) * np.cos(v) + np.arctan(float(v))
    return s


def of_ints(n):
    s = 0.0
    for i in range(n):
        s += np.sqrt(i) + np.tanh(i)  # (an int argument: not lowered; the loop stays exact)
    return s


RNG = np.random.default_rng(13)
WIDE = np.concatenate([RNG.standard_normal(3000) * 3, RNG.standard_normal(2000) * 300,
                       10.0 ** RNG.uniform(-300, 300, 1000), [0.0, -0.0, 5e-324, 1e308]])
SPECIAL = np.array([np.inf, -np.inf, np.nan, -1.0, 0.0, 1000.0, -1000.0, 1e-320])


@pytest.mark.parametrize("name", ["tanh", "exp", "log", "sin", "cos", "tan", "arctan", "sinh",
                                  "cosh", "expm1", "log1p", "cbrt", "log2", "log10", "exp2",
                                  "arcsinh", "absolute", "negative", "rint"])
def test_numpy_bits_and_warnings_for_each_ufunc(name):
    each = apply(name)
    check(each, np.abs(WIDE) if name.startswith("log") else WIDE, np.empty(WIDE.shape))
    check(each, SPECIAL, np.empty(SPECIAL.shape))  # (warnings: NumPy's own, in order)


@pytest.mark.parametrize("name", ["tanh", "exp", "log", "sin", "arctan", "cbrt", "expm1"])
def test_a_ufunc_call_keeps_the_flags_of_earlier_operations(name):
    a = np.ones(300)
    a[170] = 1e10  # (np.float64 * 1e300 overflows there: a RuntimeWarning from NumPy)
    check(after_overflow(name), a, np.empty(300))


def test_go_fast_is_a_kernel_with_numpy_bits():
    check(go_fast, RNG.random((100, 100)))
    check(go_fast, RNG.standard_normal((40, 40)) * 50)


def test_several_ufuncs_and_arguments_of_other_types():
    check(mixed, RNG.standard_normal(500))
    check(of_ints, 50, kernel=False)
