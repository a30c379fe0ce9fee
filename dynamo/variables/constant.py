"""Python constants: literals, and values read from guarded sources (scalars, strings, dtypes,
ranges, slices). Operations on constants run eagerly at trace time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..exc import Unsupported
from .base import VariableTracker

if TYPE_CHECKING:
    from ..codegen import Codegen

__all__ = ["ConstantVariable"]


class ConstantVariable(VariableTracker):
    def __init__(self, value: Any, source=None) -> None:
        self.value = value
        self.source = source

    def describe(self) -> str:
        return f"constant {self.value!r}"

    def as_python_constant(self) -> Any:
        return self.value

    def python_type(self) -> type:
        return type(self.value)

    def truth(self) -> bool:
        if isinstance(self.value, (np.ndarray, np.generic)):
            return super().truth()
        return bool(self.value)

    def unpack(self, tx) -> list[VariableTracker]:
        if isinstance(self.value, (tuple, list, range, str)):
            return [ConstantVariable(v) for v in self.value]
        return super().unpack(tx)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if isinstance(self.value, (int, float, complex, np.dtype, slice, range, np.generic)) and (
            not name.startswith("_")
        ):
            try:
                attr = getattr(self.value, name)
            except AttributeError as exc:
                raise Unsupported(str(exc)) from None
            if callable(attr):
                from .callables import BoundConstantMethodVariable

                return BoundConstantMethodVariable(self.value, name)
            return ConstantVariable(attr)
        return super().var_getattr(tx, name)

    def reconstruct(self, codegen: "Codegen") -> None:
        from bytecode import Instr

        codegen.append(Instr("LOAD_CONST", self.value))
