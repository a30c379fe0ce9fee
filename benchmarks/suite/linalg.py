"""Linear algebra with Python loops: factorisations, triangular solves, iterative solvers.

In: nothing. Out: `KERNELS`, a list of `suite.kernel.Kernel`. Cholesky, LU, the lower
triangular solve and Floyd-Warshall are `benchmarks/loop_kernels.py`'s (imported); Gram-Schmidt,
back substitution, power iteration and conjugate gradients are written here as in textbooks and
NPBench: vector operations on slices inside Python loops.
"""

from __future__ import annotations

import loop_kernels as lk
import numpy as np

from suite.kernel import Kernel, rng

_LOOP = {name: (fn, make) for name, fn, make in lk.KERNELS}


def gramschmidt(A):
    """Modified Gram-Schmidt QR (PolyBench/NPBench gramschmidt)."""
    A = A.copy()
    n = A.shape[1]
    Q = np.zeros_like(A)
    R = np.zeros((n, n), dtype=A.dtype)
    for k in range(n):
        nrm = np.dot(A[:, k], A[:, k])
        R[k, k] = np.sqrt(nrm)
        Q[:, k] = A[:, k] / R[k, k]
        for j in range(k + 1, n):
            R[k, j] = np.dot(Q[:, k], A[:, j])
            A[:, j] -= Q[:, k] * R[k, j]
    return Q, R


def backsub(U, b):
    """Upper triangular solve U x = b, one row at a time from the bottom."""
    n = b.shape[0]
    x = np.zeros_like(b)
    for i in range(n - 1, -1, -1):
        x[i] = (b[i] - U[i, i + 1:] @ x[i + 1:]) / U[i, i]
    return x


def power_iteration(A, steps):
    """Dominant eigenpair by repeated matrix-vector products."""
    v = np.ones(A.shape[0]) / np.sqrt(A.shape[0])
    lam = 0.0
    for _ in range(steps):
        w = A @ v
        lam = v @ w
        v = w / np.linalg.norm(w)
    return v, lam


def conjugate_gradient(A, b, steps):
    """Fixed number of CG iterations on a symmetric positive definite system."""
    x = np.zeros_like(b)
    r = b - A @ x
    p = r.copy()
    rs = r @ r
    for _ in range(steps):
        Ap = A @ p
        alpha = rs / (p @ Ap)
        x = x + alpha * p
        r = r - alpha * Ap
        rs_new = r @ r
        p = r + (rs_new / rs) * p
        rs = rs_new
    return x


def _floyd_warshall_numba(path):
    """Numba variant of loop_kernels.floyd_warshall (broadcasting instead of np.add.outer)."""
    path = path.copy()
    for k in range(path.shape[0]):
        path = np.minimum(path, path[:, k:k + 1] + path[k:k + 1, :])
    return path


def _upper(n):
    return np.triu(rng(20).random((n, n))) + n * np.eye(n)


def _spd(n):
    m = rng(21).standard_normal((n, n))
    return m @ m.T / n + np.eye(n)


KERNELS = [
    Kernel("cholesky", "linalg", *_LOOP["cholesky"], small=4, bench=60),
    Kernel("lu", "linalg", *_LOOP["lu"], small=4, bench=60),
    Kernel("trisolv", "linalg", *_LOOP["trisolv"], small=8, bench=400),
    Kernel("floyd_warshall", "linalg", *_LOOP["floyd_warshall"], small=8, bench=120,
           numba=_floyd_warshall_numba),
    Kernel("gramschmidt", "linalg", gramschmidt, lambda n: (rng(22).random((2 * n, n)),),
           small=5, bench=40),
    Kernel("backsub", "linalg", backsub, lambda n: (_upper(n), rng(23).random(n)),
           small=8, bench=400),
    Kernel("power_iteration", "linalg", power_iteration, lambda n: (_spd(n), min(30, n // 2)),
           small=8, bench=300),
    Kernel("conjugate_gradient", "linalg", conjugate_gradient,
           lambda n: (_spd(n), rng(24).random(n), min(20, n // 3)), small=8, bench=300),
]
