"""Floating-point flags gcc must not optimise away: which values a kernel keeps computing.

In: the values of a kernel (``loop_ir``). Out: whether an op may raise a flag (`raises_fp`),
whether its C needs an operand for every element (`keeps`), the values that may flag but that
no stored output needs (`forced_values`), and the C that keeps those alive (`keep_lines`, with
the helpers `KEEP_HELPERS` a translation unit declares when it uses them). Called by the kernel
printers (`c_pointwise`, `c_reduction`, `c_loops`) and by `fusion` (what a kernel may absorb).
"""

from __future__ import annotations

from typing import Container

import numpy as np

from .c_expressions import FLOAT_MATH
from .loop_ir import Const, Op, Value, walk

__all__ = ["ARITHMETIC", "FLAG_FREE", "KEEP_HELPERS", "forced_values", "keep_lines", "keeps",
           "raises_fp"]

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


def keep_lines(forced: list[Value], names: dict, indent: str) -> list[str]:
    return [f"{indent}keep |= DYN_BITS({names[v]});" for v in forced]


#: Declared by a translation unit whose kernels keep values (its C text, "see codegen_c" too,
#: is part of the disk cache's key: kept as it is).
KEEP_HELPERS = """\
/* Flag sink: values whose FP flags count but whose results are not needed (see codegen_c). */
static inline uint64_t dyn_bits_d(double x) { uint64_t i; __builtin_memcpy(&i, &x, 8);
    return i; }
static inline uint64_t dyn_bits_f(float x) { uint32_t i; __builtin_memcpy(&i, &x, 4);
    return i; }
#define DYN_BITS(x) _Generic((x), float: dyn_bits_f, default: dyn_bits_d)(x)
"""
