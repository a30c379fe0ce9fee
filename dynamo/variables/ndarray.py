"""NDArrayVariable: an ndarray or NumPy scalar that lives in the graph (an fx Node + ArrayMeta);
`ArrayRowIterator`: ``for row in x``, each row read when its iteration starts."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

import numpy as np

from fx import op_rules
from fx.meta import ArrayMeta
from fx.symbolic import is_data_dependent

from ..exc import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable, user_error
from .containers import _iterator_at, _positioned, drain

if TYPE_CHECKING:
    from fx import Node


__all__ = ["NDArrayVariable", "ArrayRowIterator"]

# Attributes that are views or new arrays, and the graph call that computes them.
_ARRAY_ATTRS = {
    "T": ("call_method", "transpose"),
    "real": ("call_function", np.real),
    "imag": ("call_function", np.imag),
}

#: Unrolling ``for row in x`` or ``a, b = x`` makes one node per row; past this, give up.
MAX_UNPACK = 256


class NDArrayVariable(VariableTracker):
    def __init__(self, node: "Node", meta: ArrayMeta, source=None) -> None:
        self.node = node
        self.meta = meta
        self.source = source

    def describe(self) -> str:
        return f"NumPy {self.meta}" if self.meta.is_scalar else f"ndarray {self.meta}"

    def python_type(self) -> type:
        return self.meta.dtype.type if self.meta.is_scalar else np.ndarray

    def dim(self, i: int):
        """The size of dimension `i` as a Python value (an int or a `Sym`); a data-dependent
        length (of ``x[mask]``) cannot be one: no guard could check what the trace did with it."""
        n = self.meta.shape[i]
        if is_data_dependent(n):
            raise Unsupported("the length of x[mask] depends on the data: it is known only when "
                              "the graph runs")
        return n

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "__class__":  # (its exact type is guarded: as ``type(x)``)
            from .builder import wrap_constant  # (upward: builder makes trackers of every kind)

            return wrap_constant(self.python_type())
        if name in ("shape", "size", "nbytes") and is_data_dependent(self.meta.shape):
            raise Unsupported(f"x.{name} of x[mask] depends on the data: it is known only when "
                              "the graph runs")
        if name in _ARRAY_ATTRS:
            kind, target = _ARRAY_ATTRS[name]
            if kind == "call_method":
                return tx.output.call_method(tx, target, self, [], {})
            return tx.output.call_function(tx, target, [self], {})
        if op_rules.is_supported_method(name) or callable(getattr(np.ndarray, name, None)):
            # Methods go through infer_method when called, which says why one is not
            # supported (x.item() needs the data, ...).
            from .callables import MethodVariable  # (upward: callables build on arrays)

            return MethodVariable(self, name)
        try:
            value = op_rules.infer_attr(name, self.meta)
        except op_rules.RuleError as exc:
            raise Unsupported(f"ndarray attribute {name!r}: {exc}") from None
        if isinstance(value, ArrayMeta):
            raise Unsupported(f"ndarray attribute {name!r} is not supported")
        from .builder import wrap_constant  # (upward: builder makes trackers of every kind)

        return wrap_constant(value)

    def unpack(self, tx) -> list[VariableTracker]:
        if self.meta.is_scalar or self.meta.ndim == 0:
            raise user_error(TypeError, "iteration over a 0-d array")
        n = self.dim(0)
        if n > MAX_UNPACK:
            raise Unsupported(f"iterating over {n} rows of an array (limit {MAX_UNPACK} when unrolling)")

        return [tx.output.call_function(tx, operator.getitem, [self, ConstantVariable(i)], {}) for i in range(n)]

    def reconstruct(self, codegen) -> None:
        codegen.load_graph_value(self)


class ArrayRowIterator(VariableTracker):
    """``for row in x``: each row is read when its iteration starts (x[i] then), so a change to
    x made by an earlier iteration is seen, as in Python (reading every row up front is not)."""

    #: built once where it is needed twice (``zip(it, it)``): one iterator, as in Python
    has_identity = True

    def __init__(self, tx, array: NDArrayVariable) -> None:
        if array.meta.is_scalar or array.meta.ndim == 0:
            raise user_error(TypeError, "iteration over a 0-d array")
        array.dim(0)  # (``for r in x[mask]``: how many rows depends on the data: Unsupported)
        self.tx = tx
        self.array = array
        self.index = 0

    def describe(self) -> str:
        return "iterator over the rows of an array"

    def next(self) -> VariableTracker | None:
        if self.index >= self.array.dim(0):
            return None
        row = self.tx.output.call_function(self.tx, operator.getitem,
                                           [self.array, ConstantVariable(self.index)], {})
        self.index += 1
        return row

    def unpack(self, tx) -> list[VariableTracker]:
        return drain(self)

    def reconstruct(self, codegen) -> None:
        """``iter(x)`` at the row this one reached (an array's iterator is the sequence
        iterator, positioned by its pickled state): it reads the rows live, as this one."""
        _positioned(codegen, _iterator_at, self.array, self.index)
