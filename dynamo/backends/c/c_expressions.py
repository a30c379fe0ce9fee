"""C expressions for loop-level values: the C type of each dtype and one printer per `Op`.

In: an `Op` (``loop_ir``) and its arguments as C expressions, or a `Const`. Out: a C expression of
type ``ctype(op.dtype)`` (`OPS`, `constant`). Called by the element loops (`c_loops`), the
reductions' combine steps (`c_reduction`), and read by `lowering` (which lowers only the names
in `OPS`) and `kernel` (`NUMPY_LOOP`).

Semantics follow NumPy's loops, not C's: signed integer arithmetic goes through the unsigned type
(wrap-around instead of undefined behaviour), float comparisons use the quiet ``DYN_LT`` family
of the prologue (no spurious 'invalid' flag on NaN), maximum/minimum propagate NaN like NumPy.
Math functions whose last bit is the implementation's own (exp, sin, ...: `NUMPY_LOOP`) have no
printer: a kernel calls NumPy's own inner loop for them on blocks of values
(`c_loops.element_loop`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .loop_ir import Const, Op

__all__ = ["FLOAT_MATH", "IEEE_EXACT_MATH", "NUMPY_LOOP", "OPS", "OpPrinter", "constant",
           "ctype", "is_float", "suffix"]

_CTYPES = {
    "?": "uint8_t", "i1": "int8_t", "i2": "int16_t", "i4": "int32_t", "i8": "int64_t",
    "u1": "uint8_t", "u2": "uint16_t", "u4": "uint32_t", "u8": "uint64_t",
    "f4": "float", "f8": "double",
}


def ctype(dt: np.dtype) -> str:
    """The C type that stores one element of ``dt``."""
    return _CTYPES[np.dtype(dt).str[1:] if np.dtype(dt).kind != "b" else "?"]


def _wide_unsigned(dt: np.dtype) -> str:
    # C promotes types narrower than int to (signed) int before arithmetic; going through
    # uint32_t/uint64_t keeps every intermediate unsigned, so overflow wraps instead of UB.
    return "uint64_t" if np.dtype(dt).itemsize == 8 else "uint32_t"


def is_float(dt: np.dtype) -> bool:
    return np.dtype(dt).kind == "f"


def suffix(dt: np.dtype) -> str:
    return "f" if np.dtype(dt) == np.float32 else ""


# -- per-op C expressions --------------------------------------------------------------------
# Each entry: (args as C expressions, the Op) -> a C expression of type ctype(op.dtype).

OpPrinter = Callable[[list[str], Op], str]


def _wrap(sym: str) -> OpPrinter:
    def emit(a: list[str], op: Op) -> str:
        t = ctype(op.dtype)
        if is_float(op.dtype):
            return f"({a[0]} {sym} {a[1]})"
        u = _wide_unsigned(op.dtype)
        return f"({t})(({u}){a[0]} {sym} ({u}){a[1]})"

    return emit


def _bool_or(inner: OpPrinter, bool_sym: str) -> OpPrinter:
    def emit(a: list[str], op: Op) -> str:
        if op.dtype.kind == "b":
            return f"(uint8_t)({a[0]} {bool_sym} {a[1]})"
        return inner(a, op)

    return emit


def _negative(a: list[str], op: Op) -> str:
    if is_float(op.dtype):
        return f"(-{a[0]})"
    return f"({ctype(op.dtype)})(({_wide_unsigned(op.dtype)})0 - ({_wide_unsigned(op.dtype)}){a[0]})"


def _absolute(a: list[str], op: Op) -> str:
    if is_float(op.dtype):
        return f"fabs{suffix(op.dtype)}({a[0]})"
    if op.dtype.kind == "i":
        return f"({a[0]} < 0 ? {_negative(a, op)} : {a[0]})"
    return a[0]


def _sign(a: list[str], op: Op) -> str:
    t, x = ctype(op.dtype), a[0]
    if is_float(op.dtype):
        return (f"(DYN_GT({x}, ({t})0) ? ({t})1 : (DYN_LT({x}, ({t})0) ? ({t})-1 : "
                f"({x} == 0 ? ({t})0 : {x})))")
    if op.dtype.kind == "i":
        return f"({t})(({x} > 0) - ({x} < 0))"
    return f"({t})({x} > 0)"


def _libm(name: str) -> OpPrinter:
    def emit(a: list[str], op: Op) -> str:
        return f"{name}{suffix(op.dtype)}({', '.join(a)})"

    return emit


def _minmax(quiet: str, plain: str) -> OpPrinter:
    # NumPy: maximum(a, b) = (a > b || isnan(a)) ? a : b, which propagates a NaN from either
    # side and returns b for equal values (so maximum(-0.0, 0.0) is 0.0, as in NumPy).
    def emit(a: list[str], op: Op) -> str:
        x, y = a
        if is_float(op.dtype):
            # '|' not '||': no short-circuit branch, so the loop stays vectorisable.
            return f"(({quiet}({x}, {y}) | (isnan({x}) != 0)) ? {x} : {y})"
        return f"({x} {plain} {y} ? {x} : {y})"

    return emit


def _clip_side(quiet: str, plain: str) -> OpPrinter:
    # NumPy's clip: a NaN in x or in the bound propagates; otherwise the bound replaces x only
    # when strictly beyond it (so clip(-0.0, 0.0, 1.0) keeps -0.0, unlike maximum).
    def emit(a: list[str], op: Op) -> str:
        x, b = a
        if is_float(op.dtype):
            return f"(isnan({x}) ? {x} : (isnan({b}) ? {b} : ({quiet}({x}, {b}) ? {b} : {x})))"
        return f"({x} {plain} {b} ? {b} : {x})"

    return emit


def _fminmax(quiet: str) -> OpPrinter:
    # NumPy's fmax/fmin: ignore a NaN on one side, return b on ties (fmax(-0.0, 0.0) is 0.0);
    # C's fmax leaves ties unspecified (and its vector form differs from the scalar one).
    def emit(a: list[str], op: Op) -> str:
        x, y = a
        return f"(isnan({y}) ? {x} : ({quiet}({x}, {y}) ? {x} : {y}))"

    return emit


def _compare(quiet: str | None, sym: str) -> OpPrinter:
    def emit(a: list[str], op: Op) -> str:
        if quiet is not None and is_float(op.arg_dtype):
            return f"(uint8_t){quiet}({a[0]}, {a[1]})"
        return f"(uint8_t)({a[0]} {sym} {a[1]})"

    return emit


def _cast(a: list[str], op: Op) -> str:
    if op.dtype.kind == "b":
        return f"(uint8_t)({a[0]} != 0)"
    return f"({ctype(op.dtype)})({a[0]})"


def _powi(a: list[str], op: Op) -> str:
    # x ** n for a constant n >= 0 by repeated squaring, written as one expression.
    n, x = int(op.param), a[0]
    mul = _wrap("*")
    result: str | None = None
    base = x
    while n:
        if n & 1:
            result = base if result is None else mul([result, base], op)
        n >>= 1
        if n:
            base = mul([base, base], op)
    return result if result is not None else f"({ctype(op.dtype)})1"


def _logical(expr: str) -> OpPrinter:
    def emit(a: list[str], op: Op) -> str:
        return "(uint8_t)" + expr.format(*a)

    return emit


def _bitwise(sym: str) -> OpPrinter:
    def emit(a: list[str], op: Op) -> str:
        return f"({ctype(op.dtype)})({a[0]} {sym} {a[1]})"

    return emit


def _invert(a: list[str], op: Op) -> str:
    if op.dtype.kind == "b":
        return f"(uint8_t)!{a[0]}"
    return f"({ctype(op.dtype)})(~{a[0]})"


#: libm functions by ufunc name (float32 uses the ``f``-suffixed variant).
FLOAT_MATH = {
    "sqrt": "sqrt", "cbrt": "cbrt", "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log",
    "log2": "log2", "log10": "log10", "log1p": "log1p", "sin": "sin", "cos": "cos", "tan": "tan",
    "arcsin": "asin", "arccos": "acos", "arctan": "atan", "sinh": "sinh", "cosh": "cosh",
    "tanh": "tanh", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh", "floor": "floor",
    "ceil": "ceil", "trunc": "trunc", "rint": "rint", "arctan2": "atan2", "hypot": "hypot",
    "copysign": "copysign", "fmax": "fmax", "fmin": "fmin", "fmod": "fmod",
}

#: Math NumPy computes with plain IEEE operations (correctly rounded or exact by definition), so
#: C's function gives NumPy's bits: these stay C (gcc inlines or vectorises them).
IEEE_EXACT_MATH = frozenset({"sqrt", "floor", "ceil", "trunc", "rint", "copysign", "fmax",
                             "fmin", "fmod"})
#: Math whose last bit is the implementation's own (NumPy's SIMD loops and libm/libmvec differ by
#: 1-6 ULP): a kernel calls NumPy's own inner loop on a block of values (`c_loops.element_loop`).
NUMPY_LOOP = frozenset(FLOAT_MATH) - IEEE_EXACT_MATH


def _numpy_only(a: list[str], op: Op) -> str:
    raise ValueError(f"{op.name} is computed by NumPy's loop on a block (c_loops.element_loop), "
                     "never inline")


#: Op name -> printer. Lowering only emits names present here.
OPS: dict[str, OpPrinter] = {
    "add": _bool_or(_wrap("+"), "|"),
    "subtract": _wrap("-"),
    "multiply": _bool_or(_wrap("*"), "&"),
    "divide": lambda a, op: f"({a[0]} / {a[1]})",
    "negative": _negative,
    "positive": lambda a, op: a[0],
    "absolute": _absolute,
    "sign": _sign,
    "square": lambda a, op: _bool_or(_wrap("*"), "&")([a[0], a[0]], op),
    "reciprocal": lambda a, op: f"(({ctype(op.dtype)})1 / {a[0]})",
    "maximum": _minmax("DYN_GT", ">"),
    "minimum": _minmax("DYN_LT", "<"),
    "fmax": _fminmax("DYN_GT"),
    "fmin": _fminmax("DYN_LT"),
    "clip_lo": _clip_side("DYN_LT", "<"),
    "clip_hi": _clip_side("DYN_GT", ">"),
    "equal": _compare(None, "=="),
    "not_equal": _compare(None, "!="),
    "less": _compare("DYN_LT", "<"),
    "less_equal": _compare("DYN_LE", "<="),
    "greater": _compare("DYN_GT", ">"),
    "greater_equal": _compare("DYN_GE", ">="),
    "logical_and": _logical("(({0} != 0) & ({1} != 0))"),
    "logical_or": _logical("(({0} != 0) | ({1} != 0))"),
    "logical_xor": _logical("(({0} != 0) ^ ({1} != 0))"),
    "logical_not": _logical("({0} == 0)"),
    "bitwise_and": _bitwise("&"),
    "bitwise_or": _bitwise("|"),
    "bitwise_xor": _bitwise("^"),
    "invert": _invert,
    "isnan": lambda a, op: f"(uint8_t)(isnan({a[0]}) != 0)",
    "isinf": lambda a, op: f"(uint8_t)(isinf({a[0]}) != 0)",
    "isfinite": lambda a, op: f"(uint8_t)(isfinite({a[0]}) != 0)",
    "signbit": lambda a, op: f"(uint8_t)(signbit({a[0]}) != 0)",
    "where": lambda a, op: f"({a[0]} ? {a[1]} : {a[2]})",
    "cast": _cast,
    "powi": _powi,
    **{name: _libm(fn) for name, fn in FLOAT_MATH.items() if name not in ("fmax", "fmin")},
    **{name: _numpy_only for name in NUMPY_LOOP},
}


def constant(c: Const) -> str:
    t = ctype(c.dtype)
    if is_float(c.dtype):
        v = float(c.value)
        if v != v:
            return f"(({t})NAN)"
        if v in (float("inf"), float("-inf")):
            return f"(({t}){'-' if v < 0 else ''}INFINITY)"
        return f"(({t}){v!r})"
    if c.dtype.kind == "b":
        return f"((uint8_t){int(bool(c.value))})"
    if c.dtype == np.uint64 or c.dtype == np.int64:
        # INT64_MIN has no literal; go through the unsigned bit pattern.
        return f"(({t}){int(c.value) & 0xFFFFFFFFFFFFFFFF}ull)"
    return f"(({t}){int(c.value)})"
