"""``for`` loops over the elements of 1-d arrays: ``for v in a``, ``for i, v in enumerate(a)``,
the rows of an array (``for row in A``: each a view, ``A[i]``, as iterating an ndarray gives),
``for u, v in zip(a, b)``, ``for i, (u, v) in enumerate(zip(a, b), 1)``.

In: the lowering (`lower._Lowering`), at ``enumerate``/``zip`` calls, GET_ITER and FOR_ITER.
Out: `values.ItemsV` / `values.ItemIterV` and the statements of one step: the next index
against the shortest array's length, the elements read there (NumPy scalars of the arrays'
dtypes, as iterating an ndarray gives) or the row (an ``npd_arr`` of the row's memory, which
knows which row of which input it is: boxed as ``A[i]`` when it comes back to Python; a row of
a row deoptimises), the tuple ``enumerate``/``zip`` make.

An iterator reads the element when it steps, as Python's does (a write to ``a[i + 1]`` in the
body is seen by the next step), and keeps the arrays it started with. When the outermost loop
is one of these and the kernel deoptimises, it hands back the next index and the arrays, and
`rest` rebuilds what Python iterates on from there: ``a[n:]``, ``zip(a[n:], b[n:])``,
``enumerate(..., n + start)``. Views of the same memory, so the values come as the original
iterator would have given them.
"""

from __future__ import annotations

import re
from typing import Any

from .. import compat
from . import inline
from .ir import CTYPE, DTYPES, ArrTy, Ty
from .scalars import Refuse, SVal
from .values import AVal, ItemIterV, ItemsV, State, TupleV

__all__ = ["make", "start", "step", "rest", "MAX_OUTER"]

#: arrays the outermost loop may zip (their ids travel back in the kernel's range slots)
MAX_OUTER = 2
_ELEMENT_CTYPE = {"float": "double", "int": "long long", "bool": "unsigned char"}
_LITERAL = re.compile(r"-?\d+LL")


def make(kind: str, args: list) -> ItemsV:
    """``enumerate(x)`` or ``zip(x, y, ...)`` of 1-d arrays (or of a zip, enumerated)."""
    if kind == "enumerate":
        if not 1 <= len(args) <= 2:
            raise Refuse("enumerate() of other than one iterable and a start")
        x, start = args[0], _literal_start(args[1]) if len(args) == 2 else 0
        if isinstance(x, ItemsV) and not x.enum:
            return ItemsV(x.arrs, True, x.zipped, start)
        return ItemsV((_array(x, rows=True),), True, False, start)
    if not args:
        raise Refuse("zip() of nothing")
    return ItemsV(tuple(_array(x) for x in args), False, True)


def _literal_start(v) -> int:
    """enumerate()'s start: an int literal of the code (it travels with the nest, so that
    `rest` can count on from it after a deoptimisation)."""
    if isinstance(v, SVal) and v.ty.fam == "int" and _LITERAL.fullmatch(v.c):
        return int(v.c[:-2])
    raise Refuse("enumerate() with a start that is not an int literal")


def _array(x, rows: bool = False) -> AVal:
    """An array iterated over: 1-d, or (`rows`: alone, not zipped) of any ndim."""
    if not isinstance(x, AVal) or x.ty.ndim != 1 and not rows:
        raise Refuse("a for loop over something other than range(), an array or 1-d arrays "
                     "zipped")
    return x


def start(lw, x) -> ItemIterV:
    """GET_ITER of a 1-d array or an `ItemsV`."""
    items = x if isinstance(x, ItemsV) else ItemsV((_array(x, rows=True),), False, False)
    n = lw.temp("long long")
    lw.assign(n, "0LL")
    return ItemIterV(n, items.arrs, items.enum, items.zipped, items.start)


def step(lw, i: int, it: ItemIterV, st: list, state: State):
    """FOR_ITER of an `ItemIterV`: the edges to the loop's exit and to its body."""
    exhausted = lw.instrs.target(i) + compat.loop_exit_skip()
    cond = " || ".join(f"{it.n} >= {a.c}.shape[0]" for a in it.arrs)
    done_state = State(list(st), dict(state.locals))
    body_state = State(list(st), dict(state.locals))
    if lw.emitting:
        here = inline.label(i)
        lw.emit("branch", f"({cond})", f"{here}_done", f"{here}_body")
        lw.emit("label", f"{here}_done")
    edges = [lw.edge(exhausted, done_state)]
    if lw.emitting:
        lw.emit("label", f"{here}_body")
    items = []
    for a in it.arrs:
        if a.ty.ndim > 1:  # (a row: a view of the array, as iterating an ndarray gives)
            lw.check(f"{a.c}.row != 0", "a row of a row (not lowered)")
            t = lw.temp("npd_arr")
            lw.assign(t, f"npd_row({a.c}, {it.n})")
            items.append(AVal(ArrTy(a.ty.dtype, a.ty.ndim - 1), t))
            continue
        fam = DTYPES[a.ty.dtype]
        t = lw.temp(CTYPE[fam])
        lw.assign(t, f"*({_ELEMENT_CTYPE[fam]} *)({a.c}.data + {it.n} * {a.c}.strides[0])")
        items.append(SVal(Ty(fam, "np"), t))
    index, nxt = lw.temp("long long"), lw.temp("long long")
    if it.start:
        lw.check(f"__builtin_add_overflow({it.n}, {it.start}LL, &{index})",
                 "an enumerate() count beyond int64")
    else:
        lw.assign(index, it.n)
    lw.assign(nxt, f"{it.n} + 1")  # (n < a length: no overflow)
    value = TupleV(tuple(items)) if it.zipped else items[0]
    if it.enum:
        value = TupleV((SVal(Ty("int"), index), value))
    body_state.stack.append(ItemIterV(nxt, it.arrs, it.enum, it.zipped, it.start))
    body_state.stack.append(value)
    edges.append(lw.edge(i + 1, body_state))
    return edges


def rest(kind: tuple, n: int, first: Any, second: Any) -> Any:
    """What plain Python iterates on after a deoptimisation at index `n` of the outermost
    loop (`kind`: the nest's ``items``: (arrays, enumerated, zipped, enumerate's start))."""
    narr, enum, zipped, start = kind
    parts = [first[n:]] + ([second[n:]] if narr > 1 else [])
    it = zip(*parts) if zipped else parts[0]
    return enumerate(it, n + start) if enum else it
