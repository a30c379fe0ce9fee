"""Per-call overhead and first-call compile time of npdynamo (the Foundation issue's numbers).

    python benchmarks/bench_overhead.py [--quick]

Prints, for tiny arrays where NumPy's own cost is smallest: plain NumPy time per call, the
compiled (eager backend, cache hit) time per call, and their difference, the extra cost per call
that npdynamo adds (goal: <= 1 us). Then the first-call compile time of a 5-op function (goal:
<= 10 ms) and a 30-op function, each measured from a reset cache with imports warm. Medians of
repeated runs; the machine's noise is in the spread printed next to them.
"""

from __future__ import annotations

import argparse
import statistics
import time
import timeit

import numpy as np

import dynamo


def three_ops(x, y):
    return np.sin(x) * y + 1


def five_ops(x, y):
    a = np.sin(x) * y
    b = a + 1
    c = np.exp(b)
    return c - x


def thirty_ops(x, y):
    for _ in range(6):
        x = np.tanh(x * y + 1.0) - y / 2.0 * x
    return x


def per_call_us(fn, args, number: int, repeat: int) -> list[float]:
    return [t / number * 1e6 for t in timeit.repeat(lambda: fn(*args), number=number, repeat=repeat)]


def compile_ms(fn, args, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        dynamo.reset()
        compiled = dynamo.compile(fn)
        start = time.perf_counter()
        compiled(*args)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (smoke test)")
    opts = parser.parse_args()
    number, repeat = (2_000, 3) if opts.quick else (100_000, 7)

    print("Cache-hit overhead per call (eager backend), np.sin(x) * y + 1")
    print(f"{'elements':>9} {'numpy us':>10} {'compiled us':>12} {'overhead us':>12}")
    for n in (8, 1024):
        x, y = np.random.default_rng(0).standard_normal((2, n))
        compiled = dynamo.compile(three_ops)
        compiled(x, y)
        plain = min(per_call_us(three_ops, (x, y), number, repeat))
        hit = min(per_call_us(compiled, (x, y), number, repeat))
        print(f"{n:>9} {plain:>10.2f} {hit:>12.2f} {hit - plain:>12.2f}")

    print("\nFirst-call compile time (imports warm, cache reset before each)")
    x, y = np.ones(8), np.ones(8)
    for name, fn in (("5-op", five_ops), ("30-op", thirty_ops)):
        times = compile_ms(fn, (x, y), 5 if opts.quick else 21)
        print(f"{name:>6}: median {statistics.median(times):6.2f} ms   min {min(times):6.2f} ms   "
              f"max {max(times):6.2f} ms")


if __name__ == "__main__":
    main()
