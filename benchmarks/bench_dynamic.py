"""Dynamic shapes and unspecialised scalars (issue 7): compile counts and time, against NumPy.

    python benchmarks/bench_dynamic.py [--quick]

For a few everyday functions called with 20 different lengths (and, for a scale factor, 20
different Python floats): how many versions each mode compiles (``dynamic=None`` automatic,
``True``, ``False``), the total time of the 20 first calls per mode (compiles included), and the
steady per-call time of the dynamic version against plain NumPy. Eager backend, plus the C backend
where noted. Medians of repeated runs.
"""

from __future__ import annotations

import argparse
import time
import timeit
import warnings

import numpy as np

import dynamo


def smooth(x, y):
    return (x[1:] + x[:-1]) * 0.5 - y[1:].mean()


def normalise(x):
    n = x.shape[0]
    return (x - x.sum() / n) / (np.sqrt(((x - x.mean()) ** 2).sum() / (n - 1)) + 1e-12)


def scaled(x, s):
    return np.tanh(x * s) + s


class Counter:
    def __init__(self, inner):
        self.inner, self.count = inner, 0

    def __call__(self, gm, example_inputs):
        self.count += 1
        return self.inner(gm, example_inputs)


def first_calls(fn, args_for, lengths, backend, dynamic):
    dynamo.reset()
    counter = Counter(dynamo.lookup_backend(backend))
    compiled = dynamo.compile(fn, backend=counter, dynamic=dynamic)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (dynamic=False reaches cache_size_limit: expected)
        for n in lengths:
            compiled(*args_for(n))
    return counter.count, (time.perf_counter() - start) * 1e3, compiled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    opts = parser.parse_args()
    number = 2_000 if opts.quick else 20_000
    lengths = list(range(1000, 21000, 1000))
    cases = [
        ("smooth(x, y)", smooth, lambda n: (np.linspace(0, 1, n), np.ones(n))),
        ("normalise(x)", normalise, lambda n: (np.linspace(0, 1, n),)),
        ("scaled(x, s), 20 floats", scaled, lambda n: (np.linspace(0, 1, 1000), 0.01 * n)),
    ]
    print(f"{'function':<26} {'mode':<8} {'versions':>8} {'20 first calls ms':>18}"
          f" {'dyn us/call':>12} {'numpy us/call':>14}")
    for name, fn, args_for in cases:
        for mode in (None, True, False):
            count, ms, compiled = first_calls(fn, args_for, lengths, "eager", mode)
            extra = ""
            if mode is None:
                args = args_for(lengths[-1] + 500)  # a new length: the dynamic version
                compiled(*args)
                t_dyn = min(timeit.repeat(lambda: compiled(*args), number=number, repeat=5))
                t_np = min(timeit.repeat(lambda: fn(*args), number=number, repeat=5))
                extra = f" {t_dyn / number * 1e6:>12.2f} {t_np / number * 1e6:>14.2f}"
            print(f"{name:<26} {str(mode):<8} {count:>8} {ms:>18.1f}{extra}")
    # A new length on the C backend: the dynamic graph's first call, no new version.
    count, ms, _ = first_calls(smooth, cases[0][2], lengths, "c", None)
    print(f"{'smooth, backend c':<26} {'None':<8} {count:>8} {ms:>18.1f}")


if __name__ == "__main__":
    main()
