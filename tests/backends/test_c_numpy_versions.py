"""The C backend is NumPy's bits on every NumPy it runs with (issue 9: NumPy 2.2 on Python 3.10).

NumPy <= 2.2 (the newest NumPy for Python 3.10) and NumPy >= 2.3 differ in two ways a kernel
must follow, each found by a probe (`kernel.pairwise_split`, `lowering.power_loop_special_cases`):

* Float sums: NumPy <= 2.2's reduce iterator hands the pairwise loop at most
  ``np.getbufsize()`` (8192) elements at a time, even when nothing is copied, so a pairwise run
  longer than that is ``acc += pairwise(chunk)`` chunk after chunk (each chunk restarting at the
  run's start); NumPy >= 2.3 sums the run whole. The kernel takes the chunk length in its block.
* Powers: NumPy <= 2.2 special-cases ``x ** 0.5`` (sqrt) and ``x ** -1`` (reciprocal) only in
  the ``**`` operator on a float array; ``np.power`` and integer bases go through its pow loop
  ((-0.0) ** 0.5 is +0.0 there, and last bits differ). A NumPy scalar's ``**`` is scalar math
  (C pow) on every version.

The oracle is the graph's eager ``gm.forward``, compared byte for byte; tests assert that the
kernel ran where it should. Which NumPy each test guards is noted on it.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from support.c_graphs import build, same_bits

from dynamo.backends.c import kernel as ckernel
from dynamo.backends.c import lowering as clowering

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

NUMPY_2_3 = tuple(int(p) for p in np.__version__.split(".")[:2]) >= (2, 3)


def _calls(f) -> int:
    return sum(r.calls for r in f.runners.values())


def _values(shape, dtype="float64", seed=0):
    # Widely spread magnitudes: any change in the order of the additions shows in the bits.
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * np.exp(rng.uniform(-8, 8, shape))).astype(dtype)


def test_probes_agree_with_the_numpy_version_and_keep_the_buffer_size():
    # Both NumPy families: the probes must say what the version says.
    assert ckernel.pairwise_split() == ("whole" if NUMPY_2_3 else "chunks")
    assert clowering.power_loop_special_cases() == NUMPY_2_3
    saved = ckernel._split
    try:
        with np.errstate():
            np.setbufsize(4096)
            ckernel._split = None
            ckernel.pairwise_split()  # probes with an 8192-element buffer ...
            assert np.getbufsize() == 4096  # ... and leaves the caller's size alone
    finally:
        ckernel._split = saved


def _normalised(a):
    e = np.sqrt(a * a)
    return e / e.sum(axis=-1, keepdims=True)


LONG_SUMS = {
    # name: (function, input); every pairwise run is longer than the 8192-element buffer
    "full_1d": (lambda a: a.sum(), _values(20_001)),
    "mean_1d": (lambda a: np.mean(a), _values(30_000, seed=2)),
    "sum_of_squares": (lambda a: np.sum(a * a), _values(10_000)),
    "rows": (lambda a: a.sum(axis=-1), _values((3, 10_000))),
    "full_2d": (lambda a: a.sum(), _values((3, 9_000))),
    "float32_rows": (lambda a: (a * 2.0).sum(axis=1), _values((2, 17_000), "float32")),
    # a costly value the epilogue reads too: summed from the row buffer (``pwb``)
    "row_buffer": (_normalised, _values((2, 12_000))),
}


@pytest.mark.parametrize("case", sorted(LONG_SUMS))
def test_sums_longer_than_numpys_buffer_are_numpys_bits(case):
    # Guards NumPy <= 2.2 (chunked pairwise runs; failed there before the chunk length was
    # passed to the kernel: "23337.500416708335 != 23337.50041670834"); on NumPy >= 2.3 it
    # guards the whole-run sums.
    fn, a = LONG_SUMS[case]
    gm, f = build(fn, [a])
    views = {"C": a, "neg0": a[::-1], "sliced0": np.repeat(a, 2, axis=0)[::2]}
    if a.ndim > 1:
        views["sliced_last"] = np.repeat(a, 2, axis=-1)[..., ::2]
    for name, x in views.items():
        before = _calls(f)
        with np.errstate(all="ignore"):
            want, got = gm.forward(x), f(x)
        assert same_bits(got, want), f"{case}/{name}: {got!r:.120} != {want!r:.120}"
        if name == "C":
            assert _calls(f) > before, f"{case}: the kernel did not run"


@pytest.mark.parametrize("program", [False, True])
def test_sums_follow_np_setbufsize_after_the_layout_was_planned(program):
    # Guards NumPy <= 2.2: a float sum's chunks are np.getbufsize() long, so a plan (and a
    # one-call layout block) made under the default size must not be reused under another.
    # ``program``: the kernel is a step of a larger graph (else the whole graph is one call,
    # which runs the graph as NumPy under another buffer size).
    a = _values((8, 20_000), seed=3)
    fn = (lambda x: np.cumsum(np.sum(x * x, axis=-1))) if program else \
        (lambda x: np.sum(x * x, axis=-1))
    gm, f = build(fn, [a])
    assert same_bits(f(a), gm.forward(a))  # planned and registered at the default size
    for size in (4000, 8192 * 2, 4000):
        with np.errstate():
            np.setbufsize(size)
            before = _calls(f)
            got, want = f(a), gm.forward(a)
            assert same_bits(got, want), f"bufsize {size}: {got!r} != {want!r}"
            if program:
                assert _calls(f) > before  # still a kernel (the general runner's plan)
    assert same_bits(f(a), gm.forward(a))


def test_integer_mean_follows_np_setbufsize_after_the_layout_was_planned():
    # Guards every NumPy: np.mean of integers casts through NumPy's buffer, so the kernel runs
    # only when one buffer holds the input; that must be decided under the current size, not
    # the one of the first call (the plan and the one-call block were reused before).
    x = np.random.default_rng(9).integers(0, 2**62, 6000)
    gm, f = build(lambda a: np.mean(a), [x])
    assert same_bits(f(x), gm.forward(x))
    with np.errstate():
        np.setbufsize(1024)
        assert same_bits(f(x), gm.forward(x))
    assert same_bits(f(x), gm.forward(x))


_POW_INPUT = np.concatenate([[-0.0, 0.0, -np.inf, np.inf, np.nan, -1.0, 1e300, 3.0],
                             np.random.default_rng(5).uniform(0, 1e6, 500)])

POWERS = {
    # name: (function, input, must the kernel compute the power on every NumPy?)
    "operator_half": (lambda a: a ** 0.5, _POW_INPUT, True),
    "operator_minus_one": (lambda a: a ** -1.0, _POW_INPUT, True),
    "operator_half_float32": (lambda a: a ** 0.5,
                              _POW_INPUT[_POW_INPUT != 1e300].astype(np.float32), True),
    # NumPy <= 2.2: its pow loop ((-0.0) ** 0.5 is +0.0 there, 1e300 ** -1 is not 1e-300)
    "np_power_half": (lambda a: np.power(a, 0.5) * 3.0, _POW_INPUT, False),
    "np_power_minus_one": (lambda a: np.power(a, -1.0) * 3.0, _POW_INPUT, False),
    "int_base_half": (lambda a: a ** 0.5 * 3.0, np.arange(1, 3000), False),
    # every NumPy: a NumPy scalar's ** is scalar math (C pow)
    "scalar_base_half": (lambda a: a[0] ** 0.5 + a, _POW_INPUT, False),
}


@pytest.mark.parametrize("case", sorted(POWERS))
def test_half_and_minus_one_powers_are_numpys_bits(case):
    fn, a, lowered = POWERS[case]
    gm, f = build(fn, [a])
    with np.errstate(all="ignore"):
        want, got = gm.forward(a), f(a)
    assert same_bits(got, want), f"{case}: {got!r:.200} != {want!r:.200}"
    if lowered:
        assert _calls(f) > 0
