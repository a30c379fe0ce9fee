"""np.roll inside graphs: traced with constant integer shifts and axes, run as NumPy's own call
(eager backend) or as a NumPy call between fused C kernels (C backend), with NumPy as the oracle.

Comes in: user functions calling np.roll (every dtype kind, axis None / int / tuple, negative and
larger-than-axis shifts, 0-d, scalar and empty inputs, views). Goes out: the same results, bit for
bit, as plain NumPy, in one graph (no graph break), and a graph break for what the rule cannot
fix at compile time (a traced shift).
"""

from __future__ import annotations

import numpy as np
import pytest

import dynamo
from dynamo.backends.c import make_backend

CASES = [
    ((5,), 1, None), ((5,), -1, None), ((5,), 12, 0), ((5,), -300, -1), ((5,), 0, 0),
    ((4, 6), 1, 0), ((4, 6), -1, 1), ((4, 6), 7, None), ((4, 6), (1, -2), (0, 1)),
    ((4, 6), (3, 3), (1, 1)), ((4, 6), 2, (0, 1)), ((2, 3, 4), (1, 1), (-1, 0)),
    ((3, 0), 2, 0), ((0, 3), -1, None), ((), 3, None), ((1, 1), 5, (0, 1)),
]


def _data(shape, dtype):
    n = int(np.prod(shape))
    values = np.arange(n) * 7 % 11 - 5
    if dtype == np.bool_:
        return (values > 0).reshape(shape)
    if np.dtype(dtype).kind == "c":
        return (values + 1j * values[::-1]).astype(dtype).reshape(shape)
    return values.astype(dtype).reshape(shape)


@pytest.mark.parametrize("shape,shift,axis", CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.uint8, np.bool_,
                                   np.complex128])
def test_roll_is_one_graph_and_numpys_result(check, shape, shift, axis, dtype):
    def f(x):
        return np.roll(x, shift, axis=axis)

    check(f, _data(shape, dtype))


def test_roll_of_a_scalar_and_of_views_and_positional_axis(check):
    def f(x, y):
        return np.roll(x[0, 0], 1), np.roll(x.T, 1, 0), np.roll(y[::-2], -1)

    check(f, _data((3, 4), np.float64), _data((7,), np.int32))

    def g(x):
        return np.roll(x * 2.0, 1, 1) + 1.0

    check(g, check.view(_data((4, 6), np.float64), lambda b: b[:, ::2]))


def test_roll_errors_are_numpys(check):
    def bad_axis(x):
        return np.roll(x, 1, axis=2)

    def bad_lengths(x):
        return np.roll(x, (1, 2, 3), axis=(0, 1))

    check(bad_axis, _data((3, 4), np.float64), graphs=None)
    check(bad_lengths, _data((3, 4), np.float64), graphs=None)


def test_traced_shift_breaks_the_graph_and_stays_correct(check):
    def f(x, k):
        return np.roll(x, k[0], axis=0) * 2.0

    check(f, _data((5, 3), np.float64), np.array([2]), graphs=None)
    out = dynamo.explain(f)(_data((5, 3), np.float64), np.array([2]))
    assert out.graph_break_count >= 1


def _diffusion(u, steps):
    for _ in range(steps):
        u = u + 0.1 * (np.roll(u, 1, axis=0) + np.roll(u, -1, axis=0)
                       + np.roll(u, 1, axis=1) + np.roll(u, -1, axis=1) - 4.0 * u)
    return u


def _life(board, steps):
    for _ in range(steps):
        n = np.zeros(board.shape, dtype=np.uint8)
        for di in (-1, 0, 1):
            for dj in (-1, 0, 1):
                if di != 0 or dj != 0:
                    n += np.roll(np.roll(board, di, axis=0), dj, axis=1)
        board = ((n == 3) | ((board == 1) & (n == 2))).astype(np.uint8)
    return board


@pytest.mark.parametrize("backend", ["eager", "c"])
def test_stencils_with_roll_are_one_graph_and_bit_exact(backend):
    be = make_backend(min_size=0, calibrate=False) if backend == "c" else "eager"
    rng = np.random.default_rng(3)
    u = rng.random((16, 12))
    board = (rng.random((10, 9)) < 0.4).astype(np.uint8)
    for fn, args in ((_diffusion, (u, 3)), (_life, (board, 3))):
        want = fn(*args)
        out = dynamo.explain(fn, be)(*args)
        assert out.graph_count == 1 and out.graph_break_count == 0, out
        compiled = dynamo.compile(fn, backend=be)
        for _ in range(2):
            got = compiled(*args)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes()
        dynamo.reset()
