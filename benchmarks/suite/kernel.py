"""The `Kernel` record of the benchmark suite and the input helpers its family modules share.

In: nothing (definitions only). Out: `Kernel` (a plain NumPy function as a user writes it, an
input maker taking a size, the small and benchmark sizes, an optional Numba variant) and seeded
random-input helpers. Used by the family modules of `benchmarks/suite/`, by
`benchmarks/run_suite.py` and by `tests/benchmarks/test_suite_kernels.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Kernel", "rng"]


@dataclass(frozen=True)
class Kernel:
    """One suite kernel.

    `make(n)` returns the argument tuple for size `n` (fresh arrays each call; the kernel must not
    mutate them); time-stepping kernels also take fewer steps at small `n`, so the graphs the
    tests compile stay small. `small` is the size the tests run (tiny, so C kernels and graphs
    stay cheap to build), `bench` the size `run_suite.py` times. `numba` is a Numba-friendly
    variant of `fn` (same results) when `numba.njit(fn)` cannot compile `fn` itself; None means:
    try `fn`. The suite's own helpers a kernel calls are jitted too (a helper's
    ``numba_variant`` attribute, if set, replaces it: `run_suite.numba_version`).
    `transcendental`: the result goes through exp/log/sin/tanh/... (informative: the C backend
    calls NumPy's own loops for them, so its results are compared bit for bit like the others,
    docs/c_backend.md section 3).
    """

    name: str
    family: str
    fn: Callable[..., Any]
    make: Callable[[int], tuple]
    small: int
    bench: int
    numba: Callable[..., Any] | None = None
    transcendental: bool = False
    note: str = ""


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)
