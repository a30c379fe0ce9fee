"""NumPy ufuncs on scalars inside loop kernels (scalars.ufunc_call): ``np.tanh(a[i, i])`` calls
NumPy's own float64 loop of the ufunc on one element, as NumPy does for a scalar, so the bits
are NumPy's whatever SIMD code it picked for this CPU, and its IEEE flags make the kernel hand
the iteration to NumPy, which warns. Plain NumPy is the oracle, bit for bit, over a wide range
of arguments (support.loops.check compares floats by their bytes)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from support.loops import check, fresh_kernels  # noqa: F401 (a fixture)


def go_fast(a):
    """The Numba documentation's first example (benchmarks/suite/particles.py)."""
    trace = 0.0
    for i in range(a.shape[0]):
        trace += np.tanh(a[i, i])
    return a + trace


def apply(name, nargs=1):
    """``out[i] = np.<name>(a[i])`` (or ``np.<name>(a[i], b[i])`` with `nargs` 2) for each i
    (a module-level function of its own: the ufunc is named through the global ``np``, as
    users write it)."""
    namespace = {"np": np}
    arrays = ", ".join("ab"[:nargs])
    exec(f"def each_{name}({arrays}, out):\n"
         f"    for i in range(a.shape[0]):\n"
         f"        out[i] = np.{name}({', '.join(f'{x}[i]' for x in 'ab'[:nargs])})\n"
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


def two_calls(a, k):
    s = 0.0
    for i in range(a.shape[0]):
        s += np.tanh(a[i]) * np.exp(-a[i - k] * 0.5)  # (i - k: a row the test proves or not)
    return s


def logs_until_big(a):
    s = 0.0
    for i in range(a.shape[0]):
        if a[i] > 5.0:
            break
        s += np.log(a[i])  # (the batch computes log of the elements after the break too)
    return s


def logs_of_positives(a):
    s = 0.0
    for i in range(a.shape[0]):
        if a[i] > 0.0:
            s += np.log(a[i])  # (the batch computes log of every element, negatives too)
    return s


def _batched(fn) -> bool:
    from dynamo import loop_kernels
    return any("batch 1 ufunc" in k.nest.text() or "batch 2 ufunc" in k.nest.text()
               for k in loop_kernels.kernels_for(fn.__code__))


def test_ufunc_calls_of_a_fast_copy_are_computed_a_chunk_at_a_time():
    check(two_calls, WIDE[:4000] / 100.0, 0)
    assert _batched(two_calls)
    check(two_calls, WIDE[:4000] / 100.0, 1)  # (a[-1] for i == 0: the checked loop, wrapping)


@pytest.mark.parametrize("fn", [logs_until_big, logs_of_positives])
def test_a_batch_computes_calls_the_loop_does_not_make_without_a_trace(fn):
    # NumPy warns for log of a negative: plain Python never computes it here, and neither
    # warning nor result may change (a batch's spurious flags send the chunk back to Python)
    a = RNG.random(3000) * 4.0 + 0.5
    a[2000:2100] = -1.0
    a[2500] = 7.0
    check(fn, a)
    assert _batched(fn)


def test_kernels_that_differ_only_in_their_ufunc_keep_their_own():
    """Two functions with the same name, line and shape, one calling np.tanh and one np.exp:
    each kernel's table entry is its own (they once shared a library and its table)."""
    source = ("def twin(a):\n    s = 0.0\n    for i in range(a.shape[0]):\n"
              "        s += np.{}(a[i])\n    return s\n")
    twins = {}
    for name in ("tanh", "exp"):
        namespace = {"np": np}
        exec(source.format(name), namespace)
        twins[name] = namespace["twin"]
    a = RNG.random(50)
    for name in ("tanh", "exp", "tanh"):
        check(twins[name], a)


# Ufuncs of two arguments -------------------------------------------------------------------

def with_python_numbers(a, n):
    s = 0.0
    for i in range(n):
        s += np.maximum(a[i], 0.5) + np.minimum(i, a[i]) + np.arctan2(1, i) + np.hypot(i, 2.5)
    return s


def of_two_ints(n):
    t = 0
    for i in range(n):
        t += np.maximum(i, 3)  # (two ints: NumPy's int64 loop, not float64's)
    return t


def of_bools(a, n):
    t = 0.0
    for i in range(n):
        t += np.maximum(a[i] > 0.0, 0.5)  # (a NumPy bool argument: not lowered)
    return t


@pytest.mark.parametrize("name", ["maximum", "minimum", "fmax", "fmin", "arctan2", "hypot",
                                  "power", "copysign", "fmod", "logaddexp", "nextafter",
                                  "floor_divide", "remainder"])
def test_numpy_bits_and_warnings_of_two_argument_ufuncs(name):
    a = np.concatenate([WIDE[:2000], SPECIAL, SPECIAL[::-1]])
    b = np.concatenate([WIDE[2000:4000], SPECIAL[::-1], SPECIAL])
    check(apply(name, 2), a, b, np.empty(a.shape))  # (warnings: NumPy's own, in order)


def test_python_numbers_as_arguments_and_what_is_not_lowered():
    check(with_python_numbers, RNG.standard_normal(300), 300)
    check(of_two_ints, 20, kernel=False)
    check(of_bools, RNG.standard_normal(20), 20, kernel=False)


# Constants of math and NumPy, tests of a float, np.float64(), round() ------------------------

def constants_and_tests(a, out):
    n = 0
    for i in range(a.shape[0]):
        x = a[i]
        if np.isnan(x) or not np.isfinite(x):
            n += 1
            continue
        out[i] = x * np.pi + math.e + np.float64(i) + float(np.e) + (1.0 if np.signbit(x) else 0.0)
        out[i] += round(x * 10.0) + round(i)
        if np.isinf(x * 1e300):
            n += 100
    return n, out


def round_of_nan(a):
    t = 0
    for i in range(a.shape[0]):
        t += round(a[i])  # (ValueError for a NaN, OverflowError for an infinity)
    return t


@pytest.mark.parametrize("values", [
    np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.0, -0.0, np.nan, np.inf, -np.inf, 1e300, -3.7, 2.49]),
    RNG.standard_normal(300) * 100,
])
def test_constants_float_tests_and_round_run_in_the_kernel(values):
    check(constants_and_tests, values, np.zeros(values.shape))


def test_round_of_a_nan_or_an_infinity_raises_at_its_iteration():
    check(round_of_nan, np.array([0.5, 1.5, 2.5, np.nan, 3.0]))
    check(round_of_nan, np.array([0.5, -np.inf]))
    check(round_of_nan, np.array([0.5, 2.5, 1e300]))  # (a big int, in Python)
