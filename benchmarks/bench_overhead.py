"""Per-call overhead, miss cost after the cache limit, and first-call compile time of npdynamo.

    python benchmarks/bench_overhead.py [--quick]

Prints, for tiny arrays where NumPy's own cost is smallest:

* the cache-hit overhead: plain NumPy time per call, the compiled time per call (cache hit) and
  their difference, for 1, 2 and 10 array arguments, with the eager backend and the C backend
  (goals, eager, 8 elements: <= +0.5 us for ``np.sin(x) * y + 1``, <= +1 us for 10 arguments);
* the cost of a miss once a function has hit `dynamo.config.cache_size_limit` (it runs in plain
  Python then, after its compiled versions' guards fail);
* the first-call compile time of a 5-op and a 30-op function, from a reset cache, imports warm.

Medians/minimums of repeated runs; the machine's noise is in the spread printed next to them.
Run with ``DYNAMO_GUARD_SELF_CHECK`` unset: the self-check mode evaluates every guard twice.
"""

from __future__ import annotations

import argparse
import statistics
import time
import timeit
import warnings

import numpy as np

import dynamo


def one_array(x):
    return np.sin(x) + 1


def three_ops(x, y):
    return np.sin(x) * y + 1


def ten_arrays(a, b, c, d, e, f, g, h, i, j):
    return a + b + c + d + e + f + g + h + i + j


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
    times = timeit.repeat(lambda: fn(*args), number=number, repeat=repeat)
    return [t / number * 1e6 for t in times]


def compile_ms(fn, args, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        dynamo.reset()
        compiled = dynamo.compile(fn)
        start = time.perf_counter()
        compiled(*args)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def interleaved(first, second, args, number: int, repeat: int) -> tuple[float, float]:
    """Minimum us per call of each, measured in alternating rounds (on a shared, busy machine
    both then see the same quiet moments)."""
    a, b = [], []
    for _ in range(repeat):
        a += per_call_us(first, args, number, 1)
        b += per_call_us(second, args, number, 1)
    return min(a), min(b)


def overhead(fn, args, backend: str, number: int, repeat: int) -> tuple[float, float]:
    """(plain us, compiled us) per call."""
    dynamo.reset()
    compiled = dynamo.compile(fn, backend=backend)
    compiled(*args)
    compiled(*args)
    return interleaved(fn, compiled, args, number, repeat)


def miss_after_limit(number: int, repeat: int) -> tuple[float, float, int]:
    """(plain us, compiled us, versions) for calls that miss every cached version of a function
    that has reached the cache limit."""
    dynamo.reset()
    compiled = dynamo.compile(three_ops, dynamic=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in range(1, dynamo.config.cache_size_limit + 2):
            compiled(np.ones(n), np.ones(n))
    x = np.ones(100)
    plain, missed = interleaved(three_ops, compiled, (x, x), number, repeat)
    return plain, missed, len(dynamo._C.get_cache_entries(three_ops.__code__))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (smoke test)")
    opts = parser.parse_args()
    number, repeat = (2_000, 3) if opts.quick else (20_000, 30)
    if dynamo.config.guard_self_check:
        print("note: DYNAMO_GUARD_SELF_CHECK is on: guards run twice, numbers are inflated\n")

    rng = np.random.default_rng(0)
    cases = [
        ("1 array   np.sin(x) + 1", one_array, 1),
        ("2 arrays  np.sin(x) * y + 1", three_ops, 2),
        ("10 arrays a + b + ... + j", ten_arrays, 10),
    ]
    print("Cache-hit overhead per call, 8-element float64 (minimum of repeats)")
    print(f"{'function':<30} {'backend':>7} {'numpy us':>9} {'compiled us':>12} "
          f"{'overhead us':>12}")
    for label, fn, nargs in cases:
        args = tuple(rng.standard_normal(8) for _ in range(nargs))
        for backend in ("eager", "c"):
            try:
                plain, hit = overhead(fn, args, backend, number, repeat)
            except Exception as exc:  # e.g. no C compiler: report, keep measuring the rest
                print(f"{label:<30} {backend:>7} unavailable: {type(exc).__name__}: {exc}")
                continue
            print(f"{label:<30} {backend:>7} {plain:>9.2f} {hit:>12.2f} {hit - plain:>12.2f}")

    plain, missed, versions = miss_after_limit(number, repeat)
    print(f"\nMiss after the cache limit ({versions} versions cached, all guards fail), "
          f"np.sin(x) * y + 1 on 100 elements:")
    print(f"  plain {plain:.2f} us, compiled function {missed:.2f} us, "
          f"extra {missed - plain:.2f} us per call")

    print("\nFirst-call compile time (imports warm, cache reset before each)")
    x, y = np.ones(8), np.ones(8)
    for name, fn in (("5-op", five_ops), ("30-op", thirty_ops)):
        times = compile_ms(fn, (x, y), 5 if opts.quick else 21)
        print(f"{name:>6}: median {statistics.median(times):6.2f} ms   min {min(times):6.2f} ms   "
              f"max {max(times):6.2f} ms")


if __name__ == "__main__":
    main()
