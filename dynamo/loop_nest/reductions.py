"""Reductions of a 1-d view in a loop kernel: ``x.sum()``, ``x.max()``, ``x.min()`` and
``np.sum``/``np.max``/``np.min`` (``np.amax``, ``np.amin``) of them.

In: the reduction's name and its argument, a whole 1-d array or a 1-d slice (``A[i, :j]``,
``x[lo:hi]``: `slices.slice_view`) of float64 or int64; the emitter of `lower._Lowering`.
Out: the result, a NumPy scalar of the array's dtype, as ``a.sum()`` gives it.

The result is NumPy's own, bit for bit: the kernel calls NumPy's inner loop of ``np.add``
(``np.maximum``, ``np.minimum``) for the dtype, entry k of the kernel's table of NumPy loops
(``npd_reduce``: a sum starts at 0 and folds every element into it in one call of the loop,
which is NumPy's pairwise summation; a maximum or minimum starts at the first element and
folds the rest). That this is what NumPy's reduce computes is checked once per process on
probes of many lengths, strides and special values (`backends.c.numpy_loops.reduce_loop`); a
NumPy where it is not (NumPy 2.2 sums a float64 vector ``np.getbufsize()`` elements at a
time) refuses the loop when its kernel is built. A maximum or minimum of no elements is
NumPy's ValueError: the kernel deoptimises there. A float sum that overflows or makes a NaN
from numbers raises the IEEE flags the kernel tests, so Python runs that iteration and NumPy
warns. ``axis=``, ``dtype=`` and arrays of other dtypes or more dimensions are refused.
"""

from __future__ import annotations

import numpy as np

from . import scalars as S
from .ir import DTYPES, Ty
from .scalars import Refuse, SVal
from .slices import slice_view
from .values import AVal, SliceV

__all__ = ["REDUCTIONS", "METHODS", "reduce"]

#: what each reduction folds with
REDUCTIONS = {"sum": np.add, "max": np.maximum, "min": np.minimum}
#: NumPy functions that are a reduction of their one argument
METHODS = {np.sum: "sum", np.max: "max", np.min: "min", np.amax: "max", np.amin: "min"}


def reduce(em, name: str, v) -> SVal:
    """``v.<name>()`` of a 1-d array or view `v` (see the module docstring)."""
    if isinstance(v, AVal):
        if v.ty.ndim != 1:
            raise Refuse(f".{name}() of a {v.ty.ndim}-d array (only 1-d views are reduced)")
        v = slice_view(em, v, ())
    if not isinstance(v, SliceV) or len(v.shape) != 1:
        raise Refuse(f".{name}() of something other than a 1-d array or slice")
    dt = v.base.ty.dtype
    fam = DTYPES[dt]
    if fam == "bool":
        raise Refuse(f".{name}() of a bool array")
    k = em.ufunc_slot(REDUCTIONS[name], f"{dt.char}{dt.char}->{dt.char}", name)
    if name != "sum":
        em.check(f"({v.n} == 0)", f"{name}() of an empty array (ValueError: no identity)")
    fn = f"npd_{'sum' if name == 'sum' else 'fold'}_{'f64' if fam == 'float' else 'i64'}"
    expr = f"{fn}({k}, {v.ptr}, {v.n}, {v.stride})"
    if fam == "float":
        return S.float_result(em, ("np", None), expr)
    t = em.temp("long long")
    em.assign(t, expr)
    return SVal(Ty("int", "np"), t)
