"""Stencils and time loops: Jacobi, Gauss-Seidel, heat, horizontal diffusion, waves, Life.

In: nothing. Out: `KERNELS`, a list of `suite.kernel.Kernel`. The Jacobi, Seidel and heat
kernels are `benchmarks/loop_kernels.py`'s (imported, with their input makers); the others are
written here the way NPBench and textbook codes write them: whole-array slices inside a Python
time loop.
"""

from __future__ import annotations

import loop_kernels as lk
import numpy as np

from suite.kernel import Kernel, rng

_LOOP = {name: (fn, make) for name, fn, make in lk.KERNELS}


def hdiff(in_field, coeff):
    """NPBench's horizontal diffusion (COSMO weather model): 4th-order flux-limited Laplacian."""
    I = in_field.shape[0] - 4
    J = in_field.shape[1] - 4
    lap_field = 4.0 * in_field[1:I + 3, 1:J + 3, :] - (
        in_field[2:I + 4, 1:J + 3, :] + in_field[0:I + 2, 1:J + 3, :]
        + in_field[1:I + 3, 2:J + 4, :] + in_field[1:I + 3, 0:J + 2, :])
    res = lap_field[1:, 1:J + 1, :] - lap_field[:-1, 1:J + 1, :]
    flx_field = np.where(
        (res * (in_field[2:I + 3, 2:J + 2, :] - in_field[1:I + 2, 2:J + 2, :])) > 0, 0, res)
    res = lap_field[1:I + 1, 1:, :] - lap_field[1:I + 1, :-1, :]
    fly_field = np.where(
        (res * (in_field[2:I + 2, 2:J + 3, :] - in_field[2:I + 2, 1:J + 2, :])) > 0, 0, res)
    return in_field[2:I + 2, 2:J + 2, :] - coeff * (
        flx_field[1:, :, :] - flx_field[:-1, :, :] + fly_field[:, 1:, :] - fly_field[:, :-1, :])


def _hdiff_inputs(n):
    return (rng(10).random((n + 4, n + 4, 8)), rng(11).random((n, n, 8)))


def wave_1d(u0, steps):
    """Leapfrog time stepping of the 1-D wave equation with fixed ends."""
    c2 = 0.25
    prev = u0.copy()
    cur = u0.copy()
    for t in range(steps):
        nxt = np.empty_like(cur)
        nxt[1:-1] = 2.0 * cur[1:-1] - prev[1:-1] + c2 * (cur[2:] - 2.0 * cur[1:-1] + cur[:-2])
        nxt[0] = 0.0
        nxt[-1] = 0.0
        prev, cur = cur, nxt
    return cur


def diffusion_2d(u, steps):
    """Explicit diffusion on a periodic grid with np.roll."""
    for _ in range(steps):
        u = u + 0.1 * (np.roll(u, 1, axis=0) + np.roll(u, -1, axis=0)
                       + np.roll(u, 1, axis=1) + np.roll(u, -1, axis=1) - 4.0 * u)
    return u


def life(board, steps):
    """Conway's Game of Life on a torus (uint8 cells, 8 rolled neighbour counts per step)."""
    for _ in range(steps):
        n = np.zeros(board.shape, dtype=np.uint8)
        for di in (-1, 0, 1):
            for dj in (-1, 0, 1):
                if di != 0 or dj != 0:
                    n += np.roll(np.roll(board, di, axis=0), dj, axis=1)
        board = ((n == 3) | ((board == 1) & (n == 2))).astype(np.uint8)
    return board


KERNELS = [
    Kernel("jacobi_1d", "stencil", *_LOOP["jacobi_1d"], small=6, bench=100),
    Kernel("jacobi_2d", "stencil", *_LOOP["jacobi_2d"], small=8, bench=60),
    Kernel("heat_3d", "stencil", *_LOOP["heat_3d"], small=16, bench=80),
    Kernel("seidel_2d", "stencil", *_LOOP["seidel_2d"], small=10, bench=40),
    Kernel("hdiff", "stencil", hdiff, _hdiff_inputs, small=6, bench=64),
    Kernel("wave_1d", "stencil", wave_1d,
           lambda n: (np.sin(np.linspace(0.0, np.pi, n)) * rng(12).random(n), min(50, n // 4)),
           small=16, bench=20_000),
    Kernel("diffusion_2d", "stencil", diffusion_2d, lambda n: (rng(13).random((n, n)), min(20, n)),
           small=6, bench=256),
    Kernel("life", "stencil", life,
           lambda n: ((rng(14).random((n, n)) < 0.3).astype(np.uint8), min(10, n // 4)),
           small=8, bench=128),
]
