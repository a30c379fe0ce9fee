"""Deterministic test inputs."""

from __future__ import annotations

import numpy as np


def data(dtype, shape=(3, 4), positive=False) -> np.ndarray:
    """Deterministic, varied values of `dtype` (no zeros when `positive`: safe divisors)."""
    n = int(np.prod(shape))
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return (np.arange(n) % 3 == 0).reshape(shape)
    if dtype.kind == "u" or positive:
        values = np.arange(1, n + 1) % 7 + 1
    elif dtype.kind == "i":
        values = np.arange(n) % 9 - 4
    else:
        values = np.linspace(-2.5, 3.25, n)
    if dtype.kind == "c":
        values = values + 1j * values[::-1]
    return values.astype(dtype).reshape(shape)
