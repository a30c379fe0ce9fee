"""Module-level functions for tests/tools/test_pickling.py: importable by worker processes, so
pickle can send them (and the compiled wrappers made from them) by reference."""

from __future__ import annotations

import numpy as np

import dynamo


@dynamo.compile
def decorated(x):
    return np.sin(x) * 2.0 + 1.0


def plain(x):
    return np.cos(x) * x - 0.5


@dynamo.compile(backend="c")
def fused(x):
    # long enough and large enough inputs that the C backend builds a kernel
    return ((x * 2.0 + 1.0) * 0.5 - x * x + 3.0) / (x * x + 2.0)


def apply(fn, x):
    """Call a (compiled) function sent to a worker, and report whether it is still compiled."""
    return fn(x), getattr(fn, "_dynamo_orig_fn", None) is not None
