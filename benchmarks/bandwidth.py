"""Measure this machine's streaming memory bandwidth with STREAM-style copy and triad kernels.

In: array length, repeats, thread count. Out: GB/s per kernel (`measure_bandwidth`), the
reference figure the kernel benchmark (`benchmarks/bench_kernels.py`) divides by to report "% of
bandwidth". The kernels are built through `dynamo.backends.c.build.build_library`, with the same
compiler and flags as generated kernels, so they store the same way generated code does (normal
stores with write-allocate; the memcpy idiom is disabled so glibc's non-temporal copy does not
inflate the figure).

Bytes moved follow the STREAM convention: each input read once and each output written once
(copy 16 B, triad 24 B per float64 element); write-allocate traffic is not counted, exactly as in
the kernel benchmark.

    PYTHONPATH=. .venv/bin/python benchmarks/bandwidth.py [--n 20000000] [--repeats 10]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dynamo.backends.c.build import BuildOptions, build_library

__all__ = ["measure_bandwidth", "streaming_bandwidth"]

SOURCE = """\
/* STREAM-style kernels for npdynamo's bandwidth reference (benchmarks/bandwidth.py). */
void bw_copy(const double *restrict a, double *restrict c, long n, int threads) {
#pragma omp parallel for simd num_threads(threads) schedule(static) if (threads > 1)
    for (long i = 0; i < n; i++) c[i] = a[i];
}
void bw_triad(const double *restrict b, const double *restrict c, double *restrict a,
              double s, long n, int threads) {
#pragma omp parallel for simd num_threads(threads) schedule(static) if (threads > 1)
    for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}
"""
CDEF = """\
void bw_copy(const double *a, double *c, long n, int threads);
void bw_triad(const double *b, const double *c, double *a, double s, long n, int threads);
"""
# -fno-tree-loop-distribute-patterns: keep the copy a loop (gcc would call memcpy otherwise).
OPTIONS = BuildOptions(cflags=("-fno-tree-loop-distribute-patterns",))


def _best_seconds(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure_bandwidth(n: int = 20_000_000, repeats: int = 10, threads: int = 1) -> dict:
    """GB/s (1e9 bytes/s) of copy and triad over ``n`` float64, best of ``repeats``."""
    library = build_library(SOURCE, CDEF, OPTIONS)
    lib, ffi = library.lib, library.ffi
    a, b, c = np.ones(n), np.full(n, 2.0), np.zeros(n)  # touched: no page faults when timed
    pa, pb, pc = (ffi.cast("double *", x.ctypes.data) for x in (a, b, c))
    copy_s = _best_seconds(lambda: lib.bw_copy(pa, pc, n, threads), repeats)
    triad_s = _best_seconds(lambda: lib.bw_triad(pb, pc, pa, 3.0, n, threads), repeats)
    if not (c[:4] == 1.0).all() or not (a[:4] == 5.0).all():
        raise AssertionError("bandwidth kernels computed wrong values")
    return {
        "copy": 16 * n / copy_s / 1e9,
        "triad": 24 * n / triad_s / 1e9,
        "n": n,
        "threads": threads,
    }


def streaming_bandwidth(n: int = 20_000_000, repeats: int = 10, threads: int = 1) -> float:
    """The reference figure: the better of copy and triad, in GB/s."""
    result = measure_bandwidth(n, repeats, threads)
    return max(result["copy"], result["triad"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000_000, help="float64 elements per array")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    r = measure_bandwidth(args.n, args.repeats, args.threads)
    print(f"copy  {r['copy']:6.1f} GB/s\ntriad {r['triad']:6.1f} GB/s  "
          f"({r['n']:,} float64, {r['threads']} thread(s), best of {args.repeats})")


if __name__ == "__main__":
    main()
