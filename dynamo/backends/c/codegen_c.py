"""C code generation: loop-level kernels (`loop_ir`) -> readable C source + cffi ``cdef``.

In: `PointwiseKernel` / `ReductionKernel` objects from `fusion.py`. Out: C source text with one
exported function per kernel, ``int NAME(const int64_t *A, char **P)``: ``A`` is the block of
threads/shape/strides that `kernel.py` caches per layout, ``P`` the data pointers of one call
(layouts documented on `pointwise_source` / `reduction_source`). The return value
is the OR of the floating-point exception flags raised by the kernel (``FE_*`` bits); when one
of them would make NumPy warn, the runtime recomputes the step with NumPy (see `kernel.py`).

Semantics follow NumPy's loops, not C's: signed integer arithmetic goes through the unsigned type
(wrap-around instead of undefined behaviour), float comparisons use the quiet ``isless`` family
(no spurious 'invalid' flag on NaN), maximum/minimum propagate NaN like NumPy, and floating sums
use NumPy's pairwise summation (8 accumulators over blocks of 128, halves combined) over the
rows `kernel.py` lays out in NumPy's order, so results match NumPy bit for bit. Math functions
whose last bit is the implementation's own (exp, sin, ...: `NUMPY_LOOP`) are NumPy's own inner
loops, called on blocks of values between stages of the element loop (`_element_loop`); a
module that calls any exports ``npdynamo_set_numpy_loops``, which `compile_graph` calls once
after loading with the loops' addresses (`numpy_loops.py`). Values that may
raise FP flags but whose results nothing stored needs (a `where` branch, ``v > v``) are kept
alive through a flag sink (`forced_values`), so every element is computed, as in NumPy.
Each kernel's body is outlined into ``<name>_region``, called directly when ``par`` is 0 and from
an OpenMP ``parallel`` region otherwise (`_serial_path`: an empty team costs more than a small
kernel).
"""

from __future__ import annotations

import re
from math import prod
from typing import Any, Callable, Container

import numpy as np

from .loop_ir import (
    Const,
    Kernel,
    Load,
    Op,
    PointwiseKernel,
    Reduction,
    ReductionKernel,
    RowRef,
    Value,
    rolled_loads,
    walk,
)

__all__ = ["OPS", "ctype", "kernel_source", "module_source", "cdef_for", "FLOAT_MATH",
           "NUMPY_LOOP", "numpy_loop_slots"]

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


def _is_float(dt: np.dtype) -> bool:
    return np.dtype(dt).kind == "f"


def _suffix(dt: np.dtype) -> str:
    return "f" if np.dtype(dt) == np.float32 else ""


# -- per-op C expressions --------------------------------------------------------------------
# Each entry: (args as C expressions, the Op) -> a C expression of type ctype(op.dtype).

OpPrinter = Callable[[list[str], Op], str]


def _wrap(sym: str) -> OpPrinter:
    def emit(a: list[str], op: Op) -> str:
        t = ctype(op.dtype)
        if _is_float(op.dtype):
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
    if _is_float(op.dtype):
        return f"(-{a[0]})"
    return f"({ctype(op.dtype)})(({_wide_unsigned(op.dtype)})0 - ({_wide_unsigned(op.dtype)}){a[0]})"


def _absolute(a: list[str], op: Op) -> str:
    if _is_float(op.dtype):
        return f"fabs{_suffix(op.dtype)}({a[0]})"
    if op.dtype.kind == "i":
        return f"({a[0]} < 0 ? {_negative(a, op)} : {a[0]})"
    return a[0]


def _sign(a: list[str], op: Op) -> str:
    t, x = ctype(op.dtype), a[0]
    if _is_float(op.dtype):
        return (f"(DYN_GT({x}, ({t})0) ? ({t})1 : (DYN_LT({x}, ({t})0) ? ({t})-1 : "
                f"({x} == 0 ? ({t})0 : {x})))")
    if op.dtype.kind == "i":
        return f"({t})(({x} > 0) - ({x} < 0))"
    return f"({t})({x} > 0)"


def _libm(name: str) -> OpPrinter:
    def emit(a: list[str], op: Op) -> str:
        return f"{name}{_suffix(op.dtype)}({', '.join(a)})"

    return emit


def _minmax(quiet: str, plain: str) -> OpPrinter:
    # NumPy: maximum(a, b) = (a > b || isnan(a)) ? a : b, which propagates a NaN from either
    # side and returns b for equal values (so maximum(-0.0, 0.0) is 0.0, as in NumPy).
    def emit(a: list[str], op: Op) -> str:
        x, y = a
        if _is_float(op.dtype):
            # '|' not '||': no short-circuit branch, so the loop stays vectorisable.
            return f"(({quiet}({x}, {y}) | (isnan({x}) != 0)) ? {x} : {y})"
        return f"({x} {plain} {y} ? {x} : {y})"

    return emit


def _clip_side(quiet: str, plain: str) -> OpPrinter:
    # NumPy's clip: a NaN in x or in the bound propagates; otherwise the bound replaces x only
    # when strictly beyond it (so clip(-0.0, 0.0, 1.0) keeps -0.0, unlike maximum).
    def emit(a: list[str], op: Op) -> str:
        x, b = a
        if _is_float(op.dtype):
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
        if quiet is not None and _is_float(op.arg_dtype):
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
#: 1-6 ULP): a kernel calls NumPy's own inner loop on a block of values (`_element_loop`).
NUMPY_LOOP = frozenset(FLOAT_MATH) - IEEE_EXACT_MATH


def _numpy_only(a: list[str], op: Op) -> str:
    raise ValueError(f"{op.name} is computed by NumPy's loop on a block (_element_loop), "
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


def _const(c: Const) -> str:
    t = ctype(c.dtype)
    if _is_float(c.dtype):
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


# -- FP flags gcc must not optimise away ------------------------------------------------------
# A kernel reports the FP flags its arithmetic raised; NumPy computes every temporary for every
# element, so a kernel must too. gcc keeps a value only if the result depends on it: it computes
# a `where` branch only where it is selected (masked lanes raise nothing) and folds `v > v` to
# false, `x == NaN` to false and `x ** 0` to 1, dropping `v` and its flags. Values that may flag
# and that nothing keeps are ORed (their bits) into a per-thread sink the kernel hands to an
# empty `asm volatile` at the end: computed for every element, at one vector OR each.

#: Ops that never raise a floating-point flag (quiet comparisons, selects, sign-bit work).
FLAG_FREE = frozenset({
    "negative", "positive", "absolute", "copysign", "sign", "where", "equal", "not_equal",
    "less", "less_equal", "greater", "greater_equal", "maximum", "minimum", "fmax", "fmin",
    "clip_lo", "clip_hi", "isnan", "isinf", "isfinite", "signbit", "logical_and",
    "logical_or", "logical_xor", "logical_not"})
#: Consumers whose C needs every bit of a float operand (unless they read it twice and are
#: not `ARITHMETIC`): the operand's computation cannot be dropped through them.
_KEEPS_FLOAT = frozenset({
    "add", "subtract", "multiply", "divide", "negative", "positive", "absolute", "square",
    "reciprocal", "maximum", "minimum", "fmax", "fmin", "clip_lo", "clip_hi", "copysign",
    "sign", "isnan", "isinf", "isfinite", "signbit", "cast", "powi", *FLOAT_MATH})
#: Binary ops whose result still needs the operand when both operands are the same value.
ARITHMETIC = frozenset({"add", "subtract", "multiply", "divide", "maximum", "minimum", "fmax",
                         "fmin", "copysign", "hypot", "arctan2", "fmod"})
_COMPARISONS = frozenset({"equal", "not_equal", "less", "less_equal", "greater",
                          "greater_equal"})
#: Integer/bool consumers that need their operand when no constant can decide the result.
_KEEPS_EXACT = frozenset({"add", "subtract", "multiply", "maximum", "minimum", "bitwise_and",
                          "bitwise_or", "bitwise_xor", "logical_and", "logical_or",
                          "logical_xor", "negative", "absolute", "invert", "logical_not",
                          "sign", "square", "positive", *_COMPARISONS})


def raises_fp(v: Value) -> bool:
    """May op ``v`` itself (not its operands) raise a floating-point flag?"""
    if not isinstance(v, Op) or v.name in FLAG_FREE:
        return False
    src = v.arg_dtype if v.arg_dtype is not None else v.dtype
    if v.name == "cast":  # only float64 -> float32 can overflow
        return src.kind == "f" and v.dtype.kind == "f" and v.dtype.itemsize < src.itemsize
    if v.name == "powi" and v.param in (0, 1):
        return False
    return v.dtype.kind == "f" or src.kind == "f"


def keeps(v: Op, i: int) -> bool:
    """Does the C of ``v`` need argument ``i``'s value for every element (gcc cannot drop it)?"""
    a, args = v.args[i], v.args
    twice = len(args) == 2 and args[0] == args[1]
    if v.name == "where":
        return i == 0 and args[1] != args[2]
    if v.name == "powi" and v.param == 0:
        return False
    if v.name in _COMPARISONS:
        if twice or any(isinstance(x, Const) and x.value != x.value for x in args):
            return False  # v > v, x == NaN: constants
    if np.dtype(a.dtype).kind == "f":
        if v.name in _COMPARISONS:
            return True
        return v.name in _KEEPS_FLOAT and (not twice or v.name in ARITHMETIC)
    if v.name == "cast":
        return True
    return (v.name in _KEEPS_EXACT and not twice
            and not any(isinstance(x, Const) for x in args))


def forced_values(outputs: list[Value], stop: Container[Value] = ()) -> list[Value]:
    """Values of ``outputs``' DAG that may raise FP flags but that no stored output needs (so
    gcc could skip computing them): the kernel must keep them alive (see above)."""
    order = walk(outputs, stop)
    needed = set(outputs)
    forced: list[Value] = []
    for v in reversed(order):  # users before their operands
        if v not in needed:
            if not raises_fp(v):
                continue
            forced.append(v)
            needed.add(v)
        if isinstance(v, Op) and v not in stop:
            for i, a in enumerate(v.args):
                if keeps(v, i):
                    needed.add(a)
    return forced[::-1]


def _keep_lines(forced: list[Value], names: dict, indent: str) -> list[str]:
    return [f"{indent}keep |= DYN_BITS({names[v]});" for v in forced]


_KEEP_HELPERS = """\
/* Flag sink: values whose FP flags count but whose results are not needed (see codegen_c). */
static inline uint64_t dyn_bits_d(double x) { uint64_t i; __builtin_memcpy(&i, &x, 8);
    return i; }
static inline uint64_t dyn_bits_f(float x) { uint32_t i; __builtin_memcpy(&i, &x, 4);
    return i; }
#define DYN_BITS(x) _Generic((x), float: dyn_bits_f, default: dyn_bits_d)(x)
"""


def _read(v: Value, preset: dict, load: Callable[[Load], str],
          rowref: Callable[[RowRef], str]) -> str | None:
    """The C that reads ``v`` when it is not computed here (preset, a load, a row result)."""
    if v in preset:
        return preset[v]
    if isinstance(v, Load):
        return load(v)
    if isinstance(v, RowRef):
        return rowref(v)
    return None


def _body(values: list[Value], load: Callable[[Load], str], indent: str,
          rowref: Callable[[RowRef], str] = lambda r: f"r->r{r.index}",
          preset: dict | None = None) -> tuple[list[str], dict]:
    """C statements computing every node of ``values``' DAG once; returns lines and names.
    ``preset`` maps values already available elsewhere (e.g. in a row buffer) to C expressions:
    they are read, not recomputed."""
    lines: list[str] = []
    names: dict[Value, str] = {}
    preset = preset or {}
    for i, v in enumerate(walk(values, preset)):
        if isinstance(v, Const):
            names[v] = _const(v)
            continue
        expr = _read(v, preset, load, rowref)
        if expr is None:
            expr = OPS[v.name]([names[a] for a in v.args], v)
        name = f"v{i}"
        lines.append(f"{indent}const {ctype(v.dtype)} {name} = {expr};")
        names[v] = name
    return lines, names


def _calls_numpy(v: Value) -> bool:
    return isinstance(v, Op) and v.name in NUMPY_LOOP


#: Elements per block a kernel hands to a NumPy loop (its buffers stay in L1: 4 KiB each).
CHUNK = 512


def _element_loop(stores: list[tuple[Value, str]], load: Callable[[Load], str], indent: str,
                  lo: str, hi: str, pragma: str = "", forced: list[Value] = (),
                  rowref: Callable[[RowRef], str] = lambda r: f"r->r{r.index}",
                  preset: dict | None = None) -> list[str]:
    """The loop ``for (j = lo; j < hi; j++)`` computing ``stores`` (value, C lvalue) and
    keeping ``forced`` values alive (`forced_values`), under ``pragma`` (e.g. ``omp simd``).

    Without `NUMPY_LOOP` math it is one loop of `_body`. With it, the range is cut into
    blocks of `CHUNK` elements and each block into *stages*: a stage is a plain loop over the
    block computing what it can; between stages, each NumPy-loop op is one call of NumPy's
    inner loop (``DYN_NUMPY<n>``) from buffers ``t<i>`` holding its operands to a buffer of its
    results, which later stages read. An op's stage is one more than its operands' (so chains
    of math work), values crossing stages go through their buffer, and loads are re-read."""
    values = [v for v, _ in stores]
    preset = preset or {}
    order = walk(values, preset)
    if not any(_calls_numpy(v) for v in order if v not in preset):
        lines, names = _body(values, load, indent + "    ", rowref, preset)
        return ([f"{indent}{pragma}"] if pragma else []) + \
            [f"{indent}for (int64_t j = {lo}; j < {hi}; j++) {{"] + lines + \
            _keep_lines(list(forced), names, indent + "    ") + \
            [f"{indent}    {lv} = {names[v]};" for v, lv in stores] + [f"{indent}}}"]
    index = {v: i for i, v in enumerate(order)}
    home: dict[Value, int] = {}  # the stage an Op is available in (leaves: any stage)
    for v in order:
        if isinstance(v, Op) and v not in preset:
            base = max((home.get(a, 0) for a in v.args), default=0)
            home[v] = base + 1 if _calls_numpy(v) else base
    last = max(home.values())
    need: list[set[Value]] = [set() for _ in range(last + 1)]
    buffered: dict[Value, int] = {}  # value -> the stage that writes its buffer
    for v in values + list(forced):
        need[home.get(v, 0)].add(v)
    for s in range(last, -1, -1):
        for v in reversed(order):
            if v not in need[s]:
                continue
            if v in home and home[v] < s and not _calls_numpy(v):
                buffered[v] = home[v]
                need[home[v]].add(v)
            elif _calls_numpy(v) and v not in preset:
                for a in v.args:
                    at = home.get(a, home[v] - 1)
                    buffered[a] = min(buffered.get(a, at), at)
                    need[buffered[a]].add(a)
            elif v in home and v not in preset:
                need[s].update(v.args)
    inner = indent + "    "
    L = [f"{indent}for (int64_t c0 = {lo}; c0 < {hi}; c0 += {CHUNK}) {{",
         f"{inner}const int64_t c1 = c0 + {CHUNK} < {hi} ? c0 + {CHUNK} : {hi};"]
    L += [f"{inner}{ctype(v.dtype)} t{index[v]}[{CHUNK}] __attribute__((aligned(64)));"
          for v in order if v in buffered or _calls_numpy(v) and v not in preset]
    store_at = {v: lv for v, lv in stores}
    for s in range(last + 1):
        for v in order:  # the NumPy loops whose operands are now complete
            if _calls_numpy(v) and v not in preset and home[v] == s:
                ts = [f"t{index[a]}" for a in v.args]
                L.append(f"{inner}DYN_NUMPY{len(v.args)}({slot_name(v)}, {', '.join(ts)}, "
                         f"t{index[v]}, c1 - c0);  /* np.{v.name}, NumPy's own loop */")
        L += ([f"{inner}{pragma}"] if pragma else []) + \
            [f"{inner}for (int64_t j = c0; j < c1; j++) {{"]
        names: dict[Value, str] = {}
        for v in order:
            if v not in need[s]:
                continue
            if isinstance(v, Const):
                names[v] = _const(v)
                if buffered.get(v) == s:  # an operand of a NumPy loop
                    L.append(f"{inner}    t{index[v]}[j - c0] = {names[v]};")
                continue
            expr = _read(v, preset, load, rowref)
            if expr is None:
                expr = (f"t{index[v]}[j - c0]" if home[v] < s or _calls_numpy(v)
                        else OPS[v.name]([names[a] for a in v.args], v))
            names[v] = f"v{index[v]}"
            L.append(f"{inner}    const {ctype(v.dtype)} v{index[v]} = {expr};")
            if buffered.get(v) == s and not _calls_numpy(v):
                L.append(f"{inner}    t{index[v]}[j - c0] = v{index[v]};")
        L += _keep_lines([v for v in forced if v in names and home.get(v, 0) == s
                          and not _calls_numpy(v)], names, inner + "    ")
        L += [f"{inner}    {store_at[v]} = {names[v]};" for v in values
              if home.get(v, 0) == s]
        L.append(f"{inner}}}")
    return L + [f"{indent}}}"]


def _stores(outputs: list[Value], at: str, first: int = 0) -> list[tuple[Value, str]]:
    return [(v, f"out{first + j}[{at}]") for j, v in enumerate(outputs)]


def slot_name(v: Op) -> str:
    """The name of the NumPy loop an op calls, e.g. ``exp_f8`` (``DYN_NP_exp_f8`` in C)."""
    return f"{v.name}_{np.dtype(v.dtype).str[1:]}"


def numpy_loop_slots(kernels: list[Kernel]) -> list[tuple[str, np.dtype]]:
    """The NumPy loops a module's kernels call (read from their C), in the order of its table
    (`module_source`)."""
    used = {m for k in kernels for m in _NUMPY_CALL.findall(kernel_source(k))}
    return [(name, np.dtype(code)) for name, code in sorted(used)]


_NUMPY_CALL = re.compile(r"DYN_NUMPY\d\((\w+)_(f\d)\b")


_NUMPY_CALLS = """\
/* NumPy's own inner loops (set once after loading: npdynamo_set_numpy_loops), called on blocks
   of contiguous values, as NumPy calls them on contiguous arrays: the same bits. A loop may
   reset the FP status flags (NumPy reads its own); the kernel's earlier flags are kept. */
typedef void (*dyn_loop_fn)(char **, const intptr_t *, const intptr_t *, void *);
static void *dyn_np[2 * DYN_NP_COUNT];
void npdynamo_set_numpy_loops(void *const *t)
{
    for (int i = 0; i < 2 * DYN_NP_COUNT; i++) dyn_np[i] = t[i];
}
static void dyn_numpy(int f, char **args, int64_t n, intptr_t size)
{
    const intptr_t dims[1] = {(intptr_t)n}, steps[3] = {size, size, size};
    const int before = fetestexcept(DYN_FE);
    ((dyn_loop_fn)dyn_np[2 * f])(args, dims, steps, dyn_np[2 * f + 1]);
    const int lost = before & ~fetestexcept(DYN_FE);
    if (lost) feraiseexcept(lost);
}
#define DYN_NUMPY1(f, a, out, n) \\
    dyn_numpy(DYN_NP_##f, (char *[]){(char *)(a), (char *)(out)}, n, sizeof *(out))
#define DYN_NUMPY2(f, a, b, out, n) \\
    dyn_numpy(DYN_NP_##f, (char *[]){(char *)(a), (char *)(b), (char *)(out)}, n, sizeof *(out))
"""


_PROLOGUE = """\
/* generated by npdynamo's C backend (dynamo/backends/c/codegen_c.py) */
#include <stdint.h>
#include <stdlib.h>
#include <math.h>
#include <fenv.h>
#define DYN_FE (FE_DIVBYZERO | FE_OVERFLOW | FE_INVALID | FE_UNDERFLOW)
/* Returned with the FE flags when a buffer could not be allocated (kernel.NO_MEMORY) */
#define DYN_NO_MEMORY (1 << 30)
/* Quiet ordered comparisons: false when either side is NaN, never raise FE_INVALID, and
   vectorise. C's < is a signalling compare (a NaN sets FE_INVALID, which NumPy does not
   report), and isless() & co. may be vectorised into signalling compares too. So order is
   decided on integer keys (IEEE bits with the magnitude flipped for negatives: a total order
   that matches < except -0.0 < +0.0), with NaN and equality excluded by quiet == / !=. */
static inline int64_t dyn_key_d(double x) { int64_t i; __builtin_memcpy(&i, &x, 8);
    return i ^ ((i >> 63) & INT64_MAX); }
static inline int32_t dyn_key_f(float x) { int32_t i; __builtin_memcpy(&i, &x, 4);
    return i ^ ((i >> 31) & INT32_MAX); }
#define DYN_KEY(x) _Generic((x), float: dyn_key_f, default: dyn_key_d)(x)
#define DYN_LT(a, b) (((a) == (a)) & ((b) == (b)) & ((a) != (b)) & (DYN_KEY(a) < DYN_KEY(b)))
#define DYN_GT(a, b) DYN_LT(b, a)
#define DYN_LE(a, b) (((a) == (b)) | DYN_LT(a, b))
#define DYN_GE(a, b) (((a) == (b)) | DYN_LT(b, a))
"""


def _operand_decls(k: Kernel, n_in: int, out_types: list[str]) -> list[str]:
    """Declarations of inputs ``in<i>`` (strides ``st<i>``, ``nd`` of them at ``S + i * nd``)
    and outputs ``out<j>``; data pointers come in ``P`` (inputs, then outputs)."""
    lines = []
    for i, od in enumerate(k.operands):
        t = ctype(od.dtype)
        lines.append(f"    const {t} *restrict in{i} = (const {t} *)P[{i}]; "
                     f"const int64_t *st{i} = S + {i} * nd;")
    for j, t in enumerate(out_types):
        lines.append(f"    {t} *restrict out{j} = ({t} *)P[{n_in + j}];")
    return lines


def _row_invariant(operands: list, shape: tuple[int, ...], axis: int) -> set[int]:
    """Operands whose inner (coalesced) stride is always 0: a single element, or broadcast
    along ``axis`` of a domain whose ``axis`` is longer than 1 (that axis always ends the inner
    run). Static (from the metas), so the kernel can hoist their load out of the inner loop
    and keep the unit-stride ``omp simd`` path for the rest (``x * scalar``).

    With symbolic sizes (dynamic shapes) only what holds for every size counts: a symbolic
    dimension is never taken to be 1 (``s0 - 1`` may be 1 at run time: not hoisting is always
    correct), and the domain's axis must be longer than 1 for every size (its lower bound)."""
    inv = set()
    for i, od in enumerate(operands):
        if all(type(d) is int for d in od.shape) and prod(od.shape) == 1:
            inv.add(i)
            continue
        off = len(shape) - len(od.shape)
        if axis >= 0 and _always_above_one(shape[axis]) and (
                axis < off or type(od.shape[axis - off]) is int and od.shape[axis - off] == 1):
            inv.add(i)
    return inv


def _always_above_one(size: Any) -> bool:
    """Is this size (an int or an `fx.symbolic.Sym`) > 1 whatever the run-time sizes? Reads
    the symbol's bounds only (a comparison on a Sym would record a guard fact)."""
    if type(size) is int:
        return size > 1
    lower = getattr(size, "lower_bound", None)
    return lower is not None and lower() > 1


_PARALLEL = "    #pragma omp parallel num_threads(nthreads) if(par) reduction(|:fl)"


def _serial_path(L: list[str]) -> list[str]:
    """The kernel's lines with its body outlined into ``<name>_region`` (one thread's work: its
    ``omp for`` is orphaned, so it binds to whatever region calls it), called directly when
    ``par`` is 0 and from the ``parallel`` region otherwise. A ``parallel if(0)`` region still
    builds a one-thread team, ~0.5 us per call: more than a whole kernel over a few elements
    (measured: 8-element ``sin(x) * y + 1`` 0.61 us with the region, 0.09 us without).
    Outlining, not a second copy of the loops, keeps gcc's time as it was."""
    sig = next(i for i, line in enumerate(L) if line.startswith("int ")
               and line.endswith("(const int64_t *A, char **P)"))
    name = L[sig][4:L[sig].index("(")]
    start = L.index(_PARALLEL)
    end = len(L) - 1 - L[::-1].index("    return fl;")
    assert L[start - 1] == "    int fl = 0;" and L[start + 1] == "    {" and L[end - 1] == "    }"
    region = (["__attribute__((noinline)) static int "
               f"{name}_region(const int64_t *A, char **P)", "{"]
              + L[sig + 2:start] + L[start + 1:end] + ["    return fl;", "}"])
    entry = [L[sig], "{",
             f"    if (!A[1]) return {name}_region(A, P);  /* serial: no OpenMP team */",
             "    int fl = 0;",
             "    #pragma omp parallel num_threads((int)A[0]) reduction(|:fl)",
             f"    fl |= {name}_region(A, P);",
             "    return fl;", "}"]
    return L[:sig] + region + entry


def pointwise_source(k: PointwiseKernel) -> str:
    """C for a pointwise kernel.

    ``A = [threads, parallel, block, nd, shape[nd], then per input strides[nd] (in elements, 0
    where broadcast)]``; ``P`` = data pointers of the inputs, then of the (C-contiguous) outputs.
    The domain is walked as rows (all but the last dim) cut into blocks of ``block`` elements;
    rows whose inputs all have unit inner stride take the contiguous ``omp simd`` loop.
    """
    n_in = len(k.operands)
    outs = [ctype(v.dtype) for v in k.outputs]
    inv = _row_invariant(k.operands, k.shape, len(k.shape) - 1)
    forced = forced_values(k.outputs)
    slots = {ld: m for m, ld in enumerate(rolled_loads(k.outputs))}
    L = [f"int {k.name}(const int64_t *A, char **P)", "{",
         "    const int nthreads = (int)A[0], par = (int)A[1];",
         "    const int64_t blk = A[2], nd = A[3];",
         "    const int64_t *shape = A + 4, *S = A + 4 + nd;"]
    L += _operand_decls(k, n_in, outs)
    if slots:
        return _rolled_pointwise_source(k, L, slots, inv, forced)
    L += _blocked_work(n_in, inv, forced)
    L += [
          "        int64_t r = row" + "".join(f", o{i} = 0" for i in range(n_in)) + ", oo = 0;",
          "        for (int64_t d = nd - 2; d >= 0; d--) {",
          "            const int64_t i = r % shape[d]; r /= shape[d];",
          "            " + " ".join(f"o{i} += i * st{i}[d];" for i in range(n_in)),
          "        }",
          "        oo = row * inner;"]
    for mode in ("contig", "strided"):
        if mode == "contig":
            L.append("        if (contig) {")
            for i, od in enumerate(k.operands):
                if i in inv:  # broadcast along the row: one load per row, hoisted
                    L.append(f"            const {ctype(od.dtype)} x{i} = in{i}[o{i}];")
                else:
                    L.append(f"            const {ctype(od.dtype)} *restrict x{i} = in{i} + o{i};")
            pragma = "#pragma omp simd" + (" reduction(|:keep)" if forced else "")
            load = lambda v: f"x{v.operand}" if v.operand in inv else f"x{v.operand}[j]"  # noqa
        else:
            L.append("        } else {")
            L.append("            " + " ".join(
                f"const int64_t s{i} = st{i}[nd - 1];" for i in range(n_in)))
            pragma = ""
            load = lambda v: f"in{v.operand}[o{v.operand} + j * s{v.operand}]"  # noqa: E731
        L += _element_loop(_stores(k.outputs, "oo + j"), load, "            ", "j0", "j1",
                           pragma, forced)
    L += ["        }", "    }"]
    if forced:
        L.append('    __asm__ volatile("" : : "r"(keep));  /* the flag sink is used */')
    L += ["    fl |= fetestexcept(DYN_FE);", "    }", "    return fl;", "}"]
    return "\n".join(_serial_path(L)) + "\n"


def _blocked_work(n_in: int, inv: set, forced: Any) -> list[str]:
    """The work split of a pointwise kernel: ``outer`` rows of ``inner`` elements in blocks of
    ``blk`` (``nwork`` blocks), whether the inner run is contiguous for every operand, and the
    parallel loop over the blocks up to this block's ``row``, ``j0`` and ``j1``. Hoisted
    (row-invariant) operands must really have stride 0 in the inner run: with a permuted
    domain (NumPy's output order for F-ordered inputs) they may not."""
    return ["    const int64_t inner = shape[nd - 1];",
            "    int64_t outer = 1;",
            "    for (int64_t d = 0; d < nd - 1; d++) outer *= shape[d];",
            "    const int64_t nblk = inner > 0 ? (inner + blk - 1) / blk : 0;",
            "    const int64_t nwork = outer * nblk;",
            "    const int contig = 1" + "".join(f" && st{i}[nd - 1] == {int(i not in inv)}"
                                               for i in range(n_in)) + ";",
            "    int fl = 0;",
            _PARALLEL,
            "    {",
            "    feclearexcept(FE_ALL_EXCEPT);",
            *(["    uint64_t keep = 0;"] if forced else []),
            "    #pragma omp for schedule(static)",
            "    for (int64_t w = 0; w < nwork; w++) {",
            "        const int64_t row = w / nblk, j0 = (w % nblk) * blk;",
            "        const int64_t j1 = j0 + blk < inner ? j0 + blk : inner;"]


def _rolled_pointwise_source(k: PointwiseKernel, L: list[str], slots: dict[Load, int],
                             inv: set[int], forced: list[Value]) -> str:
    """`pointwise_source` for a kernel with rolled Loads (an inlined ``np.roll``). Each roll
    slot ``m`` (a rolled Load) has its per-dim shifts ``rs<m>[nd]`` in ``[0, n)`` after the
    strides in ``A`` (`kernel.PointwiseRunner`, which never merges a rolled dim): along dim d
    it reads index ``i - rs[d]``, plus ``n`` when that is negative. Its row offset ``q<m>`` is
    computed like ``o<i>`` with the wrapped outer indices; along the inner dim the block is cut
    where a slot's index wraps (at ``j == rs[nd - 1]``), so between cuts every slot reads a
    unit-stride run and the ``omp simd`` loop stays a plain vector loop."""
    n_in = len(k.operands)
    order = list(slots)
    L += [f"    const int64_t *rs{m} = S + {n_in + m} * nd;" for m in range(len(order))]
    L += _blocked_work(n_in, inv, forced)
    L += [
          "        int64_t r = row" + "".join(f", o{i} = 0" for i in range(n_in))
          + "".join(f", q{m} = 0" for m in range(len(order))) + ", oo = 0;",
          "        for (int64_t d = nd - 2; d >= 0; d--) {",
          "            const int64_t i = r % shape[d]; r /= shape[d];",
          "            " + " ".join(f"o{i} += i * st{i}[d];" for i in range(n_in)),
          *[f"            q{m} += (i >= rs{m}[d] ? i - rs{m}[d] : i - rs{m}[d] + shape[d])"
            f" * st{ld.operand}[d];" for ld, m in slots.items()],
          "        }",
          "        oo = row * inner;",
          "        " + " ".join(f"const int64_t rr{m} = rs{m}[nd - 1];"
                              for m in range(len(order)))]

    def plain(v: Load, mode: str) -> str:
        if mode == "contig":
            return f"x{v.operand}" if v.operand in inv else f"x{v.operand}[j]"
        return f"in{v.operand}[o{v.operand} + j * s{v.operand}]"

    # contiguous rows: runs between the wrap points of the slots' inner indices
    L.append("        if (contig) {")
    for i, od in enumerate(k.operands):
        if i in inv:
            L.append(f"            const {ctype(od.dtype)} x{i} = in{i}[o{i}];")
        else:
            L.append(f"            const {ctype(od.dtype)} *restrict x{i} = in{i} + o{i};")
    for ld, m in slots.items():
        t = ctype(ld.dtype)
        if ld.operand in inv:  # inner stride 0: the inner shift moves nothing
            L.append(f"            const {t} y{m} = in{ld.operand}[q{m}];")
        else:
            L.append(f"            const {t} *restrict y{m} = in{ld.operand} + q{m};")
    L += ["            for (int64_t ja = j0, jb; ja < j1; ja = jb) {",
          "                jb = j1;",
          *[f"                if (rr{m} > ja && rr{m} < jb) jb = rr{m};"
            for m in range(len(order))],
          *[f"                const int64_t e{m} = ja >= rr{m} ? -rr{m} : inner - rr{m};"
            for ld, m in slots.items() if ld.operand not in inv]]

    def load_contig(v: Load) -> str:
        if not v.roll:
            return plain(v, "contig")
        m = slots[v]
        return f"y{m}" if v.operand in inv else f"y{m}[j + e{m}]"

    L += _element_loop(_stores(k.outputs, "oo + j"), load_contig, "                ", "ja",
                       "jb", "#pragma omp simd" + (" reduction(|:keep)" if forced else ""),
                       forced)
    L += ["            }"]
    # any other row: strided reads with the wrapped index computed per element
    L += ["        } else {",
          "            " + " ".join(f"const int64_t s{i} = st{i}[nd - 1];" for i in range(n_in))]

    def load_strided(v: Load) -> str:
        if not v.roll:
            return plain(v, "strided")
        m = slots[v]
        return (f"in{v.operand}[q{m} + (j >= rr{m} ? j - rr{m} : j - rr{m} + inner)"
                f" * s{v.operand}]")

    L += _element_loop(_stores(k.outputs, "oo + j"), load_strided, "            ", "j0", "j1",
                       "", forced)
    L += ["        }", "    }"]
    if forced:
        L.append('    __asm__ volatile("" : : "r"(keep));  /* the flag sink is used */')
    L += ["    fl |= fetestexcept(DYN_FE);", "    }", "    return fl;", "}"]
    return "\n".join(_serial_path(L)) + "\n"


# -- reductions --------------------------------------------------------------------------------

_INIT = {"sum": "0", "mean": "0", "prod": "1", "any": "0", "all": "1"}


def _combine(op: str, acc_dt: np.dtype) -> Callable[[str, str], str]:
    """acc <- combine(acc, v) for the sequential reductions."""
    probe = Op(op, (), acc_dt)
    table: dict[str, Callable[[str, str], str]] = {
        "sum": lambda a, v: OPS["add"]([a, v], probe),
        "mean": lambda a, v: OPS["add"]([a, v], probe),
        "prod": lambda a, v: OPS["multiply"]([a, v], probe),
        "max": lambda a, v: OPS["maximum"]([a, v], probe),
        "min": lambda a, v: OPS["minimum"]([a, v], probe),
        "any": lambda a, v: f"(uint8_t)({a} | ({v} != 0))",
        "all": lambda a, v: f"(uint8_t)({a} & ({v} != 0))",
    }
    return table[op]


def _is_costly(v: Value) -> bool:
    return any(isinstance(x, Op) and x.name in FLOAT_MATH for x in walk([v]))


def row_buffers(k: ReductionKernel) -> dict[int, int]:
    """Reductions whose prologue value is stored in an epilogue output: reduction index ->
    epilogue output index.

    Softmax's ``exp(x - max)`` is both summed and divided by the sum; instead of computing it
    twice, the sum phase writes it into the row of the (same-dtype) epilogue output, sums that
    row pairwise (bit-identical order), and the epilogue reads it back while the row is still
    in cache. Only for float sums/means of a value that calls a math function and that the
    epilogue reads; each output row holds one such value.
    """
    cached = k.__dict__.get("_row_buffers")
    if cached is not None:
        return cached
    out: dict[int, int] = {}
    if k.outputs:
        epilogue_values = set(walk(k.outputs))
        free = list(range(len(k.outputs)))
        for i, red in enumerate(k.reductions):
            v = red.value
            if (red.op in ("sum", "mean") and _is_float(red.acc_dtype)
                    and v.dtype == red.acc_dtype and v in epilogue_values and _is_costly(v)):
                e = next((e for e in free if k.outputs[e].dtype == v.dtype), None)
                if e is not None:
                    free.remove(e)
                    out[i] = e
    k.__dict__["_row_buffers"] = out
    return out


def _reduction_functions(k: ReductionKernel, i: int, red: Reduction) -> list[str]:
    """Element functions ``<name>_r<i>v{c,s}`` (prologue value, contiguous / strided) and, for
    float sums, NumPy's pairwise summation ``<name>_r<i>pw{c,s}`` (and ``pwb`` over the row
    buffer, see `row_buffers`)."""
    name, acc = f"{k.name}_r{i}", ctype(red.acc_dtype)
    conv = Op("cast", (red.value,), red.acc_dtype, red.value.dtype)
    L: list[str] = []
    variants: list[tuple[str, Callable[[Load], str] | None]] = [
        ("c", lambda v: f"r->p{v.operand}[j]"),
        ("s", lambda v: f"r->p{v.operand}[j * r->s{v.operand}]")]
    if _staged(red):  # read from the row buffer `_fill_row` filled, in every layout
        variants = [("c", None), ("s", None)]
    if i in row_buffers(k):
        variants.append(("b", None))
    for variant, load in variants:
        L += [f"static inline {acc} {name}v{variant}(const {k.name}_row *r, int64_t j)", "{"]
        if load is None:
            L += [f"    return r->b{i}[j];", "}"]
        else:
            lines, names = _body([conv], load, "    ")
            L += lines + [f"    return {names[conv]};", "}"]
        if red.op in ("sum", "mean") and _is_float(red.acc_dtype):
            f = f"{name}pw{variant}"
            v = f"{name}v{variant}"
            L += [
                # noinline: gcc -O3 would otherwise clone the recursion and triple compile time
                f"__attribute__((noinline)) static {acc} "
                f"{f}(const {k.name}_row *r, int64_t j0, int64_t n)",
                "{",
                "    if (n < 8) {",
                f"        {acc} res = 0;",
                f"        for (int64_t i = 0; i < n; i++) res += {v}(r, j0 + i);",
                "        return res;",
                "    } else if (n <= 128) {",
                f"        {acc} q[8];",
                f"        for (int k = 0; k < 8; k++) q[k] = {v}(r, j0 + k);",
                "        int64_t i;",
                "        for (i = 8; i < n - (n % 8); i += 8) {",
                f"            for (int k = 0; k < 8; k++) q[k] += {v}(r, j0 + i + k);",
                "        }",
                f"        {acc} res = ((q[0] + q[1]) + (q[2] + q[3])) + "
                "((q[4] + q[5]) + (q[6] + q[7]));",
                f"        for (; i < n; i++) res += {v}(r, j0 + i);",
                "        return res;",
                "    }",
                "    int64_t n2 = n / 2; n2 -= n2 % 8;",
                f"    return {f}(r, j0, n2) + {f}(r, j0 + n2, n - n2);",
                "}",
            ]
    return L


def _chunked_sum(c: Callable[[str], str], ind: str) -> list[str]:
    """``acc += `` the pairwise sum of the row's inner run, whole or, when the runtime passed a
    ``chunk`` length shorter than the run (NumPy <= 2.2, see `kernel.pairwise_split`), one
    pairwise sum per chunk, in order. ``c(args)``: the C of a pairwise sum given ``j0, n``."""
    return [f"{ind}if (chunk <= 0 || inner <= chunk) {{",
            f"{ind}    acc += {c('0, inner')};",
            f"{ind}}} else {{",
            f"{ind}    for (int64_t c0 = 0; c0 < inner; c0 += chunk) {{",
            f"{ind}        const int64_t cn = inner - c0 < chunk ? inner - c0 : chunk;",
            f"{ind}        acc += {c('c0, cn')};",
            f"{ind}    }}",
            f"{ind}}}"]


def _staged(red: Reduction) -> bool:
    """Does this reduction's value call a NumPy loop? Then its element functions read the row
    from a buffer filled block by block first (`_fill_row`), never compute one element."""
    return any(_calls_numpy(v) for v in walk([red.value]))


def _fill_row(red: Reduction, buf: str, ind: str) -> list[str]:
    """``buf[j] = value`` over the current row (contiguous or strided operands)."""
    L: list[str] = []
    for variant in ("contig", "strided"):
        if variant == "contig":
            L += [f"{ind}if (contig) {{"]
            pragma, load = "#pragma omp simd", lambda v: f"row.p{v.operand}[j]"
        else:
            L += [f"{ind}}} else {{"]
            pragma, load = "", lambda v: f"row.p{v.operand}[j * row.s{v.operand}]"
        L += _element_loop([(red.value, f"{buf}[j]")], load, ind, "0", "inner", pragma,
                           rowref=lambda rr: f"row.r{rr.index}")
    return L + [f"{ind}}}"]


def _reduction_phase(k: ReductionKernel, i: int, red: Reduction) -> list[str]:
    """The C of one reduction over the current row; leaves the result in ``row.r<i>``."""
    name, acc = f"{k.name}_r{i}", ctype(red.acc_dtype)
    arg = red.op in ("argmax", "argmin")
    ind = "        "
    L = [f"{ind}{{"]
    buffered = row_buffers(k).get(i)
    if buffered is not None:
        # Compute the row's values once into the epilogue output (vectorised), then sum them
        # pairwise from there.
        n_red = len(k.reductions)
        L += [f"{ind}{acc} acc = 0;",
              f"{ind}for (int64_t q = 0; q < nrows; q++) {{",
              f"{ind}    {k.name}_at(&row, q);",
              f"{ind}    {acc} *restrict bq = out{n_red + buffered} + (o * nrows + q) * inner;",
              f"{ind}    row.b{i} = bq;",
              *_fill_row(red, "bq", ind + "    "),
              *_chunked_sum(lambda a: f"{name}pwb(&row, {a})", ind + "    ")]
    elif arg:
        L += [f"{ind}int64_t best = 0, pos = 0;", f"{ind}{acc} m = 0; int stop = 0;"]
    else:
        init = _INIT.get(red.op)
        L += [f"{ind}{acc} acc = {init};" if init else f"{ind}{acc} acc = 0; int first = 1;"]
    if buffered is None:
        L += [f"{ind}for (int64_t q = 0; q < nrows; q++) {{", f"{ind}    {k.name}_at(&row, q);"]
        if _staged(red):  # the row's values first (NumPy's loops on blocks), then the phase
            L += [f"{ind}    row.b{i} = scratch{i};", *_fill_row(red, f"scratch{i}", ind + "    ")]
    if buffered is not None:
        pass  # the phase is complete (above)
    elif red.op in ("sum", "mean") and _is_float(red.acc_dtype):
        L += _chunked_sum(lambda a: f"contig ? {name}pwc(&row, {a}) : {name}pws(&row, {a})",
                          ind + "    ")
    elif arg:
        # NumPy: the first extreme wins, a NaN wins at once (quiet comparisons: no FP flags).
        if _is_float(red.acc_dtype):
            cmp_expr = ("DYN_LE(v, m)" if red.op == "argmax" else "DYN_GE(v, m)")
            nan_stop = " if (isnan(m)) { stop = 1; break; }"
        else:
            cmp_expr = "(v <= m)" if red.op == "argmax" else "(v >= m)"
            nan_stop = ""
        L += [f"{ind}    if (stop) break;",
              f"{ind}    for (int64_t j = 0; j < inner; j++, pos++) {{",
              f"{ind}        const {acc} v = {name}vs(&row, j);",
              f"{ind}        if (pos == 0 || !{cmp_expr}) {{ m = v; best = pos;{nan_stop} }}",
              f"{ind}    }}"]
    else:
        comb = _combine(red.op, red.acc_dtype)
        fast = red.op in ("max", "min") and _is_float(red.acc_dtype) and \
            isinstance(red.value, Load)
        if fast:
            # Max/min of plain loads: ordinary (signalling) compares vectorise to 2-3
            # instructions instead of the integer-key ones; a NaN input would set FE_INVALID,
            # which NumPy does not report, and loads cannot raise anything else, so the flag
            # is restored after the phase.
            sym = ">" if red.op == "max" else "<"
            comb = lambda a, v: f"((({a} {sym} {v}) | ({a} != {a})) ? {a} : {v})"  # noqa: E731
            L += [f"{ind}    const int fe_keep = fetestexcept(FE_INVALID);"]
        if red.op in ("max", "min"):
            # 32 independent lanes (several vector registers: the compare/blend chain of one
            # register is latency-bound), combined at the end of the row, then the tail.
            # NaN propagation does not depend on the order.
            L += [f"{ind}    int64_t j = 0;",
                  f"{ind}    if (contig && inner >= 64) {{",
                  f"{ind}        {acc} mv[32];",
                  f"{ind}        for (int k = 0; k < 32; k++) mv[k] = {name}vc(&row, k);",
                  f"{ind}        for (j = 32; j + 32 <= inner; j += 32) {{",
                  f"{ind}            #pragma omp simd",
                  f"{ind}            for (int k = 0; k < 32; k++) {{",
                  f"{ind}                const {acc} v = {name}vc(&row, j + k);",
                  f"{ind}                mv[k] = {comb('mv[k]', 'v')};",
                  f"{ind}            }}",
                  f"{ind}        }}",
                  f"{ind}        for (int k = 0; k < 32; k++) {{",
                  f"{ind}            acc = first ? mv[k] : {comb('acc', 'mv[k]')}; first = 0;",
                  f"{ind}        }}",
                  f"{ind}    }}",
                  f"{ind}    for (; j < inner; j++) {{",
                  f"{ind}        const {acc} v = contig ? {name}vc(&row, j) : {name}vs(&row, j);",
                  f"{ind}        acc = first ? v : {comb('acc', 'v')}; first = 0;",
                  f"{ind}    }}"]
            if fast:
                L += [f"{ind}    if (!fe_keep) feclearexcept(FE_INVALID);"]
        else:
            L += [f"{ind}    if (contig) {{",
                  f"{ind}        for (int64_t j = 0; j < inner; j++) "
                  f"acc = {comb('acc', f'{name}vc(&row, j)')};",
                  f"{ind}    }} else {{",
                  f"{ind}        for (int64_t j = 0; j < inner; j++) "
                  f"acc = {comb('acc', f'{name}vs(&row, j)')};",
                  f"{ind}    }}"]
    L.append(f"{ind}}}")
    out_t = _red_out_ctype(red)
    if arg:
        res = "best"
    elif red.op == "mean":
        res = f"({out_t})(acc / ({acc})(nrows * inner))"
    else:
        res = f"({out_t})acc"
    L += [f"{ind}row.r{i} = {res};", f"{ind}rout{i}[o] = row.r{i};", f"{ind}}}"]
    return L


def _red_out_ctype(red: Reduction) -> str:
    return "int64_t" if red.op in ("argmax", "argmin") else ctype(red.out_dtype)


def reduction_source(k: ReductionKernel) -> str:
    """C for a reduction kernel (a row program, see `loop_ir.ReductionKernel`).

    ``A = [threads, parallel, nk, nr, kept shape[nk], reduced shape[nr], then per input: kept
    strides[nk], reduced strides[nr], then chunk]`` (``chunk``: 0, or the length of the pieces
    a float sum's inner run is summed in, NumPy <= 2.2's buffer size); ``P`` = input data
    pointers, then one output per reduction (contiguous over the kept dims), then the epilogue
    outputs (C-contiguous over the domain); ``nk >= 1`` and ``nr >= 1`` (the runtime pads with
    size-1 dims). The last reduced dim is the inner run, summed pairwise (NumPy's algorithm)
    for floats, whole or in ``chunk``-long pieces (`_chunked_sum`).
    """
    n_in, name = len(k.operands), k.name
    if rolled_loads(k.values):  # fusion keeps rolls out of row kernels: never read them here
        raise ValueError(f"{name}: a row kernel cannot read rolled operands")
    preset_values = {k.reductions[i].value for i in row_buffers(k)}
    forced = forced_values(k.outputs, preset_values) if k.outputs else []
    fields = "".join(f" const {ctype(o.dtype)} *p{i}; int64_t s{i};"
                     for i, o in enumerate(k.operands))
    fields += "".join(f" {_red_out_ctype(r)} r{i};" for i, r in enumerate(k.reductions))
    fields += "".join(f" const {ctype(k.reductions[i].acc_dtype)} *b{i};"
                      for i in row_buffers(k))
    # reductions of values from NumPy loops read rows from a per-thread scratch buffer
    scratch = [i for i, r in enumerate(k.reductions) if _staged(r) and i not in row_buffers(k)]
    fields += "".join(f" const {ctype(k.reductions[i].acc_dtype)} *b{i};" for i in scratch)
    fields += " const int64_t *S; int64_t nk, nr; const int64_t *rshape; int64_t base[%d];" % \
        max(1, n_in)
    fields += "".join(f" const void *S_ptr{i};" for i in range(n_in))
    L = [f"typedef struct {{{fields} }} {name}_row;",
         # Point the row's operand pointers at reduced row q (all but the last reduced dim).
         f"static inline void {name}_at({name}_row *row, int64_t q)", "{",
         "    const int64_t nd = row->nk + row->nr;",
         "    " + " ".join(f"int64_t o{i} = row->base[{i}];" for i in range(n_in)),
         "    for (int64_t d = row->nr - 2; d >= 0; d--) {",
         "        const int64_t i = q % row->rshape[d]; q /= row->rshape[d];",
         "        " + " ".join(f"o{i} += i * row->S[{i} * nd + row->nk + d];"
                             for i in range(n_in)),
         "    }",
         "    " + " ".join(f"row->p{i} = ((const {ctype(o.dtype)} *)row->S_ptr{i}) + o{i};"
                         for i, o in enumerate(k.operands)),
         "}"]
    for i, red in enumerate(k.reductions):
        L += _reduction_functions(k, i, red)
    outs = [_red_out_ctype(r) for r in k.reductions] + [ctype(v.dtype) for v in k.outputs]
    L += [f"int {name}(const int64_t *A, char **P)", "{",
          "    const int nthreads = (int)A[0], par = (int)A[1];",
          "    const int64_t nk = A[2], nr = A[3];",
          "    const int64_t *kshape = A + 4, *rshape = A + 4 + nk, *S = A + 4 + nk + nr;",
          "    const int64_t nd = nk + nr;"]
    L += _operand_decls(k, n_in, outs)
    L += [f"    {t} *restrict rout{i} = out{i};" for i, t in enumerate(outs[:len(k.reductions)])]
    L += ["    int64_t nout = 1, nrows = 1;",
          "    for (int64_t d = 0; d < nk; d++) nout *= kshape[d];",
          "    for (int64_t d = 0; d < nr - 1; d++) nrows *= rshape[d];",
          "    const int64_t inner = rshape[nr - 1];",
          # The pairwise chunk length (0: the whole inner run; see `_chunked_sum`).
          f"    const int64_t chunk = S[{n_in} * nd];",
          "    const int contig = 1" + "".join(f" && st{i}[nk + nr - 1] == 1"
                                             for i in range(n_in)) + ";",
          "    int fl = 0;",
          "    #pragma omp parallel num_threads(nthreads) if(par) reduction(|:fl)",
          "    {",
          "    feclearexcept(FE_ALL_EXCEPT);",
          *(["    uint64_t keep = 0;"] if forced else []),
          *[f"    {ctype(k.reductions[i].acc_dtype)} *scratch{i} = "
            f"malloc(sizeof *scratch{i} * (inner > 0 ? inner : 1));" for i in scratch],
          "    #pragma omp for schedule(static)",
          "    for (int64_t o = 0; o < nout; o++) {",
          *([" ".join(["        if (", " || ".join(f"!scratch{i}" for i in scratch),
                       ") { fl |= DYN_NO_MEMORY; continue; }"])] if scratch else []),
          f"        {name}_row row;",
          "        row.S = S; row.nk = nk; row.nr = nr; row.rshape = rshape;",
          "        int64_t r = o;",
          "        " + " ".join(f"row.base[{i}] = 0; row.S_ptr{i} = in{i}; row.s{i} = "
                             f"st{i}[nd - 1];" for i in range(n_in)),
          "        for (int64_t d = nk - 1; d >= 0; d--) {",
          "            const int64_t i = r % kshape[d]; r /= kshape[d];",
          "            " + " ".join(f"row.base[{i}] += i * st{i}[d];" for i in range(n_in)),
          "        }"]
    for i, red in enumerate(k.reductions):
        L += _reduction_phase(k, i, red)
    if k.outputs:
        # Epilogue: the pointwise outputs over this row (axes are trailing: the row is a
        # contiguous stretch of nrows * inner elements of every output).
        n_red = len(k.reductions)
        L += ["        for (int64_t q = 0; q < nrows; q++) {",
              f"            {name}_at(&row, q);",
              "            const int64_t oo = (o * nrows + q) * inner;",
              "            const " + name + "_row *rp = &row;"]
        for variant in ("contig", "strided"):
            if variant == "contig":
                L += ["            if (contig) {"]
                pragma = "#pragma omp simd" + (" reduction(|:keep)" if forced else "")
                load = lambda v: f"rp->p{v.operand}[j]"  # noqa: E731
            else:
                L += ["            } else {"]
                pragma = ""
                load = lambda v: f"rp->p{v.operand}[j * rp->s{v.operand}]"  # noqa: E731
            preset = {k.reductions[i].value: f"out{n_red + e}[oo + j]"
                      for i, e in row_buffers(k).items()}
            L += _element_loop(_stores(k.outputs, "oo + j", n_red), load, "            ", "0",
                               "inner", pragma, forced, lambda rr: f"rp->r{rr.index}", preset)
        L += ["            }", "        }"]
    L += ["    }"]
    L += [f"    free(scratch{i});" for i in scratch]
    if forced:
        L.append('    __asm__ volatile("" : : "r"(keep));  /* the flag sink is used */')
    L += ["    fl |= fetestexcept(DYN_FE);", "    }", "    return fl;", "}"]
    return "\n".join(_serial_path(L)) + "\n"


def kernel_source(k: Kernel) -> str:
    """C source of one kernel (no includes); memoised on the kernel object."""
    src = k.__dict__.get("_source")
    if src is None:
        src = pointwise_source(k) if k.kind == "pointwise" else reduction_source(k)
        k.__dict__["_source"] = src
    return src


#: libm functions glibc's libmvec has vector variants of (glibc >= 2.35). Declaring them
#: ``omp declare simd`` lets gcc call e.g. ``_ZGVdN4v_exp`` from ``omp simd`` loops without
#: -ffast-math (glibc's own declarations are only active under __FAST_MATH__).
VECTOR_MATH = frozenset(
    "exp log sin cos pow acos acosh asin asinh atan atan2 atanh cbrt cosh exp2 expm1 hypot "
    "log10 log1p log2 sinh tan tanh".split()
)


def _simd_declarations(kernels: list[Kernel]) -> str:
    used: set[tuple[str, np.dtype]] = set()
    for k in kernels:
        values = k.outputs if k.kind == "pointwise" else k.values
        for v in walk(values):
            if isinstance(v, Op) and FLOAT_MATH.get(v.name) in VECTOR_MATH \
                    and not _calls_numpy(v):
                used.add((FLOAT_MATH[v.name], np.dtype(v.dtype)))
    lines = []
    for fn, dt in sorted(used, key=str):
        t = ctype(dt)
        params = ", ".join([t] * (2 if fn in ("pow", "atan2", "hypot") else 1))
        lines.append(f"#pragma omp declare simd notinbranch\nextern {t} {fn}{_suffix(dt)}({params});")
    return "\n".join(lines) + "\n" if lines else ""


def module_source(kernels: list[Kernel], vector_math: bool = True) -> str:
    """One translation unit holding every kernel of a graph. Kernels whose C is the same but
    for their name (an unrolled loop makes hundreds: jacobi_1d 200 of one, floyd_warshall 120
    of one) are compiled once: each later one is a call of the first, so gcc's time grows with
    the distinct kernels, not with the loop's length."""
    decls = _simd_declarations(kernels) if vector_math else ""
    bodies = []
    first: dict[str, str] = {}  # kernel source without its name -> the kernel that has it
    for k in kernels:
        src = kernel_source(k)
        owner = first.setdefault(src.replace(k.name, "\0"), k.name)
        if owner == k.name:
            bodies.append(src)
        else:
            bodies.append(f"int {k.name}(const int64_t *A, char **P) "
                          f"{{ return {owner}(A, P); }}  /* the same as {owner} */\n")
    if any("DYN_BITS(" in b for b in bodies):
        decls += _KEEP_HELPERS
    slots = numpy_loop_slots(kernels)
    if slots:
        names = [f"DYN_NP_{name}_{dt.str[1:]}" for name, dt in slots]
        decls += (f"enum {{ {', '.join(f'{n} = {i}' for i, n in enumerate(names))}, "
                  f"DYN_NP_COUNT = {len(names)} }};\n" + _NUMPY_CALLS)
    return _PROLOGUE + decls + "\n" + "\n".join(bodies)


def cdef_for(kernels: list[Kernel]) -> str:
    """The cffi declarations of the exported kernel functions (and of the setter of the NumPy
    loops table, when a kernel calls one: `numpy_loop_slots`)."""
    lines = [f"int {k.name}(const int64_t *A, char **P);" for k in kernels]
    if numpy_loop_slots(kernels):
        lines.append("void npdynamo_set_numpy_loops(void *const *t);")
    return "\n".join(lines)
