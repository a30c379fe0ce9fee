"""NPBench-style kernels with Python loops: triangular solves, factorisations, stencils.

Each entry of `KERNELS` is (name, function, make_inputs(n) -> tuple). Used by
`benchmarks/bench_first_call.py` (first-call time, graphs) and the benchmark suite
(`benchmarks/suite/`, whose tests in tests/benchmarks check results equal NumPy's). Written the
way NPBench writes them: plain NumPy inside Python loops, with the loop counter in slices.
"""

from __future__ import annotations

import numpy as np

__all__ = ["KERNELS"]


def cholesky(A):
    A = A.copy()
    A[0, 0] = np.sqrt(A[0, 0])
    for i in range(1, A.shape[0]):
        for j in range(i):
            A[i, j] -= np.dot(A[i, :j], A[j, :j])
            A[i, j] /= A[j, j]
        A[i, i] -= np.dot(A[i, :i], A[i, :i])
        A[i, i] = np.sqrt(A[i, i])
    for i in range(A.shape[0]):
        A[i, i + 1:] = 0.0
    return A


def lu(A):
    A = A.copy()
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            A[i, j] -= A[i, :j] @ A[:j, j]
            A[i, j] /= A[j, j]
        for j in range(i, n):
            A[i, j] -= A[i, :i] @ A[:i, j]
    return A


def trisolv(L, b):
    x = np.zeros_like(b)
    for i in range(x.shape[0]):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    return x


def jacobi_1d(A, steps):
    A = A.copy()
    B = np.zeros_like(A)
    for t in range(steps):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])
    return A


def jacobi_2d(A, steps):
    A = A.copy()
    B = A.copy()
    for t in range(1, steps):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])
    return A


def seidel_2d(A, steps):
    A = A.copy()
    n = A.shape[0]
    for t in range(steps):
        for i in range(1, n - 1):
            A[i, 1:-1] += (A[i - 1, :-2] + A[i - 1, 1:-1] + A[i - 1, 2:] + A[i, 2:]
                           + A[i + 1, :-2] + A[i + 1, 1:-1] + A[i + 1, 2:])
            for j in range(1, n - 1):
                A[i, j] += A[i, j - 1]
                A[i, j] /= 9.0
    return A


def floyd_warshall(path):
    path = path.copy()
    for k in range(path.shape[0]):
        path[:] = np.minimum(path[:], np.add.outer(path[:, k], path[k, :]))
    return path


def heat_3d(A, steps):
    A = A.copy()
    B = A.copy()
    for t in range(1, steps):
        B[1:-1, 1:-1, 1:-1] = (0.125 * (A[2:, 1:-1, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[:-2, 1:-1, 1:-1])
                               + 0.125 * (A[1:-1, 2:, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, :-2, 1:-1])
                               + A[1:-1, 1:-1, 1:-1])
        A[1:-1, 1:-1, 1:-1] = (0.125 * (B[2:, 1:-1, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[:-2, 1:-1, 1:-1])
                               + 0.125 * (B[1:-1, 2:, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, :-2, 1:-1])
                               + B[1:-1, 1:-1, 1:-1])
    return A


def _spd(n):
    rng = np.random.default_rng(0)
    m = rng.standard_normal((n, n))
    return m @ m.T + n * np.eye(n)


def _lower(n):
    rng = np.random.default_rng(1)
    return np.tril(rng.random((n, n))) + n * np.eye(n)


KERNELS = [
    ("cholesky", cholesky, lambda n: (_spd(n),)),
    ("lu", lu, lambda n: (_spd(n),)),
    ("trisolv", trisolv, lambda n: (_lower(n), np.random.default_rng(2).random(n))),
    ("jacobi_1d", jacobi_1d, lambda n: (np.random.default_rng(3).random(n * 10), n)),
    ("jacobi_2d", jacobi_2d, lambda n: (np.random.default_rng(4).random((n, n)), n // 2)),
    ("seidel_2d", seidel_2d, lambda n: (np.random.default_rng(5).random((n // 2, n // 2)), 2)),
    ("floyd_warshall", floyd_warshall, lambda n: (np.random.default_rng(6).random((n, n)),)),
    ("heat_3d", heat_3d, lambda n: (np.random.default_rng(7).random((n // 4, n // 4, n // 4)), 10)),
]
