"""Abstract values of the loop-nest lowering: what the interpreter of a loop's bytecode
(`loop_nest.lower`, `loop_nest.opcodes`) holds on its stack and in its locals.

Scalars are `scalars.SVal`; the others here: an array (`AVal`), a range and its iterator, a
value known when compiling (`Static`: a module, a function), the call convention's NULL, a tuple
of indices and an array's ``.shape``. `State` is the stack and the locals at one point, and
`merge_local`/`merge_value` join two paths (a family that differs refuses the loop; a tag or a
bound that differs becomes a run-time one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .ir import ArrTy, Ty
from .scalars import Refuse, SVal

__all__ = ["AVal", "RangeV", "IterV", "ItemsV", "ItemIterV", "Static", "Null", "NULL", "TupleV",
           "ShapeV", "MethodV", "State", "Unbound", "SliceIdx", "SliceV", "ElemExpr", "merge_local",
           "merge_value"]


@dataclass(frozen=True)
class AVal:
    """An array (a C ``npd_arr`` variable)."""
    ty: ArrTy
    c: str


@dataclass(frozen=True)
class RangeV:
    start: str
    stop: str
    step: str


@dataclass(frozen=True)
class IterV:
    """A range iterator: the next value, the stop and the step (C expressions)."""
    n: str
    stop: str
    step: str


@dataclass(frozen=True)
class ItemsV:
    """What a ``for`` loop iterates over 1-d arrays (`items`): ``a``, ``zip(a, b, ...)``, or
    either enumerated (from `start`, a literal)."""
    arrs: tuple
    enum: bool
    zipped: bool
    start: int = 0


@dataclass(frozen=True)
class ItemIterV:
    """Its iterator: the next index (a C expression) and the arrays (`AVal`s, as they were
    when the loop started: rebinding a local later does not change what it iterates)."""
    n: str
    arrs: tuple
    enum: bool
    zipped: bool
    start: int = 0


@dataclass(frozen=True)
class Static:
    """A value known when compiling: a module, a function, a type."""
    obj: Any


@dataclass(frozen=True)
class MethodV:
    """``v.<name>`` of an array or a view, waiting for its call (``x[:i].sum()``)."""
    name: str
    obj: Any


@dataclass(frozen=True)
class Null:
    pass


@dataclass(frozen=True)
class TupleV:
    items: tuple


@dataclass(frozen=True)
class ShapeV:
    arr: AVal


@dataclass(frozen=True)
class SliceIdx:
    """``start:stop`` inside an index (each an int value or None)."""
    start: Any
    stop: Any


@dataclass(frozen=True)
class SliceV:
    """A view of an array (`slices.slice_view`): C expressions of its first element's address,
    and per axis its length and its stride in bytes."""
    ptr: str
    shape: tuple
    strides: tuple
    base: AVal

    @property
    def n(self) -> str:
        return self.shape[0]

    @property
    def stride(self) -> str:
        return self.strides[0]


@dataclass(frozen=True)
class ElemExpr:
    """An elementwise float64 expression over views of one shape and scalars, not computed
    yet (`elementwise`): ("view", SliceV), ("scalar", C double), (op, left, right), ("neg", x)."""
    tree: tuple
    shape: tuple


NULL = Null()


# (a local's state: (type or None when unbound, bound: "yes" | "no" | "maybe"))
def merge_local(a, b):
    (ta, ba), (tb, bb) = a, b
    bound = ba if ba == bb else "maybe"
    if ta is None or tb is None:
        return (ta or tb), bound
    if isinstance(ta, ArrTy) or isinstance(tb, ArrTy):
        if ta != tb:
            raise Refuse(f"a local holds {ta} on one path and {tb} on another")
        return ta, bound
    if ta.fam != tb.fam:
        raise Refuse(f"a local holds a {ta} on one path and a {tb} on another")
    return Ty(ta.fam, ta.tag if ta.tag == tb.tag else "rt"), bound


def merge_value(a, b):
    if isinstance(a, SVal) and isinstance(b, SVal):
        if a.ty.fam != b.ty.fam:
            raise Refuse("a stack value of two types where paths join")
        return SVal(Ty(a.ty.fam, a.ty.tag if a.ty.tag == b.ty.tag else "rt"), a.c)
    if type(a) is type(b) and (not isinstance(a, Static) or a.obj is b.obj) and (
            not isinstance(a, AVal) or a.ty == b.ty):
        return a
    raise Refuse("paths join with different values on the stack")


class Unbound(Exception):
    """A local read where no path has bound it: Python raises UnboundLocalError there."""


@dataclass
class State:
    stack: list
    locals: dict  # name -> (type | None, bound)

    def copy(self) -> "State":
        return State(list(self.stack), dict(self.locals))
