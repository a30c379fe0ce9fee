"""Particles, fractals and finance: n-body, Mandelbrot (two ways), Black-Scholes, arc distance.

In: nothing. Out: `KERNELS`, a list of `suite.kernel.Kernel`, each a plain NumPy function as
found in NPBench, the NumPy benchmarks (arc_distance) and the Numba documentation (go_fast).
"""

from __future__ import annotations

import math

import numpy as np

from suite.kernel import Kernel, rng


def nbody(pos, vel, mass, steps):
    """Direct-sum gravitational n-body, leapfrog steps (NPBench nbody, simplified)."""
    dt = 0.01
    soft = 0.1
    pos = pos.copy()
    vel = vel.copy()
    for _ in range(steps):
        x = pos[:, 0:1]
        y = pos[:, 1:2]
        z = pos[:, 2:3]
        dx = x.T - x
        dy = y.T - y
        dz = z.T - z
        inv_r3 = (dx ** 2 + dy ** 2 + dz ** 2 + soft ** 2) ** (-1.5)
        ax = (dx * inv_r3) @ mass
        ay = (dy * inv_r3) @ mass
        az = (dz * inv_r3) @ mass
        vel += dt * np.hstack((ax, ay, az))
        pos += dt * vel
    return pos, vel


def _nbody_inputs(n):
    r = rng(30)
    return (r.standard_normal((n, 3)), r.standard_normal((n, 3)) * 0.1, r.random((n, 1)) / n,
            min(5, n // 3))


def mandelbrot(xmin, xmax, ymin, ymax, xn, yn, maxiter):
    """NPBench mandelbrot1: complex iteration on the points not yet escaped (boolean masks)."""
    X = np.linspace(xmin, xmax, xn, dtype=np.float64)
    Y = np.linspace(ymin, ymax, yn, dtype=np.float64)
    C = X + Y[:, None] * 1j
    N = np.zeros(C.shape, dtype=np.int64)
    Z = np.zeros(C.shape, dtype=np.complex128)
    for n in range(maxiter):
        I = np.less(abs(Z), 2.0)
        N[I] = n
        Z[I] = Z[I] ** 2 + C[I]
    N[N == maxiter - 1] = 0
    return Z, N


def mandelbrot_where(c_re, c_im, maxiter):
    """Escape-time Mandelbrot in real arithmetic with np.where (no masks, fixed shapes)."""
    zr = np.zeros_like(c_re)
    zi = np.zeros_like(c_im)
    count = np.zeros(c_re.shape, dtype=np.int64)
    for _ in range(maxiter):
        inside = zr * zr + zi * zi < 4.0
        zr, zi = (np.where(inside, zr * zr - zi * zi + c_re, zr),
                  np.where(inside, 2.0 * zr * zi + c_im, zi))
        count += inside
    return count


def _grid(n):
    c_re, c_im = np.meshgrid(np.linspace(-2.0, 0.5, n), np.linspace(-1.25, 1.25, n))
    return c_re, c_im, min(20, n // 2)


def _cnd(d):
    """Cumulative normal distribution (Abramowitz-Stegun polynomial)."""
    k = 1.0 / (1.0 + 0.2316419 * np.abs(d))
    w = ((((1.330274429 * k - 1.821255978) * k + 1.781477937) * k - 0.356563782) * k
         + 0.31938153) * k
    w = 1.0 - 1.0 / math.sqrt(2 * math.pi) * np.exp(-0.5 * d * d) * w
    return np.where(d < 0, 1.0 - w, w)


def black_scholes(S, K, T, r, sigma):
    """European call prices (the classic vectorised Black-Scholes benchmark)."""
    sqrt_t = np.sqrt(T)
    d1 = (np.log(S / K) + (r + 0.5 * sigma * sigma) * T) / (sigma * sqrt_t)
    d2 = d1 - sigma * sqrt_t
    return S * _cnd(d1) - K * np.exp(-r * T) * _cnd(d2)


def _bs_inputs(n):
    r = rng(31)
    return (r.uniform(5.0, 30.0, n), r.uniform(1.0, 100.0, n), r.uniform(0.25, 10.0, n),
            0.02, 0.30)


def arc_distance(theta_1, phi_1, theta_2, phi_2):
    """Great-circle distances (the NumPy benchmarks' arc_distance)."""
    temp = (np.sin((theta_2 - theta_1) / 2) ** 2
            + np.cos(theta_1) * np.cos(theta_2) * np.sin((phi_2 - phi_1) / 2) ** 2)
    return 2 * np.arctan2(np.sqrt(temp), np.sqrt(1 - temp))


def go_fast(a):
    """The Numba documentation's first example: a scalar loop over the diagonal, then a + t."""
    trace = 0.0
    for i in range(a.shape[0]):
        trace += np.tanh(a[i, i])
    return a + trace


KERNELS = [
    Kernel("nbody", "particles", nbody, _nbody_inputs, small=6, bench=300),
    Kernel("mandelbrot", "particles", mandelbrot,
           lambda n: (-2.25, 0.75, -1.5, 1.5, n, n, min(20, n // 2)), small=8, bench=200),
    Kernel("mandelbrot_where", "particles", mandelbrot_where, _grid, small=8, bench=200),
    Kernel("black_scholes", "particles", black_scholes, _bs_inputs, small=16, bench=1_000_000,
           transcendental=True),
    Kernel("arc_distance", "particles", arc_distance,
           lambda n: tuple(rng(32 + i).random(n) for i in range(4)), small=16, bench=1_000_000,
           transcendental=True),
    Kernel("go_fast", "particles", go_fast, lambda n: (rng(36).random((n, n)),), small=6,
           bench=100, transcendental=True),
]
