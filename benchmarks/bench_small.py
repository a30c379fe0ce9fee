"""Small arrays reach a kernel (issue 11): NumPy vs the eager backend vs the C backend.

    python benchmarks/bench_small.py [--quick]

Prints microseconds per call (minimum over interleaved rounds, so that every variant sees the
same quiet moments of a shared machine) and the ratio NumPy / C (above 1: C is faster) for:

* ``np.sin(x) * y + 1`` on 1, 8, 100 and 1000 float64 elements (the 8-element case is the
  issue's goal: the C backend faster than plain NumPy);
* 100-op stencil steps on a 32x32 grid (Gray-Scott reaction-diffusion, two fields, Laplacians
  over slices): ``stencil_update`` is a pure function returning the new interior (the whole
  graph becomes one C call: its slices are read in place), ``stencil_step`` one Heun step that
  copies the grids and assigns their interiors (slices, copies and slice assignments stay
  NumPy calls around 4 kernels); the number of graph operations is printed next to each.

Each compiled result is checked against NumPy first (bit for bit where NumPy is exact: the
stencil is only + - *; ``sin`` from libmvec within a few ULP, so a relative 1e-13).
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np

import dynamo

DU, DV, F, K, DT = 0.16, 0.08, 0.035, 0.065, 0.5


def sin_mul_add(x, y):
    return np.sin(x) * y + 1


def lap9(a):
    c = a[1:-1, 1:-1]
    edge = a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:]
    corner = a[:-2, :-2] + a[:-2, 2:] + a[2:, :-2] + a[2:, 2:]
    return 0.2 * edge + 0.05 * corner - c


def rhs(u, v):
    uc, vc = u[1:-1, 1:-1], v[1:-1, 1:-1]
    uvv = uc * vc * vc
    return DU * lap9(u) - uvv + F * (1.0 - uc), DV * lap9(v) + uvv - (F + K) * vc


def lap5(a):
    return a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] - 4.0 * a[1:-1, 1:-1]


def grad2(a):
    gx = a[1:-1, 2:] - a[1:-1, :-2]
    gy = a[2:, 1:-1] - a[:-2, 1:-1]
    return 0.25 * (gx * gx + gy * gy)


def stencil_update(u, v):
    """The new interior of both fields (a pure function of the grid: the caller's time loop
    stores it, ``u[1:-1, 1:-1], v[1:-1, 1:-1] = stencil_update(u, v)``): Gray-Scott with
    mixed 9-/5-point diffusion and a gradient-energy term, one explicit Euler step."""
    uc, vc = u[1:-1, 1:-1], v[1:-1, 1:-1]
    uvv = uc * vc * vc
    du = DU * (0.7 * lap9(u) + 0.3 * lap5(u)) - uvv + F * (1.0 - uc) - 0.01 * grad2(v) * uc
    dv = DV * (0.7 * lap9(v) + 0.3 * lap5(v)) + uvv - (F + K) * vc + 0.01 * grad2(u) * vc
    return uc + DT * du, vc + DT * dv


def stencil_step(u, v):
    """One Heun (RK2) step on the interior; the boundary keeps its values."""
    du1, dv1 = rhs(u, v)
    u1, v1 = u.copy(), v.copy()
    u1[1:-1, 1:-1] = u[1:-1, 1:-1] + DT * du1
    v1[1:-1, 1:-1] = v[1:-1, 1:-1] + DT * dv1
    du2, dv2 = rhs(u1, v1)
    un, vn = u.copy(), v.copy()
    un[1:-1, 1:-1] = u[1:-1, 1:-1] + (0.5 * DT) * (du1 + du2)
    vn[1:-1, 1:-1] = v[1:-1, 1:-1] + (0.5 * DT) * (dv1 + dv2)
    return un, vn


def graph_ops(fn, args) -> int:
    """Operations (call nodes) in the graph the translator records for ``fn``."""
    counted = []

    def count(gm, example_inputs):
        counted.append(sum(n.op in ("call_function", "call_method") for n in gm.graph.nodes))
        return gm.forward

    dynamo.reset()
    dynamo.compile(fn, backend=count)(*args)
    return sum(counted)


def timings(fn, args, number: int, repeat: int, exact: bool) -> dict[str, float]:
    """Minimum us per call of plain NumPy, the eager backend and the C backend."""
    variants = {"numpy": fn}
    for backend in ("eager", "c"):
        dynamo.reset()
        compiled = dynamo.compile(fn, backend=backend)
        want, got = fn(*args), compiled(*args)
        for _ in range(3):  # past calibration
            got = compiled(*args)
        check(want, got, backend, exact)
        variants[backend] = compiled
    best = dict.fromkeys(variants, float("inf"))
    for _ in range(repeat):
        for name, f in variants.items():
            t = min(timeit.repeat(lambda f=f: f(*args), number=number, repeat=1)) / number
            best[name] = min(best[name], t * 1e6)
    return best


def check(want, got, backend: str, exact: bool) -> None:
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for w, g in zip(want, got, strict=True):
        assert w.dtype == g.dtype and w.shape == g.shape and w.strides == g.strides, backend
        if exact:
            np.testing.assert_array_equal(g, w, strict=True)
        else:  # libmvec's sin: a few ULP, then * y + 1 (cancellation can scale it)
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15)


def row(label: str, t: dict[str, float], extra: str = "") -> None:
    print(f"{label:<34} {t['numpy']:>9.2f} {t['eager']:>9.2f} {t['c']:>9.2f} "
          f"{t['numpy'] / t['c']:>8.2f}x {extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (smoke test)")
    opts = parser.parse_args()
    number, repeat = (500, 3) if opts.quick else (5_000, 15)
    rng = np.random.default_rng(0)
    print(f"{'case (us per call, min)':<34} {'numpy':>9} {'eager':>9} {'c':>9} "
          f"{'numpy/c':>9}")
    for n in (1, 8, 100, 1000):
        x, y = rng.standard_normal(n), rng.standard_normal(n)
        row(f"np.sin(x) * y + 1, n={n}", timings(sin_mul_add, (x, y), number, repeat, False))
    u = 1.0 - 0.1 * rng.random((32, 32))
    v = 0.25 * rng.random((32, 32))
    for label, fn in (("stencil update 32x32 (pure)", stencil_update),
                      ("stencil Heun step 32x32 (copies)", stencil_step)):
        ops = graph_ops(fn, (u, v))
        t = timings(fn, (u, v), max(1, number // 20), repeat, True)
        row(label, t, f"({ops} graph ops)")
    dynamo.reset()


if __name__ == "__main__":
    main()
