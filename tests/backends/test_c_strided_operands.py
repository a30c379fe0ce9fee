"""A pointwise kernel reads a strided row/column operand from a contiguous copy.

In: kernels whose operands include a column of a wider array broadcast over the domain (nbody's
``x.T - x`` with ``x = pos[:, 0:1]``). Out: pass/fail: the kernel step copies exactly those
operands (`dynamo.backends.c._strided_vectors`; with one of them the generated C takes its
general strided loop over the whole domain, 6x slower than over a copied column), results are
NumPy's bit for bit, and the caller's arrays are untouched.
"""

from __future__ import annotations

import numpy as np
import pytest

import dynamo
from dynamo.backends.c import _strided_vectors, make_backend


def pairwise(pos, w):
    x = pos[:, 0:1]
    return (x.T - x) * w


def _compiled(fn):
    programs = []
    inner = make_backend(calibrate=False)

    def capture(gm, example_inputs):
        compiled = inner(gm, example_inputs)
        programs.append(compiled)
        return compiled

    return dynamo.compile(fn, backend=capture), programs


def _pack_of(step):
    cells = dict(zip(step.__code__.co_freevars, step.__closure__))
    return cells["pack"].cell_contents


def test_kernel_reads_strided_columns_from_copies_and_matches_numpy():
    rng = np.random.default_rng(3)
    pos, w = rng.standard_normal((200, 3)), rng.standard_normal((200, 200))
    before = pos.copy()
    fn, programs = _compiled(pairwise)
    for _ in range(2):
        got = fn(pos, w)
        want = pairwise(pos, w)
        assert got.dtype == want.dtype and got.strides == want.strides
        assert np.array_equal(got, want)
    assert np.array_equal(pos, before)
    (program,) = programs
    steps = [v for k, v in program.__globals__.items()
             if k.startswith("dyn_k") and callable(v) and v.__closure__]
    assert steps and all(_pack_of(s) for s in steps), program.program_code
    # a contiguous column later: still NumPy's results (the copy is then no copy)
    col = np.ascontiguousarray(pos[:, :1])
    assert np.array_equal(fn(np.hstack([col, col, col]), w), pairwise(np.hstack([col] * 3), w))


@pytest.mark.parametrize("make, domain, expected", [
    (lambda a: a[:, 0:1], 40_000, (0,)),          # a column of a (200, 3) array
    (lambda a: a[:, 0:1].T, 40_000, (0,)),        # ... as a row
    (lambda a: a[:, 0:1], 1_000, ()),             # not much smaller than the domain
    (lambda a: np.ascontiguousarray(a[:, 0]), 40_000, ()),  # already contiguous
    (lambda a: a[:100:2, :2], 40_000, ()),        # two long dimensions: keeps its layout
])
def test_which_operands_are_copied(make, domain, expected):
    a = np.arange(600.0).reshape(200, 3)
    assert _strided_vectors([make(a)], domain) == expected
    assert _strided_vectors([make(a), 1.5], domain) == expected
