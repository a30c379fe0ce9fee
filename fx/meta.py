"""Abstract values: what the compiler knows about an array without its data.

`ArrayMeta` is the value recorded in ``node.meta["val"]`` for every graph node that produces an
ndarray or a NumPy scalar. The translator (``dynamo``) creates them for graph inputs from the real
arguments, `fx.op_rules` computes them for every operation, and backends read them. Nothing here
ever holds or allocates array data.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from fx.symbolic import Sym

__all__ = ["ArrayMeta", "meta_of"]


@dataclass(frozen=True)
class ArrayMeta:
    """dtype and shape of an ndarray (``is_scalar=False``) or a NumPy scalar (``is_scalar=True``).

    A dimension is an int or a `fx.symbolic.Sym` (a size known only as an expression over the
    graph inputs' sizes: dynamic shapes)."""

    dtype: np.dtype
    shape: tuple[int, ...]
    is_scalar: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", np.dtype(self.dtype))
        object.__setattr__(self, "shape", tuple(d if isinstance(d, Sym) else int(d)
                                                for d in self.shape))
        if self.is_scalar and self.shape != ():
            raise ValueError(f"a NumPy scalar has shape (), got {self.shape}")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return prod(self.shape)

    def __str__(self) -> str:
        if self.is_scalar:
            return f"{self.dtype.name} scalar"
        return f"{self.dtype.name}[{', '.join(map(str, self.shape))}]"

    __repr__ = __str__


def meta_of(value: object) -> ArrayMeta:
    """The abstract value of a real ndarray or NumPy scalar."""
    if isinstance(value, np.ndarray):
        return ArrayMeta(value.dtype, value.shape, False)
    if isinstance(value, np.generic):
        return ArrayMeta(value.dtype, (), True)
    raise TypeError(f"meta_of expects an ndarray or NumPy scalar, got {type(value).__name__}")
