"""Array statements inside a loop kernel: ``u[1:-1] = 0.5 * (u[:-2] + u[2:])``,
``A[i, 1:-1] += B[i, :-2] - B[i, 2:]``, over float64 views of any shape.

In: views (`values.SliceV`), scalars and the operators between them, then the statement that
stores the result into a view (``=``) or updates one in place (``+=`` ...). Out: `values.ElemExpr`
for the expression (nothing computed yet), and for the statement the emitted loops.

NumPy's order, exactly: the right side is computed in full first (NumPy makes a temporary
array per operation; the kernel one scratch buffer for the whole expression, element by
element, each element's operations in the expression's order, which gives the same numbers
since every operation is elementwise), then stored, or combined with the target in place,
element by element. So a right side that reads the target (``u[1:-1] = u[:-2] + u[2:]``) sees
it as it was, as in NumPy. Views of other shapes (NumPy broadcasts them, or raises) and every
element where NumPy would warn (an overflow, an invalid value, a division by zero)
deoptimise; the target's elements written before that are put back by the undo log.
"""

from __future__ import annotations

import numpy as np

from .scalars import BIG, Refuse, SVal
from .values import ElemExpr, SliceV

__all__ = ["combine", "store_view", "is_elementwise"]

_OPS = {"+", "-", "*", "/"}


def is_elementwise(v) -> bool:
    return isinstance(v, (SliceV, ElemExpr))


def _scalar_double(em, v: SVal) -> str:
    if v.ty.fam == "bool" and v.ty.tag != "py":
        raise Refuse("a NumPy bool in an array expression")
    if v.ty.fam == "float":
        return v.c
    em.check(f"({v.c} > {BIG}LL || {v.c} < -{BIG}LL)", "an int beyond 2**53 in an array expression")
    return f"(double){v.c}"


def _float64(view: SliceV) -> None:
    if view.base.ty.dtype != np.dtype(np.float64):
        raise Refuse(f"an array expression over a {view.base.ty.dtype} array (only float64)")


def _leaf(em, v):
    if isinstance(v, ElemExpr):
        return v.tree, v.shape
    if isinstance(v, SliceV):
        _float64(v)
        return ("view", v), v.shape
    if isinstance(v, SVal):
        return ("scalar", _scalar_double(em, v)), None
    raise Refuse(f"a {type(v).__name__} in an array expression")


def _same_shape(em, a: tuple | None, b: tuple | None) -> tuple | None:
    if a is None or b is None:
        return a or b
    if len(a) != len(b):
        raise Refuse("array expressions of different numbers of axes (broadcasting)")
    for x, y in zip(a, b):
        em.check(f"({x} != {y})", "array shapes differ (NumPy broadcasts or raises)")
    return a


def combine(em, op: str, a, b) -> ElemExpr:
    """``a op b`` where one side is a view or an expression."""
    if op not in _OPS:
        raise Refuse(f"the operator {op} on arrays is not lowered")
    ta, sa = _leaf(em, a)
    tb, sb = _leaf(em, b)
    return ElemExpr((op, ta, tb), _same_shape(em, sa, sb))


def negate(em, a) -> ElemExpr:
    ta, sa = _leaf(em, a)
    return ElemExpr(("neg", ta), sa)


def _element(em, tree, index: list[str]) -> str:
    """Emit the computation of one element of `tree` at `index`; the C variable holding it."""
    kind = tree[0]
    if kind == "scalar":
        return tree[1]
    if kind == "view":
        view = tree[1]
        off = " + ".join(f"{q} * {st}" for q, st in zip(index, view.strides))
        t = em.temp("double")
        em.assign(t, f"*(double *)({view.ptr} + {off})")
        return t
    if kind == "neg":
        x = _element(em, tree[1], index)
        t = em.temp("double")
        em.assign(t, f"-{x}")
        return t
    x = _element(em, tree[1], index)
    y = _element(em, tree[2], index)
    return _op(em, kind, x, y)


def _op(em, op: str, x: str, y: str) -> str:
    """(NumPy's warnings are the IEEE flags the kernel tests: `scalars`.)"""
    t = em.temp("double")
    em.assign(t, f"npd_keep({x} {op} {y})")
    return t


def _loops(em, shape: tuple, body) -> None:
    """Emit ``for q0 < shape[0]: for q1 < shape[1]: ... body(index)`` as labels and jumps."""
    tag = f"E{len(em.stmts)}"
    index = [em.temp("long long") for _ in shape]
    for d, q in enumerate(index):
        em.assign(q, "0")
        em.emit("label", f"{tag}_head{d}")
        em.emit("branch", f"({q} < {shape[d]})", f"{tag}_body{d}", f"{tag}_done{d}")
        em.emit("label", f"{tag}_body{d}")
    body(index)
    for d in reversed(range(len(shape))):
        em.assign(index[d], f"{index[d]} + 1")
        em.emit("goto", f"{tag}_head{d}")
        em.emit("label", f"{tag}_done{d}")


def store_view(em, target: SliceV, value, inplace: str | None = None) -> None:
    """``target[...] = value`` (`inplace` None) or ``target op= value``, element by element
    after the whole right side is computed (see the module docstring)."""
    em.dirty = True
    _float64(target)
    if isinstance(value, SVal) and inplace is None:
        tree, shape = ("scalar", _scalar_double(em, value)), target.shape
    else:
        tree, shape = _leaf(em, value)
        shape = _same_shape(em, target.shape, shape or target.shape)
    size = em.temp("long long")
    em.assign(size, " * ".join(f"{n}" for n in shape) or "1")
    em.check(f"npd_scratch_reserve(&scratch, {size})", "out of memory for the scratch buffer")
    k = em.temp("long long")
    em.assign(k, "0")

    def compute(index):
        em.assign(f"scratch.data[{k}]", _element(em, tree, index))
        em.assign(k, f"{k} + 1")

    _loops(em, shape, compute)
    em.assign(k, "0")
    base = target.base
    # (the target's old values logged as blocks, once, before the first store: its stores
    # are then plain; a read-only target deoptimises before any)
    em.check(f"!{base.c}.writeable", "assignment into a read-only array (ValueError)")
    em.emit("logview", target.ptr, tuple(shape), tuple(target.strides))

    def store(index):
        off = " + ".join(f"{q} * {st}" for q, st in zip(index, target.strides))
        where = f"({target.ptr} - {base.c}.data) + {off}"
        value_c = f"scratch.data[{k}]"
        if inplace is not None:
            old = em.temp("double")
            em.assign(old, f"*(double *)({target.ptr} + {off})")
            value_c = _op(em, inplace, old, value_c)
        em.emit("put", base.c, where, ("double", value_c))
        em.assign(k, f"{k} + 1")

    _loops(em, shape, store)
