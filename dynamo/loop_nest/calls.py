"""Calls inside a loop kernel: the builtins, ``math`` functions and NumPy functions it lowers.

In: the function (known when compiling: the objects the loop's globals name, guarded) and its
arguments' abstract values; the lowering (`lower._Lowering`, as the emitter). Out: the result's
abstract value. ``range`` makes a range (its step checked, ValueError at 0), ``len`` and
``.shape`` read sizes, ``abs``/``int``/``float`` and ``math`` follow `scalars`, ``min``/``max``
of two follow Python's rule (the first of equal ones, NaN as ``<`` sees it), ``np.dot`` is
`slices.dot`. Anything else refuses the loop.
"""

from __future__ import annotations

import math
import types

import numpy as np

from . import scalars as S
from .ir import CTYPE, Ty
from .scalars import Refuse, SVal
from . import items as item_loops
from . import reductions
from .slices import dot
from .values import AVal, MethodV, RangeV, TupleV

__all__ = ["call"]

_BUILTIN_CALLS = {range: "range", len: "len", abs: "abs", min: "min", max: "max", int: "int",
                  float: "float", enumerate: "enumerate", zip: "zip", round: "round",
                  np.float64: "float64"}
#: NumPy's tests of a float (``d->?`` loops: no IEEE flags, C's own answer) -> the C test
_FLOAT_TESTS = {np.isnan: "isnan", np.isinf: "isinf", np.isfinite: "isfinite",
                np.signbit: "signbit"}
_NUMPY_CALLS = {np.sqrt: "sqrt", np.fabs: "fabs", np.floor: "floor", np.ceil: "ceil",
                np.trunc: "trunc"}

def call(self, fn, args: list):
    if isinstance(fn, MethodV):
        if args:
            raise Refuse(f".{fn.name}() with arguments")
        return reductions.reduce(self, fn.name, fn.obj)
    if _hashable(fn) and fn in reductions.METHODS and len(args) == 1:
        return reductions.reduce(self, reductions.METHODS[fn], args[0])
    kind = _BUILTIN_CALLS.get(fn) if _hashable(fn) else None
    if kind == "range":
        if not 1 <= len(args) <= 3:
            raise Refuse("range() with no or too many arguments")
        for a in args:
            if not isinstance(a, SVal) or a.ty.fam != "int" and a.ty != Ty("bool"):
                raise Refuse("range() of something other than ints")
        cs = [a.c for a in args]
        if len(cs) == 1:
            start, stop, step = "0LL", cs[0], "1LL"
        elif len(cs) == 2:
            start, stop, step = cs[0], cs[1], "1LL"
        else:
            start, stop, step = cs
        self.check(f"({step} == 0)", "range() arg 3 must not be zero (ValueError)")
        return RangeV(start, stop, step)
    if kind in ("enumerate", "zip"):
        return item_loops.make(kind, args)
    if kind == "len":
        (a,) = args
        if not isinstance(a, AVal) or a.ty.ndim == 0:
            raise Refuse("len() of something other than an array")
        t = self.temp("long long")
        self.assign(t, f"{a.c}.shape[0]")
        return SVal(Ty("int"), t)
    if kind in ("abs",) and len(args) == 1:
        return S.unary(self, "abs", self.scalar(args[0]))
    if kind in ("int", "float") and len(args) == 1:
        return S.convert(self, kind, self.scalar(args[0]))
    if kind == "float64" and len(args) == 1:  # (np.float64(x) of a number)
        v = S.convert(self, "float", self.scalar(args[0]))
        return SVal(Ty("float", "np"), v.c)
    if kind == "round" and len(args) == 1:
        return S.round_int(self, self.scalar(args[0]))
    if _hashable(fn) and fn in _FLOAT_TESTS and len(args) == 1:
        v = self.scalar(args[0])
        if v.ty.fam != "float":
            raise Refuse(f"numpy.{fn.__name__} of a {v.ty}")
        t = self.temp("int")
        self.assign(t, f"({_FLOAT_TESTS[fn]}({v.c}) != 0)")
        return SVal(Ty("bool", "np"), t)
    if kind in ("min", "max") and len(args) == 2:
        a, b = self.scalar(args[0]), self.scalar(args[1])
        if a.ty.fam != b.ty.fam or "bool" in (a.ty.fam,):
            raise Refuse(f"{kind}() of values of two families")
        # (Python: min(a, b) is b if b < a else a; max(a, b) is b if b > a else a)
        pick = S.compare(self, "<" if kind == "min" else ">", b, a)
        t = self.temp(CTYPE[a.ty.fam])
        self.assign(t, f"({pick.c} ? {b.c} : {a.c})")
        if a.ty.tag == b.ty.tag and a.ty.tag != "rt":
            return SVal(a.ty, t)
        tt = self.temp("int")
        self.assign(tt, f"({pick.c} ? {b.tag_c} : {a.tag_c})")
        return SVal(Ty(a.ty.fam, "rt"), t, tt)
    if getattr(fn, "__module__", None) == "math" or (
            isinstance(fn, types.BuiltinFunctionType) and getattr(fn, "__self__", None) is math):
        name = fn.__name__
        if name in S.MATH_FUNCTIONS and len(args) == 1:
            return S.math_call(self, name, self.scalar(args[0]))
        if fn is math.frexp and len(args) == 1:
            return _frexp(self, self.scalar(args[0]))
        if fn is math.ldexp and len(args) == 2:
            return _ldexp(self, self.scalar(args[0]), self.scalar(args[1]))
    if fn is np.dot and len(args) == 2:
        return dot(self, args[0], args[1], matmul=False)
    if _hashable(fn) and fn in _NUMPY_CALLS and len(args) == 1:
        return S.math_call(self, _NUMPY_CALLS[fn], self.scalar(args[0]), numpy=True)
    if isinstance(fn, np.ufunc) and len(args) == 1:
        return S.ufunc_call(self, self.ufunc_slot(fn), fn.__name__, self.scalar(args[0]))
    if isinstance(fn, np.ufunc) and len(args) == 2:
        a, b = self.scalar(args[0]), self.scalar(args[1])
        _float64_loop(fn, a, b)
        return S.ufunc_call(self, self.ufunc_slot(fn, "dd->d"), fn.__name__, a, b)
    if isinstance(fn, types.FunctionType):
        raise Refuse(f"a call of {fn.__qualname__}(), a function of another module (only the "
                     "loop's own module's functions are inlined)")
    raise Refuse(f"a call of {getattr(fn, '__qualname__', fn)!r}")


#: what NumPy's type resolution sees for a scalar of each kernel type (Python numbers are
#: weak: NEP 50)
_RESOLVED_AS = {("float", "py"): float, ("float", "np"): np.dtype(np.float64),
                ("int", "py"): int, ("int", "np"): np.dtype(np.int64)}


def _float64_loop(fn, a: SVal, b: SVal) -> None:
    """`fn` of `a` and `b` runs NumPy's ``dd->d`` loop, whichever tags they have at run time
    (else `Refuse`: two ints, a bool, another loop)."""
    options = []
    for v in (a, b):
        tags = ("py", "np") if v.ty.tag == "rt" else (v.ty.tag,)
        if (v.ty.fam, tags[0]) not in _RESOLVED_AS:
            raise Refuse(f"numpy.{fn.__name__} of a {v.ty}")
        options.append([_RESOLVED_AS[v.ty.fam, t] for t in tags])
    for x in options[0]:
        for y in options[1]:
            try:
                found = fn.resolve_dtypes((x, y, None))
            except Exception:  # noqa: BLE001 - NumPy raises several types here
                found = None
            if found is None or any(d != np.dtype(np.float64) for d in found):
                raise Refuse(f"numpy.{fn.__name__} of a {a.ty} and a {b.ty} (NumPy's loop for "
                             "them is not float64's)")


def _hashable(x) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True


def _frexp(em, v: SVal) -> TupleV:
    """``math.frexp(v)``: (mantissa, exponent), C's frexp (exact); an infinity or NaN (where
    C leaves the exponent unspecified) goes back to Python."""
    x = S.convert(em, "float", v).c
    em.check(f"!isfinite({x})", "math.frexp of an infinity or a NaN")
    e = em.temp("int")
    m = em.temp("double")
    em.assign(m, f"frexp({x}, &{e})")
    k = em.temp("long long")
    em.assign(k, f"(long long){e}")
    return TupleV((SVal(Ty("float"), m), SVal(Ty("int"), k)))


def _ldexp(em, v: SVal, i: SVal) -> SVal:
    """``math.ldexp(v, i)``: C's ldexp (exact; an overflow raises the IEEE flag, Python's
    OverflowError)."""
    if i.ty.fam == "float":
        raise Refuse("math.ldexp with a float exponent raises TypeError")
    x = S.convert(em, "float", v).c
    em.check(f"({i.c} > 100000 || {i.c} < -100000)", "math.ldexp with a huge exponent")
    r = em.temp("double")
    em.assign(r, f"npd_keep(ldexp({x}, (int){i.c}))")
    return SVal(Ty("float"), r)
