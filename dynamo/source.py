"""Sources: where a value seen by the translator came from.

A `Source` is a path from the frame's inputs to a value (an argument, a global, a closure cell, an
item or attribute of one of those). Sources do two jobs: guards are written in terms of them
(`guard_expr`, Python text evaluated inside the guard function, whose parameters are the frame's
argument names plus ``___globals`` and ``___closure``), and the output bytecode reloads graph inputs
through them (`reconstruct`).
"""

from __future__ import annotations

from dataclasses import dataclass

from bytecode import CellVar, FreeVar

from . import instructions as ins


__all__ = ["Source", "LocalSource", "GlobalSource", "ClosureSource", "PassedCellSource", "GetItemSource",
           "AttrSource"]


class Source:
    """Base class; subclasses are frozen dataclasses so equal paths compare and hash equal."""

    def guard_expr(self) -> str:
        raise NotImplementedError

    def reconstruct(self, codegen) -> None:
        raise NotImplementedError

    def name(self) -> str:
        """A human-readable name, as used in logs (``L['x']``, ``G['W']``)."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.name()


def guard_parameter(local_name: str) -> str:
    """The guard function's parameter for a local: its own name when that is an identifier (locals
    made by tools, such as pytest's ``@py_assert1``, are not)."""
    if local_name.isidentifier():
        return local_name
    return "___local_" + "".join(ch if ch.isalnum() else "_" for ch in local_name)


@dataclass(frozen=True)
class LocalSource(Source):
    """An argument of the frame. ``is_cell``: the argument is captured by an inner function."""

    local_name: str
    is_cell: bool = False

    def guard_expr(self) -> str:
        return guard_parameter(self.local_name)

    def reconstruct(self, codegen) -> None:
        if self.is_cell:
            codegen.extend(ins.load_deref(CellVar(self.local_name)))
        else:
            codegen.extend(ins.load_fast(self.local_name))

    def name(self) -> str:
        return f"L[{self.local_name!r}]"


@dataclass(frozen=True)
class GlobalSource(Source):
    global_name: str

    def guard_expr(self) -> str:
        return f"___globals[{self.global_name!r}]"

    def reconstruct(self, codegen) -> None:
        codegen.extend(ins.load_global(self.global_name))

    def name(self) -> str:
        return f"G[{self.global_name!r}]"


@dataclass(frozen=True)
class ClosureSource(Source):
    """The contents of free variable number `index` (the function's ``__closure__[index]``)."""

    var_name: str
    index: int

    def guard_expr(self) -> str:
        return f"___closure[{self.index}].cell_contents"

    def reconstruct(self, codegen) -> None:
        codegen.extend(ins.load_deref(FreeVar(self.var_name)))

    def name(self) -> str:
        return f"C[{self.var_name!r}]"


@dataclass(frozen=True)
class PassedCellSource(Source):
    """The contents of the cell a resume function receives as its argument `local_name` (the
    argument slot holds the cell object until the prologue makes it the variable's cell)."""

    local_name: str

    def guard_expr(self) -> str:
        return f"{guard_parameter(self.local_name)}.cell_contents"

    def reconstruct(self, codegen) -> None:
        codegen.extend(ins.load_deref(CellVar(self.local_name)))

    def name(self) -> str:
        return f"L[{self.local_name!r}].cell_contents"


@dataclass(frozen=True)
class ClosureCellSource(Source):
    """The cell object itself of free variable number `index` (not its contents)."""

    var_name: str
    index: int

    def guard_expr(self) -> str:
        return f"___closure[{self.index}]"

    def reconstruct(self, codegen) -> None:
        codegen.extend(ins.load_closure(FreeVar(self.var_name)))

    def name(self) -> str:
        return f"cell C[{self.var_name!r}]"


@dataclass(frozen=True)
class GetItemSource(Source):
    base: Source
    index: object

    def guard_expr(self) -> str:
        return f"{self.base.guard_expr()}[{self.index!r}]"

    def reconstruct(self, codegen) -> None:
        self.base.reconstruct(codegen)
        codegen.extend(ins.load_const(self.index) + ins.binary_subscr())

    def name(self) -> str:
        return f"{self.base.name()}[{self.index!r}]"


@dataclass(frozen=True)
class AttrSource(Source):
    base: Source
    attr: str

    def guard_expr(self) -> str:
        return f"{self.base.guard_expr()}.{self.attr}"

    def reconstruct(self, codegen) -> None:
        self.base.reconstruct(codegen)
        codegen.extend(ins.load_attr(self.attr))

    def name(self) -> str:
        return f"{self.base.name()}.{self.attr}"


@dataclass(frozen=True)
class TypeSource(Source):
    """The type of a value (only guarded: a guard on a class attribute reads it through this)."""

    base: Source

    def guard_expr(self) -> str:
        return f"___type({self.base.guard_expr()})"

    def reconstruct(self, codegen) -> None:
        raise TypeError("the type of a value is only guarded, never rebuilt")

    def name(self) -> str:
        return f"type({self.base.name()})"


@dataclass(frozen=True)
class SizeFactSource(Source):
    """Not a value: the subject of a SIZE_FACT guard, a condition over input sizes that a
    compile with dynamic shapes relied on (``text``: ``x.shape[0] == y.shape[0]``)."""

    text: str

    def guard_expr(self) -> str:
        return self.text

    def reconstruct(self, codegen) -> None:
        raise TypeError("a size fact is not a value")

    def name(self) -> str:
        return self.text
