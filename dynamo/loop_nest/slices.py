"""Slices of arrays in a loop kernel, and the dot products over them.

In: an array (`values.AVal`) and an index holding one slice (``A[i, :j]``, ``A[:j, j]``,
``x[:i]``), or two such slices under ``np.dot`` or ``@``; the emitter of `lower._Lowering`. Out:
a view (`values.SliceV`: first element's address, lengths, strides) of a float64 or int64 array
(its users check the dtype: `reductions` takes both, the others float64) or the dot product, a
NumPy float64.

A slice's bounds are Python's: ``None`` is the start or the end, a negative bound counts from
the end, then both are clipped to the axis; the length is never negative. Only steps of 1.

The dot product is NumPy's own, bit for bit. NumPy computes a float64 vector product with its
BLAS (``DOUBLE_dot``: ``0.0 + cblas_ddot(n, x, incx, y, incy)`` when both strides are positive
multiples of 8, a sequential sum otherwise), so the kernel calls the same ``cblas_ddot`` of the
same library, which `backends.c.c_loop_nest` finds in NumPy's bundled OpenBLAS (no BLAS found:
the loop is not lowered). ``np.dot`` of two vectors of length 1 is their product (NumPy's
scalar path: ``-0.0`` stays ``-0.0``); ``@`` goes through ``DOUBLE_dot`` for every length.
Lengths that differ (a ValueError), other strides and other dtypes deoptimise or refuse.
"""

from __future__ import annotations

import numpy as np

from .ir import ArrTy, Ty
from .scalars import Refuse, SVal
from .values import AVal, SliceIdx, SliceV

__all__ = ["slice_view", "part", "dot"]


def _bound(em, v, default: str, dim: str) -> str:
    """A start or stop clipped as Python clips it, for an axis of length `dim`."""
    if v is None:
        return default
    if not isinstance(v, SVal) or v.ty.fam != "int":
        raise Refuse("a slice bound that is not an int")
    t = em.temp("long long")
    em.assign(t, f"({v.c} < 0 ? ({v.c} + {dim} < 0 ? 0 : {v.c} + {dim}) : "
                 f"({v.c} > {dim} ? {dim} : {v.c}))")
    return t


def slice_view(em, arr: AVal, items: tuple) -> SliceV:
    """``arr[items]``: slices and ints, one per axis (a missing trailing one is ``:``)."""
    if arr.ty.dtype not in (np.dtype(np.float64), np.dtype(np.int64)):
        raise Refuse("a slice of an array other than float64 or int64")
    items = tuple(items) + (SliceIdx(None, None),) * (arr.ty.ndim - len(items))
    if len(items) != arr.ty.ndim:
        raise Refuse("more indices than the array has axes")
    parts, shape, strides = [], [], []
    for k, item in enumerate(items):
        dim = f"{arr.c}.shape[{k}]"
        if isinstance(item, SliceIdx):
            start = _bound(em, item.start, "0LL", dim)
            stop = _bound(em, item.stop, dim, dim)
            n = em.temp("long long")
            em.assign(n, f"({stop} > {start} ? {stop} - {start} : 0)")
            parts.append(f"{start} * {arr.c}.strides[{k}]")
            shape.append(n)
            strides.append(f"{arr.c}.strides[{k}]")
            continue
        if not isinstance(item, SVal) or item.ty.fam != "int":
            raise Refuse("an array index that is not an int")
        t = em.temp("long long")
        em.assign(t, f"({item.c} < 0 ? {item.c} + {dim} : {item.c})")
        em.check(f"((unsigned long long){t} >= (unsigned long long){dim})",
                 "index out of range (IndexError)")
        parts.append(f"{t} * {arr.c}.strides[{k}]")
    ptr = em.temp("char *")
    em.assign(ptr, f"{arr.c}.data + " + " + ".join(parts))
    return SliceV(ptr, tuple(shape), tuple(strides), arr)


def part(em, arr: AVal, items: tuple):
    """``arr[items]`` with fewer indices than axes, or slices: ``A[i]`` of an array of two or
    more axes is its row (an `AVal` of the row's memory, as ``for row in A`` gives: it may be
    a local, an argument of an inlined call, iterated, indexed again), anything else a view
    (`slice_view`)."""
    if len(items) == 1 and arr.ty.ndim > 1 and isinstance(items[0], SVal):
        i = items[0]
        if i.ty.fam != "int":
            raise Refuse("an array index that is not an int")
        t = em.temp("long long")
        em.assign(t, f"({i.c} < 0 ? {i.c} + {arr.c}.shape[0] : {i.c})")
        em.check(f"((unsigned long long){t} >= (unsigned long long){arr.c}.shape[0])",
                 "index out of range (IndexError)")
        em.check(f"{arr.c}.row != 0", "a row of a row (not lowered)")
        row = em.temp("npd_arr")
        em.assign(row, f"npd_row({arr.c}, {t})")
        return AVal(ArrTy(arr.ty.dtype, arr.ty.ndim - 1), row)
    return slice_view(em, arr, items)


def dot(em, a, b, matmul: bool) -> SVal:
    """``np.dot(a, b)`` (`matmul` False) or ``a @ b`` of two float64 vector slices."""
    a, b = (slice_view(em, v, ()) if isinstance(v, AVal) else v for v in (a, b))
    if not (isinstance(a, SliceV) and isinstance(b, SliceV) and len(a.shape) == len(b.shape) == 1
            and a.base.ty.dtype == b.base.ty.dtype == np.dtype(np.float64)):
        raise Refuse("a dot product of values other than two float64 vector slices")
    em.uses_blas = True
    em.check(f"({a.n} != {b.n})", "vectors of different lengths (ValueError)")
    em.check(f"({a.n} > 1 && ({a.stride} <= 0 || {a.stride} % 8 != 0 || {b.stride} <= 0 || "
             f"{b.stride} % 8 != 0))", "strides NumPy would not give to its BLAS as they are")
    r = em.temp("double")
    blas = (f"0.0 + npd_ddot({a.n}, (const double *){a.ptr}, {a.stride} / 8, "
            f"(const double *){b.ptr}, {b.stride} / 8)")
    one = (f"(*(const double *){a.ptr}) * (*(const double *){b.ptr})" if not matmul else blas)
    # (an overflow or invalid value raises the IEEE flags the kernel tests: `scalars`)
    em.assign(r, f"npd_keep({a.n} == 0 ? 0.0 : {a.n} == 1 ? {one} : {blas})")
    return SVal(Ty("float", "np"), r)
