"""Operator rules of the loop-nest IR: what Python and NumPy compute for scalar operations, as C,
with a check wherever the C would not do the same.

In: typed scalar values (`SVal`: type, C expression, run-time tag) and an emitter (`Emit`:
``temp``, ``assign``, ``check``), from `loop_nest.lower`. Out: the result value; the statements
(assignments and deoptimisation checks) are emitted on the way.

The rule everywhere: compute in C only what is bit for bit what Python or NumPy computes, and
*check* (deoptimise, so that plain Python runs the iteration again and raises or warns itself)
wherever they would not give a plain number:

* Python ints are int64: every ``+ - * // % ** << abs -`` checks for overflow (Python would give
  a big int; NumPy int64 would warn "overflow").
* Floats: a division or modulo by zero is checked (Python raises ZeroDivisionError, even for a
  NaN divided by zero). A NaN made from non-NaN operands, an infinity from finite ones, a
  division of a number by zero: the CPU's IEEE flags (invalid, overflow, divide-by-zero) record
  them, as NumPy's own loops do, and the kernel tests the flags at the start of each iteration
  of the outermost loop, before it leaves, and every 256 iterations of an inner loop (the
  kernel saves the program's flags when it starts and puts them back when it returns). The
  result of every float operation goes through ``npd_keep`` (an empty ``asm``), so the compiler
  never drops an unused one: each sets its flags at run time, where Python computes it (the C
  writer lifts it where a branch, a check or a store reads the result: `c_loop_source`). The
  checks do not depend on the tag: a Python float that overflows (no error in Python) is rerun
  in Python too, which only costs time.
* Mixed int and float: an int beyond 2**53 (where Python's exact comparison and true division
  differ from a conversion to double).
* ``math`` functions call the same C library function CPython calls, so the bits are CPython's;
  CPython's error rule (``math_1``: a NaN from a non-NaN argument is a ValueError, an infinity
  from a finite one an OverflowError) is the IEEE flags' rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from .ir import CTYPE, Ty

__all__ = ["SVal", "Emit", "Refuse", "float_result", "binary", "compare", "unary", "truth",
           "convert", "round_int", "math_call", "combine_tags", "MATH_FUNCTIONS", "BIG"]

#: beyond this, an int64 converts to double inexactly (Python compares and divides exactly)
BIG = 1 << 53


class Refuse(Exception):
    """The loop cannot be lowered; the message says which construct and why."""


class Emit(Protocol):
    def temp(self, ctype: str) -> str: ...
    def assign(self, dst: str, expr: str) -> None: ...
    def check(self, cond: str, why: str) -> None: ...


@dataclass(frozen=True)
class SVal:
    """A scalar value: its type, the C expression of its value and, for a run-time tag, the C
    expression of the tag (0: Python object, 1: NumPy scalar)."""

    ty: Ty
    c: str
    tagx: str | None = None

    @property
    def tag_c(self) -> str:
        return {"py": "0", "np": "1"}.get(self.ty.tag, self.tagx or "0")


def combine_tags(*vals: SVal) -> tuple[str, str | None]:
    """The tag of a result: NumPy if any operand is a NumPy scalar."""
    tags = {v.ty.tag for v in vals}
    if tags <= {"py", "np"}:
        return ("np" if "np" in tags else "py"), None
    return "rt", "(" + " | ".join(v.tag_c for v in vals) + ")"


def _new(em: Emit, fam: str, tag: tuple[str, str | None], expr: str) -> SVal:
    dst = em.temp(CTYPE[fam])
    em.assign(dst, expr)
    if tag[0] == "rt":
        tdst = em.temp("int")
        em.assign(tdst, tag[1])
        return SVal(Ty(fam, "rt"), dst, tdst)
    return SVal(Ty(fam, tag[0]), dst)


def _numeric(v: SVal, op: str) -> None:
    if v.ty.fam == "bool" and v.ty.tag != "py":
        raise Refuse(f"{op} on a NumPy bool is not lowered (NumPy's bool arithmetic is logic)")


def _as_double(em: Emit, v: SVal) -> str:
    if v.ty.fam == "float":
        return v.c
    em.check(f"({v.c} > {BIG}LL || {v.c} < -{BIG}LL)", "an int beyond 2**53 next to a float")
    return f"(double){v.c}"


def float_result(em: Emit, tag: tuple[str, str | None], expr: str) -> SVal:
    """A float result, kept (see the module docstring: its IEEE flags are tested later)."""
    return _new(em, "float", tag, f"npd_keep({expr})")



_INT_OPS = {"+": "__builtin_add_overflow", "-": "__builtin_sub_overflow",
            "*": "__builtin_mul_overflow"}


def binary(em: Emit, op: str, a: SVal, b: SVal) -> SVal:
    """``a op b`` for a Python operator symbol (``+ - * / // % ** & | ^ << >>``)."""
    _numeric(a, op)
    _numeric(b, op)
    tag = combine_tags(a, b)
    fams = {a.ty.fam, b.ty.fam}
    if op == "/":
        x, y = _as_double(em, a), _as_double(em, b)
        em.check(f"({y} == 0.0)", "division by zero")
        return float_result(em, tag, f"{x} / {y}")
    if "float" in fams:
        if op in ("&", "|", "^", "<<", ">>"):
            raise Refuse(f"{op} of a float raises TypeError")
        x, y = _as_double(em, a), _as_double(em, b)
        if op in ("+", "-", "*"):
            return float_result(em, tag, f"{x} {op} {y}")
        if op in ("//", "%"):
            em.check(f"({y} == 0.0)", "floor division or modulo by zero")
            fn = "npd_floordiv_f64" if op == "//" else "npd_mod_f64"
            return float_result(em, tag, f"{fn}({x}, {y})")
        if op == "**":
            # (Python: a negative base to a fractional power is complex; 0 to a negative power
            # raises; NumPy warns: both left to Python)
            em.check(f"(({x} < 0.0 && {y} != floor({y})) || ({x} == 0.0 && {y} < 0.0))",
                     "a power Python makes complex or an error")
            return float_result(em, tag, f"npd_pow({x}, {y})")
        raise Refuse(f"operator {op} on floats is not lowered")
    # ints and Python bools (as ints)
    if op in _INT_OPS:
        r = _new(em, "int", tag, "0")
        em.check(f"{_INT_OPS[op]}({a.c}, {b.c}, &{r.c})", f"int64 overflow in {op}")
        return r
    if op in ("//", "%", "**"):
        fn = {"//": "npd_floordiv_i64", "%": "npd_mod_i64", "**": "npd_pow_i64"}[op]
        r = _new(em, "int", tag, "0")
        em.check(f"{fn}({a.c}, {b.c}, &{r.c})",
                 "division by zero, overflow or a negative power of an int")
        return r
    if op in ("&", "|", "^"):
        # (two Python bools give a bool: True & False is False)
        fam = "bool" if a.ty == b.ty == Ty("bool") else "int"
        return _new(em, fam, tag, f"({a.c} {op} {b.c})")
    if op == "<<":
        em.check(f"({b.c} < 0 || {b.c} > 62 || ({a.c} != (({a.c} << {b.c}) >> {b.c})))",
                 "a shift Python makes a big int, or a negative shift")
        return _new(em, "int", tag, f"({a.c} << {b.c})")
    if op == ">>":
        em.check(f"({b.c} < 0)", "negative shift count")
        return _new(em, "int", tag, f"({b.c} > 63 ? ({a.c} < 0 ? -1LL : 0LL) : ({a.c} >> {b.c}))")
    raise Refuse(f"operator {op} is not lowered")


_CMP = {"<": "<", "<=": "<=", "==": "==", "!=": "!=", ">": ">", ">=": ">="}


def compare(em: Emit, op: str, a: SVal, b: SVal) -> SVal:
    """``a op b`` for a comparison: a bool (a NumPy bool when a NumPy scalar takes part)."""
    tag = combine_tags(a, b)
    if "float" in (a.ty.fam, b.ty.fam):
        x, y = _as_double(em, a), _as_double(em, b)
    else:
        x, y = a.c, b.c
    return _new(em, "bool", tag, f"({x} {_CMP[op]} {y})")


def truth(v: SVal) -> str:
    """The C condition for ``if v:`` (a NaN is true, as in Python)."""
    return f"({v.c} != 0)"


def unary(em: Emit, op: str, v: SVal) -> SVal:
    """``-v``, ``+v``, ``~v``, ``abs(v)``, ``not v``."""
    if op == "not":
        return _new(em, "bool", ("py", None), f"!{truth(v)}")
    _numeric(v, op)
    if op == "~" and v.ty.fam == "bool":
        raise Refuse("~ of a bool (deprecated in Python 3.12: a DeprecationWarning)")
    fam = "int" if v.ty.fam == "bool" else v.ty.fam
    tag = combine_tags(v)
    if fam == "float":
        expr = {"-": f"-{v.c}", "+": v.c, "abs": f"fabs({v.c})"}.get(op)
        if expr is None:
            raise Refuse(f"{op} of a float raises TypeError")
        return float_result(em, tag, expr)
    if op in ("-", "abs"):
        em.check(f"({v.c} == LLONG_MIN)", "int64 overflow in negation")
    expr = {"-": f"-{v.c}", "+": v.c, "~": f"~{v.c}", "abs": f"llabs({v.c})"}[op]
    return _new(em, "int", tag, expr)


def convert(em: Emit, to: str, v: SVal) -> SVal:
    """``int(v)``, ``float(v)``: Python objects."""
    if to == "float":
        return _new(em, "float", ("py", None), _as_double(em, v))
    if v.ty.fam == "float":
        em.check(f"!({v.c} > -9.2e18 && {v.c} < 9.2e18)", "int() of a NaN, an infinity or a big "
                 "float")
        return _new(em, "int", ("py", None), f"(long long){v.c}")
    return _new(em, "int", ("py", None), v.c)


def round_int(em: Emit, v: SVal) -> SVal:
    """``round(v)``: a Python int; a float rounds half to even (C's ``nearbyint`` in the
    default rounding mode), and a NaN, an infinity or a float past int64 deoptimises (Python
    raises ValueError or OverflowError, or makes a big int)."""
    if v.ty.fam == "bool" and v.ty.tag != "py":
        raise Refuse("round() of a NumPy bool")
    if v.ty.fam != "float":
        return _new(em, "int", ("py", None), v.c)
    em.check(f"!({v.c} > -9.2e18 && {v.c} < 9.2e18)", "round() of a NaN, an infinity or a big "
             "float")
    return _new(em, "int", ("py", None), f"(long long)nearbyint({v.c})")


#: math functions lowered (CPython calls the same C function, with `math_1`'s error rule),
#: and those that return an int
MATH_FUNCTIONS = {"sqrt", "exp", "log", "sin", "cos", "tan", "atan", "tanh", "sinh", "cosh",
                  "asin", "acos", "fabs", "log10", "log2", "expm1", "log1p", "floor", "ceil",
                  "trunc"}
_INT_RESULT = {"floor", "ceil", "trunc"}


def math_call(em: Emit, name: str, v: SVal, numpy: bool = False) -> SVal:
    """``math.name(v)`` (a Python float, or an int for floor/ceil/trunc), or with `numpy`
    ``np.sqrt``/``np.abs``... on a scalar (NumPy's scalar result: float64)."""
    if numpy and v.ty.fam == "bool":
        raise Refuse(f"numpy.{name} of a bool (NumPy computes it in float16)")
    x = _as_double(em, v)
    if numpy:
        if name not in ("sqrt", "fabs", "floor", "ceil", "trunc"):
            raise Refuse(f"numpy.{name} on a scalar is not lowered (NumPy's own loop computes "
                         "other bits than the C library)")
        return float_result(em, ("np", None), f"{name}({x})")
    if name in _INT_RESULT:
        em.check(f"!({x} > -9.2e18 && {x} < 9.2e18)", f"math.{name} of a NaN, an infinity or a "
                 "big float")
        return _new(em, "int", ("py", None), f"(long long){name}({x})")
    return float_result(em, ("py", None), f"{name}({x})")


def ufunc_call(em: Emit, k: int, name: str, v: SVal, w: SVal | None = None) -> SVal:
    """``np.<name>(v)`` of a float, or ``np.<name>(v, w)`` of numbers NumPy computes in float64
    (the caller checks NumPy's type resolution), through NumPy's own float64 loop of that ufunc
    (entry `k` of the kernel's table: ``npd_ufunc1``/``npd_ufunc2``), called on one element as
    NumPy calls it for a scalar: NumPy's bits and IEEE flags, whatever SIMD code it picked for
    this CPU."""
    if w is not None:  # (an int argument is cast to float64, as NumPy casts it)
        x, y = _as_double(em, v), _as_double(em, w)
        return float_result(em, ("np", None), f"npd_ufunc2({k}, {x}, {y})")
    if v.ty.fam != "float":
        raise Refuse(f"numpy.{name} of a {v.ty} (NumPy may pick another loop than float64's)")
    return float_result(em, ("np", None), f"npd_ufunc1({k}, {v.c})")


def constant(value: Any) -> SVal:
    """A literal of the code (int, float, bool)."""
    if isinstance(value, bool):
        return SVal(Ty("bool"), "1" if value else "0")
    if isinstance(value, int):
        if not -(1 << 63) < value < (1 << 63):
            raise Refuse(f"the literal {value} does not fit int64")
        return SVal(Ty("int"), f"{value}LL" if value != -(1 << 63) else "LLONG_MIN")
    if isinstance(value, float):
        return SVal(Ty("float"), _float_literal(value))
    raise Refuse(f"the constant {value!r} is not a number")


def _float_literal(value: float) -> str:
    if value != value:
        return "NAN"
    if value in (float("inf"), float("-inf")):
        return "INFINITY" if value > 0 else "-INFINITY"
    return f"{value.hex()}"  # (exact: C99 hex float)
