"""A time-stepping loop whose step function takes the step counter: NumPy vs eager vs C.

    python benchmarks/bench_int_args.py [--steps N] [--size N]

The step function prints every 100th step (``if t % 100 == 0:``), as simulations do. Before int
arguments became symbols (issue 8), the counter's value was guarded: one compiled version per
step until ``dynamo.config.cache_size_limit``, then plain Python for the rest of the run. Now the
guard is the fact ``t % 100 != 0``: four versions for the whole run (t = 0, t = 1, then the two
facts). Prints milliseconds for the run after a warm-up run (compiles included there, not in the
timing), the ratio NumPy / compiled, and the number of versions of the step function. Results
are checked against NumPy (the C backend's sin/cos within a few ULP: relative 1e-12).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time

import numpy as np

import dynamo


def step(u, v, t):
    u = u + 0.01 * v
    v = v - 0.01 * np.sin(u) * 0.5 + 0.001 * np.cos(u * 2.0) - 0.0001 * u
    if t % 100 == 0:
        print("step", t, float(u[0]))
    return u, v


def run(fn, steps: int, size: int) -> tuple[float, np.ndarray]:
    u, v = np.linspace(0.0, 1.0, size), np.zeros(size)
    with contextlib.redirect_stdout(io.StringIO()):
        started = time.perf_counter()
        for t in range(steps):
            u, v = fn(u, v, t)
    return time.perf_counter() - started, u


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--size", type=int, default=200)
    args = parser.parse_args()
    plain, expected = min((run(step, args.steps, args.size) for _ in range(3)),
                          key=lambda r: r[0])
    print(f"{args.steps} steps, {args.size} elements: NumPy {plain * 1e3:.1f} ms")
    for backend in ("eager", "c"):
        dynamo.reset()
        compiled = dynamo.compile(step, backend=backend)
        run(compiled, args.steps, args.size)  # (warm-up: the compiles)
        took, got = min((run(compiled, args.steps, args.size) for _ in range(3)),
                        key=lambda r: r[0])
        np.testing.assert_allclose(got, expected, rtol=1e-12)
        print(f"{backend:>5}: {took * 1e3:.1f} ms, {plain / took:.2f}x NumPy, "
              f"{len(dynamo.cache_entries(step))} versions")


if __name__ == "__main__":
    main()
