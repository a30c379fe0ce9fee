"""Lowering: decide which fx nodes the C backend computes, and turn them into loop-IR values.

In: one fx node whose ``meta["val"]`` (and its inputs' metas) are `fx.ArrayMeta`. Out: a
`Lowered` plan (pointwise or reduction) with a ``build(get)`` function that, given the `Value` of
each input node, returns the node's `Value` (pointwise) or prologue `Value` (reduction); or
``None`` when the node stays a NumPy call. Called by `fusion.py`.

NumPy knowledge is data: operator functions map to ufunc names (`OPERATOR_UFUNCS`), ufunc loop
dtypes come from ``ufunc.resolve_dtypes`` (NEP 50 weak Python scalars included), and a few
non-ufunc functions/methods have one builder each (`FUNCTION_BUILDERS`, `METHOD_BUILDERS`;
``np.roll`` with constant shifts and axes is its input read through rolled Loads).
The lowering refuses (returns None) whenever NumPy's result could differ: unsupported dtypes
(float16, complex, ...), integer floor division/modulo/shifts, float->int casts, negative integer
powers, float powers NumPy computes with its own pow (all but 2, -1, 0.5, 0, 1; and -1 and 0.5
wherever NumPy uses pow for them: a NumPy scalar's ``**``, and on NumPy <= 2.2 ``np.power``
and integer bases, see `power_loop_special_cases`), integer arithmetic operators on NumPy
scalars (scalar math warns on overflow), keyword arguments such as ``out=``/``dtype=``/
``where=``, empty max/min/mean, and math functions the kernel computes with NumPy's own loop
(`c_expressions.NUMPY_LOOP`) when that loop cannot be used from C (`numpy_loops.numpy_loop`).
"""

from __future__ import annotations

import builtins
import operator
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from fx.meta import ArrayMeta

from .c_expressions import FLOAT_MATH, NUMPY_LOOP, OPS
from .loop_ir import SUPPORTED_DTYPES, Const, Load, Op, Value, roll_value
from .numpy_loops import numpy_loop

__all__ = ["Lowered", "lower", "OPERATOR_UFUNCS", "REDUCTIONS"]

#: operator / builtin functions recorded by the translator, as the ufunc they mean on arrays.
OPERATOR_UFUNCS: dict[Any, np.ufunc] = {
    operator.add: np.add, operator.sub: np.subtract, operator.mul: np.multiply,
    operator.truediv: np.true_divide, operator.neg: np.negative, operator.pos: np.positive,
    operator.abs: np.absolute, builtins.abs: np.absolute, operator.pow: np.power,
    operator.lt: np.less, operator.le: np.less_equal, operator.gt: np.greater,
    operator.ge: np.greater_equal, operator.eq: np.equal, operator.ne: np.not_equal,
    operator.and_: np.bitwise_and, operator.or_: np.bitwise_or, operator.xor: np.bitwise_xor,
    operator.invert: np.invert, operator.floordiv: np.floor_divide, operator.mod: np.remainder,
    operator.lshift: np.left_shift, operator.rshift: np.right_shift,
}

# ufuncs whose C form is only right for float loops / only defined for int or bool loops.
_FLOAT_ONLY = {"divide", "reciprocal", "isnan", "isinf", "isfinite", "signbit",
               *FLOAT_MATH}
_INT_ONLY = {"bitwise_and", "bitwise_or", "bitwise_xor", "invert"}
_NOT_UFUNC_OPS = {"where", "cast", "powi", "clip_lo", "clip_hi"}
#: Integer ops whose NumPy scalar math (an operator on NumPy scalars) warns on overflow.
_SCALAR_CHECKED = {"add", "subtract", "multiply", "negative", "absolute"}


@dataclass
class Lowered:
    """How one node is computed in C.

    ``kind``: "pointwise" or "reduction"; ``inputs``: the node inputs whose Values ``build``
    needs; ``shape``: the iteration domain (output shape; for a reduction, its input's shape).
    Reductions also carry ``op``, ``axes``, ``keepdims``, ``acc_dtype``, ``out_dtype``.
    """

    kind: str
    inputs: list[Any]
    shape: tuple[int, ...]
    build: Callable[[Callable[[Any], Value]], Value]
    op: str = ""
    axes: tuple[int, ...] = ()
    keepdims: bool = False
    acc_dtype: np.dtype | None = None
    out_dtype: np.dtype | None = None


class _Refuse(Exception):
    """This node stays a NumPy call."""


def _meta(x: Any) -> Any:
    val = getattr(x, "meta", {}).get("val") if hasattr(x, "meta") else None
    return val if isinstance(val, ArrayMeta) else None


def _is_node(x: Any) -> bool:
    return hasattr(x, "op") and hasattr(x, "meta") and hasattr(x, "users")


def _weak_or_strong(x: Any) -> Any:
    """What `ufunc.resolve_dtypes` wants for one argument."""
    if _is_node(x):
        m = _meta(x)
        if m is None:
            raise _Refuse("input without ArrayMeta")
        return m.dtype
    if isinstance(x, np.generic):
        return x.dtype
    if isinstance(x, bool):
        return np.dtype(bool)
    if isinstance(x, (int, float)):
        return type(x)
    raise _Refuse(f"constant of type {type(x).__name__}")


def _const(x: Any, dt: np.dtype) -> Const:
    if isinstance(x, np.generic):
        x = x.item()
    try:
        with np.errstate(all="ignore"):
            conv = dt.type(x)
    except (OverflowError, ValueError, TypeError):
        raise _Refuse(f"constant {x!r} does not fit {dt}") from None
    if dt.kind in "iub" and conv.item() != x:
        raise _Refuse(f"constant {x!r} does not fit {dt}")
    # (a Python int is finite, also beyond 64 bits where np.isfinite refuses it)
    if dt.kind == "f" and (isinstance(x, int) or np.isfinite(x)) and not np.isfinite(conv):
        # NEP 50: NumPy casts the weak Python float on every call and warns (or raises under
        # errstate) "overflow encountered in cast"; only the NumPy call does that.
        raise _Refuse(f"constant {x!r} overflows {dt} (NumPy warns on the cast)")
    return Const(conv.item(), dt)


def _convert(v: Value, dt: np.dtype) -> Value:
    if v.dtype == dt:
        return v
    if v.dtype.kind == "f" and dt.kind in "iu":
        raise _Refuse("float -> integer conversion")
    return Op("cast", (v,), dt, v.dtype)


def _arg_value(x: Any, dt: np.dtype, get: Callable[[Any], Value]) -> Value:
    return _convert(get(x), dt) if _is_node(x) else _const(x, dt)


def _check_dtype(dt: np.dtype) -> None:
    if np.dtype(dt) not in SUPPORTED_DTYPES:
        raise _Refuse(f"dtype {dt} is left to NumPy")


def _ufunc_plan(node: Any, uf: np.ufunc, args: tuple, out_meta: Any) -> Lowered:
    name = uf.__name__
    if uf.nout != 1 or len(args) != uf.nin:
        raise _Refuse(f"{name}: arity")
    if name not in OPS and name != "power":
        raise _Refuse(f"{name} has no C lowering")
    try:
        loop = uf.resolve_dtypes(tuple(_weak_or_strong(a) for a in args) + (None,))
    except Exception as exc:  # NumPy would raise: leave it to NumPy
        raise _Refuse(f"{name}: {exc}") from None
    in_dts, out_dt = loop[:-1], loop[-1]
    for dt in loop:
        _check_dtype(dt)
    if out_dt != out_meta.dtype:
        raise _Refuse(f"{name}: loop dtype {out_dt} != meta {out_meta.dtype}")
    kinds = {dt.kind for dt in in_dts}
    if name in _FLOAT_ONLY and name != "power" and kinds != {"f"}:
        raise _Refuse(f"{name} lowered for float loops only")
    if name in _INT_ONLY and not kinds <= {"i", "u", "b"}:
        raise _Refuse(f"{name} lowered for integer loops only")
    if len(set(in_dts)) != 1 and name not in ("power",):
        raise _Refuse(f"{name}: mixed loop input dtypes {in_dts}")
    if name in NUMPY_LOOP and numpy_loop(name, out_dt) is None:
        raise _Refuse(f"{name}: NumPy's own {out_dt} loop is not usable from C here")
    if (name in _SCALAR_CHECKED and out_dt.kind in "iu" and node.target is not uf
            and all(_meta(a).is_scalar for a in args if _is_node(a))):
        # Python operators on NumPy integer scalars run NumPy's scalar math, which checks
        # for overflow ("overflow encountered in scalar add"); the ufunc loop (and a kernel)
        # wraps silently. One element is no work for a kernel anyway.
        raise _Refuse(f"{name} on NumPy integer scalars (scalar math warns on overflow)")
    param = None
    op_name = name
    if name == "power":
        op_name, param = _power_plan(args[1], in_dts[0], node.target is uf, args[0])
    nodes = [a for a in args if _is_node(a)]

    def build(get: Callable[[Any], Value]) -> Value:
        vals = tuple(_arg_value(a, dt, get) for a, dt in zip(args, in_dts))
        if op_name in ("powi", "sqrt", "reciprocal"):
            vals = vals[:1]
        return Op(op_name, vals, out_dt, in_dts[0], param)

    return Lowered("pointwise", nodes, out_meta.shape, build)


#: What `power_loop_special_cases` found (None until it is first asked).
_power_loop: bool | None = None


def power_loop_special_cases() -> bool:
    """Whether NumPy's float power loop itself computes ``x ** 0.5`` as ``sqrt(x)`` and
    ``x ** -1`` as ``1 / x`` (NumPy >= 2.3), found once by a probe. NumPy <= 2.2 special-cases
    them only in the ``**`` operator on a float array (``fast_scalar_power``): ``np.power``,
    integer bases and NumPy scalars go through its pow loop, whose results differ ((-0.0) **
    0.5 is +0.0, (-inf) ** 0.5 is inf, and last bits: 1e300 ** -1 is not 1e-300)."""
    global _power_loop
    if _power_loop is None:
        x = np.array([-0.0, -np.inf, 2.0, 3.0, 1e300, 7.1e-5, 123456.789])
        with np.errstate(all="ignore"):
            pairs = [(np.power(x, 0.5), np.sqrt(x)), (np.power(x, -1.0), np.reciprocal(x))]
        _power_loop = all(a.tobytes() == b.tobytes() for a, b in pairs)
    return _power_loop


def _power_plan(exponent: Any, dt: np.dtype, ufunc_call: bool = False,
                base: Any = None) -> tuple[str, Any]:
    # Float exponents do what NumPy's power loop does (on NumPy >= 2.3 `x ** k` and
    # `np.power` agree bit for bit; on 2.2 only `**` on a float array special-cases -1 and
    # 0.5, see `power_loop_special_cases`): 2 is a square, -1 a reciprocal and 0.5 a sqrt (so
    # (-0.0) ** 0.5 is -0.0 and (-inf) ** 0.5 is nan, unlike C's pow); 0 and 1 are exact.
    # Every other float exponent, 3 and 4 included, stays a NumPy call: NumPy's loop calls
    # its own pow (SVML's on AVX-512 machines), whose last bit glibc's pow/libmvec and
    # repeated multiplies do not reproduce (multiplies differed on 26-50% of x ** 3, pow on a
    # few percent), and the backend does not guess bits. Integer powers are exact by repeated
    # squaring; their exponents must be non-negative constants (NumPy raises for negative ones
    # and the loop would not). Array exponents stay NumPy calls.
    if _is_node(exponent):
        raise _Refuse("power with an array exponent")
    e = exponent.item() if isinstance(exponent, np.generic) else exponent
    if dt.kind == "f":
        if float(e) in (0.0, 1.0, 2.0):
            return "powi", int(e)
        if float(e) in (-1.0, 0.5):
            # NumPy's ** on a NumPy scalar is scalar math (C pow: (-0.0) ** 0.5 is +0.0) in
            # every version; on an array it is sqrt/reciprocal where NumPy special-cases it.
            meta = _meta(base) if _is_node(base) else None
            array = meta is not None and not meta.is_scalar
            loop = power_loop_special_cases()
            if not (loop if ufunc_call else array and (loop or meta.dtype.kind == "f")):
                raise _Refuse(f"float power with exponent {e!r}: NumPy computes it with pow "
                              "here (scalar math, or a pow loop without its sqrt/reciprocal "
                              "special case)")
        if float(e) == -1.0:
            return "reciprocal", None
        if float(e) == 0.5:
            return "sqrt", None
        raise _Refuse(f"float power with exponent {e!r}: NumPy's pow loop (its last bit is "
                      "NumPy's own)")
    if isinstance(e, (int, np.integer)) and not isinstance(e, bool) and 0 <= e <= 64:
        return "powi", int(e)
    raise _Refuse("integer power exponent must be a constant in [0, 64]")


def _where_plan(node: Any, args: tuple, kwargs: dict, out_meta: Any) -> Lowered:
    if kwargs or len(args) != 3:
        raise _Refuse("where: needs exactly (cond, x, y)")
    if any(_is_node(a) and _meta(a) is None for a in args):
        # a size read at run time or a Python number that is a graph input: not an array
        raise _Refuse("where: an operand that is not an array")
    dt = out_meta.dtype

    def build(get: Callable[[Any], Value]) -> Value:
        c = _arg_value(args[0], np.dtype(bool), get)
        return Op("where", (c, _arg_value(args[1], dt, get), _arg_value(args[2], dt, get)), dt)

    return Lowered("pointwise", [a for a in args if _is_node(a)], out_meta.shape, build)


def _clip_plan(node: Any, args: tuple, kwargs: dict, out_meta: Any) -> Lowered:
    bound = dict(zip(("a", "a_min", "a_max"), args))
    for key, alias in (("a_min", "min"), ("a_max", "max")):
        if alias in kwargs:
            bound[key] = kwargs[alias]
        elif key in kwargs:
            bound[key] = kwargs[key]
    if set(kwargs) - {"a_min", "a_max", "min", "max"} or len(args) > 3:
        raise _Refuse("clip: unsupported arguments")
    dt = out_meta.dtype
    lo, hi = bound.get("a_min"), bound.get("a_max")
    if lo is None and hi is None:
        raise _Refuse("clip without bounds")
    if _is_node(lo) or _is_node(hi):
        # NumPy's clip keeps x on a tie with a scalar bound but takes the bound on a tie with
        # an array bound (clip(-0.0, 0.0) is -0.0 or 0.0): only constant bounds are lowered.
        raise _Refuse("clip with array bounds")

    def build(get: Callable[[Any], Value]) -> Value:
        v = _arg_value(bound["a"], dt, get)
        if lo is not None:
            v = Op("clip_lo", (v, _arg_value(lo, dt, get)), dt, dt)
        if hi is not None:
            v = Op("clip_hi", (v, _arg_value(hi, dt, get)), dt, dt)
        return v

    nodes = [x for x in (bound["a"], lo, hi) if _is_node(x)]
    return Lowered("pointwise", nodes, out_meta.shape, build)


def _astype_plan(node: Any, args: tuple, kwargs: dict, out_meta: Any) -> Lowered:
    if len(args) != 2 or set(kwargs) - {"copy"} or kwargs.get("copy", True) is not True:
        raise _Refuse("astype: only astype(dtype) is lowered")
    src = _meta(args[0])
    dt = out_meta.dtype
    if src is None or (src.dtype.kind == "f" and dt.kind in "iu"):
        raise _Refuse("astype: float -> integer casts stay in NumPy")

    def build(get: Callable[[Any], Value]) -> Value:
        v = get(args[0])
        return v if v.dtype == dt and not isinstance(v, Load) else Op("cast", (v,), dt, v.dtype)

    return Lowered("pointwise", [args[0]], out_meta.shape, build)


def _roll_ints(x: Any) -> tuple[int, ...] | None:
    items = x if isinstance(x, (tuple, list)) else (x,)
    if not all(isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))
               for i in items):
        return None
    return tuple(int(i) for i in items)


def _roll_plan(node: Any, args: tuple, kwargs: dict, out_meta: Any) -> Lowered:
    # np.roll(a, shift, axis): out[i] = a[(i - shift) mod n] along each axis (shifts on one
    # axis add up), a copy laid out like `a` (empty_like). Lowered as the input's expression
    # read through rolled Loads (`loop_ir.roll_value`): only moves values, so bit-exact.
    # axis=None (a roll of the flattened array) stays a NumPy call.
    names = ("a", "shift", "axis")
    if len(args) > 3 or set(kwargs) - set(names) or set(names[:len(args)]) & set(kwargs):
        raise _Refuse("roll: bad arguments")
    bound = dict(zip(names, args))
    bound.update(kwargs)
    src, axis = bound.get("a"), bound.get("axis")
    m = _meta(src) if _is_node(src) else None
    if m is None or axis is None or "shift" not in bound:
        raise _Refuse("roll: only an array rolled along given axes is lowered")
    if m.dtype != out_meta.dtype or tuple(m.shape) != tuple(out_meta.shape) or m.ndim == 0:
        raise _Refuse("roll: result is not the input's shape and dtype")
    shifts, axes = _roll_ints(bound["shift"]), _roll_ints(axis)
    if shifts is None or axes is None:
        raise _Refuse("roll: shift and axis must be constant integers")
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    elif len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes) or not all(-m.ndim <= a < m.ndim for a in axes):
        raise _Refuse("roll: shift/axis mismatch")
    pairs = [(a % m.ndim, s) for a, s in zip(axes, shifts)]

    def build(get: Callable[[Any], Value]) -> Value:
        v = get(src)
        for a, s in pairs:
            v = roll_value(v, a, s, m.shape[a])
        # A roll that moves nothing is a copy (never the input's own value), as astype's.
        return Op("cast", (v,), v.dtype, v.dtype) if isinstance(v, Load) and not v.roll else v

    return Lowered("pointwise", [src], out_meta.shape, build, op="roll")


# -- reductions ------------------------------------------------------------------------------

#: reduction name -> positional parameter names after the array (NumPy's signatures).
REDUCTIONS: dict[str, tuple[str, ...]] = {
    "sum": ("axis", "dtype", "out", "keepdims", "initial", "where"),
    "prod": ("axis", "dtype", "out", "keepdims", "initial", "where"),
    "mean": ("axis", "dtype", "out", "keepdims", "where"),
    "max": ("axis", "out", "keepdims", "initial", "where"),
    "min": ("axis", "out", "keepdims", "initial", "where"),
    "any": ("axis", "out", "keepdims", "where"),
    "all": ("axis", "out", "keepdims", "where"),
    "argmax": ("axis", "out", "keepdims"),
    "argmin": ("axis", "out", "keepdims"),
}
_FUNC_REDUCTIONS = {np.sum: "sum", np.prod: "prod", np.mean: "mean", np.max: "max",
                    np.amax: "max", np.min: "min", np.amin: "min", np.any: "any", np.all: "all",
                    np.argmax: "argmax", np.argmin: "argmin"}


def _may_be_zero(size: Any) -> bool:
    """Can this size (an int or an `fx.symbolic.Sym`) be 0 at run time? From a symbol's bounds
    only: comparing a Sym would record a guard fact after the guards were built."""
    if type(size) is int:
        return size == 0
    lower = getattr(size, "lower_bound", None)
    return lower is None or lower() < 1


def _reduction_plan(node: Any, name: str, args: tuple, kwargs: dict, out_meta: Any) -> Lowered:
    src, rest = args[0], args[1:]
    params = dict(zip(REDUCTIONS[name], rest))
    if len(rest) > len(REDUCTIONS[name]) or set(params) & set(kwargs):
        raise _Refuse(f"{name}: bad arguments")
    params.update(kwargs)
    if set(params) - {"axis", "keepdims", "dtype", "out"} or params.get("dtype") is not None \
            or params.get("out") is not None:
        raise _Refuse(f"{name}: only axis= and keepdims= are lowered")
    m = _meta(src) if _is_node(src) else None
    if m is None:
        raise _Refuse(f"{name} of a constant")
    _check_dtype(m.dtype)
    _check_dtype(out_meta.dtype)
    keepdims = params.get("keepdims", False)
    if not isinstance(keepdims, (bool, np.bool_)):
        raise _Refuse("keepdims must be a constant bool")
    axis = params.get("axis")
    nd = m.ndim
    if axis is None:
        axes = tuple(range(nd))
    else:
        raw = axis if isinstance(axis, tuple) else (axis,)
        if name.startswith("arg") and isinstance(axis, tuple):
            raise _Refuse("argmax/argmin take one axis")
        if not all(isinstance(a, (int, np.integer)) and -nd <= a < nd for a in raw):
            raise _Refuse(f"{name}: axis {axis!r}")
        axes = tuple(sorted({int(a) % nd for a in raw}))
        if len(axes) != len(raw):
            raise _Refuse("repeated axis")
    if name in ("max", "min", "argmax", "argmin", "mean") and any(_may_be_zero(m.shape[a])
                                                                  for a in axes):
        raise _Refuse(f"{name} of an axis that is or may be empty (NumPy raises or warns)")
    if nd == 0 and name in ("max", "min", "argmax", "argmin", "mean"):
        axes = ()
    acc = {"any": np.dtype(bool), "all": np.dtype(bool), "max": m.dtype, "min": m.dtype,
           "argmax": m.dtype, "argmin": m.dtype}.get(name, out_meta.dtype)
    expected = {"argmax": np.dtype(np.intp), "argmin": np.dtype(np.intp)}.get(name, acc)
    if out_meta.dtype != expected:
        raise _Refuse(f"{name}: result dtype {out_meta.dtype} != expected {expected}")
    if acc.kind in "iu" and m.dtype.kind == "f":
        raise _Refuse("float -> integer accumulation")

    def build(get: Callable[[Any], Value]) -> Value:
        return get(src)

    return Lowered("reduction", [src], m.shape, build, op=name, axes=axes,
                   keepdims=bool(keepdims), acc_dtype=acc, out_dtype=out_meta.dtype)


# -- dispatch ----------------------------------------------------------------------------------

FUNCTION_BUILDERS: dict[Any, Callable[..., Lowered]] = {np.where: _where_plan, np.clip: _clip_plan,
                                                        np.roll: _roll_plan}
METHOD_BUILDERS: dict[str, Callable[..., Lowered]] = {"astype": _astype_plan,
                                                      "clip": _clip_plan}


def _plan(node: Any) -> Lowered:
    out_meta = _meta(node)
    if out_meta is None:
        raise _Refuse("result is not an array/scalar")
    _check_dtype(out_meta.dtype)
    args, kwargs, target = tuple(node.args), dict(node.kwargs), node.target
    if node.op == "call_function":
        uf = target if isinstance(target, np.ufunc) else OPERATOR_UFUNCS.get(target)
        if uf is not None:
            if kwargs:
                raise _Refuse("ufunc keyword arguments (out=, dtype=, where=, ...)")
            return _ufunc_plan(node, uf, args, out_meta)
        if target in _FUNC_REDUCTIONS:
            return _reduction_plan(node, _FUNC_REDUCTIONS[target], args, kwargs, out_meta)
        if target in FUNCTION_BUILDERS:
            return FUNCTION_BUILDERS[target](node, args, kwargs, out_meta)
    elif node.op == "call_method":
        if target in REDUCTIONS:
            return _reduction_plan(node, target, args, kwargs, out_meta)
        if target in METHOD_BUILDERS:
            return METHOD_BUILDERS[target](node, args, kwargs, out_meta)
    raise _Refuse(f"no lowering for {node.op} {getattr(target, '__name__', target)}")


def lower(node: Any) -> tuple[Lowered | None, str]:
    """The plan for ``node`` and "" - or None and the reason it stays a NumPy call."""
    try:
        plan = _plan(node)
        # Dry run: building with placeholder loads must succeed (constants fit, casts allowed).
        plan.build(lambda n: Load(0, _meta(n).dtype))
        for x in plan.inputs:
            _check_dtype(_meta(x).dtype)
        return plan, ""
    except _Refuse as exc:
        return None, str(exc)
