"""LazyVariable: a frame argument that is wrapped (and guarded) only when the trace looks at it.

In: the translator, the argument's Source and its real value. Out: on first real use, the
VariableTracker `VariableBuilder` makes for the value, with its guards; until then, nothing.
Created by `InstructionTranslator.load_argument`; realized by the translator's `pop`/`popn` and by
any attribute access (delegation). A value that only passes through the trace (loaded onto the
stack and handed, unchanged, to an instruction that runs in plain Python after a graph break, or
to a resume function) is rebuilt from its Source and gets no guard, so a resume function taking
``print``'s arguments does not recompile for every new value printed.
"""

from __future__ import annotations

import weakref
from typing import Any

from ..source import Source
from .builder import VariableBuilder


__all__ = ["LazyVariable", "realize"]


class LazyVariable:
    """Stands for ``VariableBuilder(tx, source)(value)`` until something needs the real tracker."""

    def __init__(self, tx, source: Source, value: Any) -> None:
        # Weak: the translator keeps its locals (this object) and must not be kept in a cycle
        # (a dead translator would pin the frame's code until the next garbage collection).
        self.tx = weakref.ref(tx)
        self.source = source
        self.value = value
        self._vt = None

    def realize(self):
        if self._vt is None:
            self._vt = VariableBuilder(self.tx(), self.source)(self.value)
        return self._vt

    def reconstruct(self, codegen) -> None:
        if self._vt is not None:
            codegen.reconstruct(self._vt)
        else:
            self.source.reconstruct(codegen)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names LazyVariable itself lacks: everything a tracker can do.
        return getattr(self.realize(), name)


def realize(vt: Any) -> Any:
    """The real tracker behind `vt` (itself unless it is lazy)."""
    return vt.realize() if type(vt) is LazyVariable else vt
