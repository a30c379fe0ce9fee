"""First calls of loop kernels: how long until the result, how many graphs, and the steady state.

``python benchmarks/bench_first_call.py [--n 120] [--backend eager]`` runs every kernel of
`loop_kernels.py` once plainly and once compiled from empty caches (first call: tracing,
compiling, running), then again (steady state), checks the results are equal, and prints a table:
first call, steady-state call and NumPy time in ms, graphs and breaks (from `dynamo.explain`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dynamo  # noqa: E402
from loop_kernels import KERNELS  # noqa: E402


def best_of(fn, args, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=120, help="problem size (default 120)")
    parser.add_argument("--backend", default="eager", help="eager (default) or c")
    args = parser.parse_args()
    print(f"{'kernel':<16}{'first call':>12}{'steady':>10}{'numpy':>10}{'graphs':>8}{'breaks':>8}")
    for name, fn, make in KERNELS:
        inputs = make(args.n)
        expected = fn(*inputs)
        dynamo.reset()
        compiled = dynamo.compile(fn, backend=args.backend)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            got = compiled(*inputs)
            first = time.perf_counter() - t0
            steady = best_of(compiled, inputs)
            out = dynamo.explain(fn, backend=args.backend)(*inputs)
        assert np.array_equal(got, expected), name
        plain = best_of(fn, inputs)
        print(f"{name:<16}{first * 1e3:>10.0f}ms{steady * 1e3:>8.1f}ms{plain * 1e3:>8.1f}ms"
              f"{out.graph_count:>8}{out.graph_break_count:>8}")


if __name__ == "__main__":
    main()
