"""Named tuples made by calls of the graph: NumPy's ``EighResult``, ``SVDResult``, ``QRResult``,
``SlogdetResult`` (a rule's `fx.op_rules.NamedResults`, wrapped by `output_graph.wrap_result`).

A `NamedTupleVariable` is a `TupleVariable` (it unpacks, iterates and indexes as one) whose
fields are read by name, whose slices are plain tuples, and which is rebuilt after the graph
as an object of its class, so ``type(r) is SVDResult`` holds as in plain NumPy.
"""

from __future__ import annotations

import operator
from typing import Any

from .. import instructions as ins
from .base import VariableTracker
from .constant import run_user_op
from .containers import TupleVariable

__all__ = ["NamedTupleVariable"]


class NamedTupleVariable(TupleVariable):
    """A named tuple made by a call of the graph (NumPy's ``EighResult``, ``SVDResult``, ...):
    a tuple whose fields are read by name and which is rebuilt as an object of its class."""

    def __init__(self, items: list[VariableTracker], named: type, source=None) -> None:
        super().__init__(items, source)
        self.named = named

    def describe(self) -> str:
        return f"{self.named.__name__} of {len(self.items)} items"

    def python_type(self) -> type:
        return self.named

    def as_python_constant(self) -> Any:
        return self.named(*super().as_python_constant())

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        key = index.as_python_constant()
        if isinstance(key, slice):  # (a slice of a named tuple is a new plain tuple)
            return TupleVariable(run_user_op(operator.getitem, self.items, key))
        return super().getitem(tx, index)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        fields = getattr(self.named, "_fields", ())
        if name in fields:
            return self.items[fields.index(name)]
        return super().var_getattr(tx, name)

    def reconstruct(self, codegen) -> None:
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        codegen.extend(ins.with_null(ins.load_const(self.named)))
        for item in self.items:
            codegen.reconstruct(item)
        codegen.extend(ins.call(len(self.items)))
