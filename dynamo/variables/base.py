"""The VariableTracker base class: the operations every tracked value may support.

The default of each operation is "not supported": it raises `Unsupported`, which makes the frame
run unmodified with that reason recorded. Subclasses override what they can do exactly.

`compile_models()` scopes the trackers of one compile: the translator's model of a cyclic
structure (``L.append(L)``; a nested function that holds its translator, which holds it in its
locals) is itself a reference cycle, and left behind it would be garbage the user's next
`gc.collect()` counts (CPython's test_gc checks such counts). At the end of the scope every
tracker made in it is emptied, which breaks those cycles. Called by `convert_frame` around
`trace_frame`; trackers made outside a scope (tests, tools) are not tracked. The scope also
keeps the strings its operations made (`note_made`), which the transformed code makes anew.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from .. import instructions as ins
from ..exc import DataDependent, Unsupported
from ..source import Source


__all__ = ["VariableTracker", "NullVariable", "compile_models"]

#: ``models``: the trackers made by this thread's running compile (None: not compiling)
_compiling = threading.local()


@contextlib.contextmanager
def compile_models() -> Iterator[None]:
    """One compile: every tracker made inside is emptied (its attributes dropped) when the block
    ends, however it ends (an internal error too: the user's program must not see our garbage);
    nothing may use them afterwards (the compile's product holds code, guards and graphs, never
    trackers). Nested scopes keep their own lists."""
    outer = getattr(_compiling, "models", None)
    outer_made = getattr(_compiling, "made", None)
    models: list[VariableTracker] = []
    _compiling.models = models
    _compiling.made = {}
    try:
        yield
    finally:
        _compiling.models = outer
        _compiling.made = outer_made
        for vt in models:
            state = getattr(vt, "__dict__", None)  # (a subclass with __slots__ has none)
            if state is not None:
                state.clear()


def note_made(value: Any, *operands: Any) -> None:
    """`value` is the result of an operation of the user's code on `operands`, run while tracing:
    a string or bytes object of two or more characters that is none of the operands (nor an item
    of one) is new, as it is on every call of the plain function: `made_while_tracing`."""
    made = getattr(_compiling, "made", None)
    if made is None or type(value) not in (str, bytes) or len(value) < 2:
        return
    for operand in operands:
        if operand is value:
            return
        if type(operand) in (list, tuple) and any(item is value for item in operand):
            return
    made[id(value)] = value


def made_while_tracing(value: Any) -> bool:
    """`value` was made by an operation run while tracing (`note_made`): a constant of the
    transformed code would be one object for every call, and CPython interns a constant string
    that looks like a name, so it could even be a literal of the same text
    (``a[:3] + a[3:] is a``)."""
    made = getattr(_compiling, "made", None)
    return made is not None and id(value) in made and made[id(value)] is value


class VariableTracker:
    """A value during symbolic execution. `source` is set when the value came from the frame."""

    source: Source | None = None

    def __new__(cls, *args: Any, **kwargs: Any) -> "VariableTracker":
        self = object.__new__(cls)
        models = getattr(_compiling, "models", None)
        if models is not None:
            models.append(self)  # (emptied when the compile ends: no cycle outlives it)
        return self

    def describe(self) -> str:
        """A short human description used in error messages."""
        return type(self).__name__

    def is_python_constant(self) -> bool:
        try:
            self.as_python_constant()
        except Unsupported:
            return False
        return True

    def as_python_constant(self) -> Any:
        raise Unsupported(f"{self.describe()} is not a Python constant")

    def python_type(self) -> type:
        raise Unsupported(f"the type of {self.describe()} is not known")

    def call_function(
        self, tx, args: list["VariableTracker"], kwargs: dict[str, "VariableTracker"]
    ) -> "VariableTracker":
        raise Unsupported(f"calling {self.describe()} is not supported")

    def var_getattr(self, tx, name: str) -> "VariableTracker":
        raise Unsupported(f"attribute {name!r} of {self.describe()} is not supported")

    def unpack(self, tx) -> list["VariableTracker"]:
        """The items, for unpacking and iteration."""
        raise Unsupported(f"iterating over {self.describe()} is not supported")

    def next(self) -> "VariableTracker | None":
        """The next item when iterating (FOR_ITER), or None when exhausted."""
        raise Unsupported(f"iterating over {self.describe()} is not supported")

    def truth(self) -> bool:
        """The value of ``bool(self)`` if known while tracing."""
        raise DataDependent(
            f"the truth value of {self.describe()} depends on data (data-dependent control flow)"
        )

    def reconstruct(self, codegen) -> None:
        """Emit bytecode that recreates this value in the output code: from its source, or as a
        constant of the code when it stands for one fixed object that cannot be mutated through
        it (a NumPy function, a module, a type)."""
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        if self.is_python_constant():
            value = self.as_python_constant()
            if callable(value) or isinstance(value, (ModuleType, type)):
                codegen.extend(ins.load_const(value))
                return
        raise Unsupported(f"cannot rebuild {self.describe()} in the compiled code")


class NullVariable(VariableTracker):
    """The NULL that CPython 3.11 pushes below a callable (PUSH_NULL, LOAD_GLOBAL with NULL)."""

    def describe(self) -> str:
        return "NULL"
