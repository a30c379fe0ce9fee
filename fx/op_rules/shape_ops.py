"""Rules for shape manipulation: views (reshape, transpose, swapaxes, moveaxis, squeeze,
expand_dims, broadcast_to, atleast_*d, flip, rot90, diagonal), copies (ravel, copy, astype) and
joins (concatenate, stack, vstack, hstack).

View functions run on zero-strided full-shape stand-ins: NumPy computes the exact result shape
and validates everything, and no data is allocated because the result is again a view.
"""

from __future__ import annotations

import operator
from math import prod
from typing import Any

import numpy as np

from fx.meta import ArrayMeta
from fx.op_rules._core import (
    Call, Result, RuleError, _has_symbols, contains_meta, given, normalize_axes, register,
    shape_of, specialize_call, symbolic,
)
from fx.symbolic import Sym, hint, is_data_dependent, is_symbolic

__all__ = ["VIEW_FUNCTIONS", "view_rule"]

VIEW_FUNCTIONS = (
    np.reshape, np.transpose, np.swapaxes, np.moveaxis, np.squeeze, np.expand_dims,
    np.broadcast_to, np.matrix_transpose, np.permute_dims, np.flip, np.fliplr, np.flipud,
    np.rot90, np.diagonal,
)


#: View functions whose result dimensions are always input dimensions (moved, kept or
#: dropped) or new 1s: their symbolic result shape is read from one stand-in run in which each
#: symbolic size is a distinct probe value.
_REARRANGING = (
    np.transpose, np.swapaxes, np.moveaxis, np.squeeze, np.expand_dims, np.matrix_transpose,
    np.permute_dims, np.flip, np.fliplr, np.flipud, np.rot90, np.atleast_1d, np.atleast_2d,
    np.atleast_3d,
)
_PROBES = (10007, 10009, 10037, 10039)


def _symbols_of(value: Any, found: list) -> None:
    if isinstance(value, ArrayMeta):
        found.extend(d for d in value.shape if isinstance(d, Sym) and
                     not any(d.same_as(f) for f in found))
    elif isinstance(value, (tuple, list)):
        for v in value:
            _symbols_of(v, found)
    elif isinstance(value, dict):
        for v in value.values():
            _symbols_of(v, found)


def _probed(value: Any, probes: dict) -> Any:
    if isinstance(value, ArrayMeta):
        return ArrayMeta(value.dtype, tuple(
            next(p for s, p in probes.items() if s.same_as(d)) if isinstance(d, Sym) else d
            for d in value.shape), value.is_scalar)
    if isinstance(value, (tuple, list)):
        return type(value)(_probed(v, probes) for v in value)
    if isinstance(value, dict):
        return {k: _probed(v, probes) for k, v in value.items()}
    return value


def _rearranged(call: Call, kwargs: dict) -> Result:
    """A rearranging view (`_REARRANGING`) of arrays with symbolic sizes."""
    syms: list = []
    _symbols_of((call.args, kwargs), syms)
    if (call.target is np.squeeze or call.target == "squeeze") and is_data_dependent(syms):
        # (the probes stand for sizes >= 2, which a guard checks for a dynamic size; the
        # length of x[mask] may be 0 or 1, and squeeze removes the axes of length 1)
        raise RuleError("squeeze of x[mask]: whether its length is 1 depends on the data")
    static = [d for m in (*call.args, *kwargs.values()) if isinstance(m, ArrayMeta)
              for d in m.shape if not isinstance(d, Sym)]
    if len(syms) > len(_PROBES) or any(d in _PROBES for d in static):
        return view_rule(specialize_call(call))
    probes = dict(zip(syms, _PROBES))
    margs = _probed(call.method_args, probes)
    probe_call = Call(call.target, _probed(call.args, probes), _probed(kwargs, probes),
                      call.method, margs)
    res = probe_call.run("view", kwargs=probe_call.kwargs)
    if not isinstance(res, np.ndarray):
        return probe_call.result(res)
    back = {p: s for s, p in probes.items()}
    shape = tuple(back.get(d, d) for d in res.shape)
    return ArrayMeta(res.dtype, shape, False)


def _reshape_args(call: Call) -> Any:
    if call.method:
        margs = call.method_args
        if "shape" in call.kwargs:
            return call.kwargs["shape"]
        return margs[0] if len(margs) == 1 else tuple(margs)
    b = call.bind().arguments
    shape = b.get("shape")
    if shape is None or not given(shape):
        shape = b.get("newshape")
    return shape


def _symbolic_reshape(call: Call) -> Result:
    """``reshape`` of an array with symbolic sizes: at most one -1, whose size is the total
    divided by the others (a fact checks that it divides evenly)."""
    x = call.args[0]
    newshape = _reshape_args(call)
    if newshape is None or x.is_scalar:
        return view_rule(specialize_call(call))
    dims = (newshape,) if not isinstance(newshape, (tuple, list)) else tuple(newshape)
    try:
        dims = tuple(d if isinstance(d, Sym) else operator.index(d) for d in dims)
    except TypeError:
        return view_rule(specialize_call(call))
    if sum(d == -1 for d in dims) > 1 or any(d < -1 for d in dims):
        return view_rule(specialize_call(call))
    total = prod(x.shape)
    known = prod(d for d in dims if d != -1)
    if -1 in dims:
        if known == 0 or total % known != 0:
            raise RuleError(f"ValueError: cannot reshape array of size {total} into shape {dims}")
        missing = total // known
        shape = tuple(missing if d == -1 else d for d in dims)
    else:
        if total != known:
            raise RuleError(f"ValueError: cannot reshape array of size {total} into shape {dims}")
        shape = dims
    # dtype and NumPy's validation of the other arguments, on a stand-in of the traced sizes
    traced = ArrayMeta(x.dtype, hint(x.shape), False)
    concrete_dims = tuple(hint(d) for d in shape)
    margs = (concrete_dims,) if call.method else call.method_args
    res = Call(call.target, (traced, concrete_dims) if not call.method else (traced, *margs),
               {k: v for k, v in call.kwargs.items() if k not in ("shape", "newshape")},
               call.method, margs).run("view")
    return ArrayMeta(res.dtype, shape, False)


@register(*VIEW_FUNCTIONS)
@symbolic
def view_rule(call: Call) -> Result:
    if call.target is np.reshape and _has_symbols(call.args):
        return _symbolic_reshape(call)
    if any(isinstance(a, ArrayMeta) and is_symbolic(a.shape) for a in call.args):
        if call.target is np.reshape:
            return _symbolic_reshape(call)
        if call.target in _REARRANGING:
            return _rearranged(call, call.kwargs)
        call = specialize_call(call)
    kwargs = call.kwargs
    if kwargs.get("copy") is True:  # a copy has the view's meta; don't make one
        kwargs = {k: v for k, v in kwargs.items() if k != "copy"}
    res = call.run("view", kwargs=kwargs)
    if isinstance(res, np.ndarray) and res.size > 1 and \
            any(st and d > 1 for st, d in zip(res.strides, res.shape)):
        raise RuleError(f"{call.name}: NumPy copied while evaluating the rule (unexpected)")
    return call.result(res)


@register(np.atleast_1d, np.atleast_2d, np.atleast_3d)
@symbolic
def _atleast_rule(call: Call) -> Result:
    if len(call.args) != 1 or call.kwargs:
        raise RuleError(f"{call.name} with several arrays returns a list; not supported")
    return view_rule(call)


@register(np.ravel)
@symbolic
def _ravel_rule(call: Call) -> Result:
    res = call.run()
    return call.result(res, (prod(shape_of(call.args[0])),))


@register(np.copy, np.astype)
@symbolic
def _same_shape_rule(call: Call) -> Result:
    res = call.run()
    return call.result(res, shape_of(call.args[0]))


def _join_shapes(call: Call, arrays: Any) -> list[tuple[int, ...]]:
    if not isinstance(arrays, (list, tuple)):
        raise RuleError(f"{call.name}: expects a list or tuple of arrays")
    return [shape_of(a) for a in arrays]


def concat_shape(name: str, shapes: list, axis: Any) -> tuple[int, ...]:
    if axis is None:
        return (sum(prod(s) for s in shapes),)
    ax = normalize_axes(axis, len(shapes[0]))[0]
    for s in shapes[1:]:
        if len(s) != len(shapes[0]) or any(
                a != b for i, (a, b) in enumerate(zip(s, shapes[0])) if i != ax):
            raise RuleError(f"{name}: shapes {shapes} do not match except along axis {ax}")
    first = shapes[0]
    return first[:ax] + (sum(s[ax] for s in shapes),) + first[ax + 1:]


def _check_join_out(call: Call, out: Any, shape: tuple) -> None:
    if out is not None and (not isinstance(out, ArrayMeta) or out.shape != shape):
        raise RuleError(f"{call.name}: out= must be a traced array of shape {shape}")


@register(np.concatenate)
@symbolic
def _concatenate_rule(call: Call) -> Result:
    res = call.run()  # validates count, equal ndim, 0-d operands, axis, dtype and casting
    b = call.bind().arguments
    shape = concat_shape("np.concatenate", _join_shapes(call, b["arrays"]), b["axis"])
    _check_join_out(call, b["out"], shape)
    return call.result(res, shape)


@register(np.stack)
@symbolic
def _stack_rule(call: Call) -> Result:
    res = call.run()
    b = call.bind().arguments
    shapes = _join_shapes(call, b["arrays"])
    if any(s != shapes[0] for s in shapes):
        raise RuleError(f"np.stack: all input arrays must have the same shape, got {shapes}")
    ax = normalize_axes(b["axis"], len(shapes[0]) + 1)[0]
    shape = shapes[0][:ax] + (len(shapes),) + shapes[0][ax:]
    _check_join_out(call, b["out"], shape)
    return call.result(res, shape)


def _at_least(shape: tuple, n: int) -> tuple:
    if len(shape) >= n:
        return shape
    return ((1,) + shape + (1,) * (n - 2))[:n] if shape else (1,) * n


@register(np.vstack)
@symbolic
def _vstack_rule(call: Call) -> Result:
    res = call.run()
    shapes = [_at_least(s, 2) for s in _join_shapes(call, call.bind().arguments["tup"])]
    return call.result(res, concat_shape("np.vstack", shapes, 0))


@register(np.hstack)
@symbolic
def _hstack_rule(call: Call) -> Result:
    res = call.run()
    shapes = [_at_least(s, 1) for s in _join_shapes(call, call.bind().arguments["tup"])]
    return call.result(res, concat_shape("np.hstack", shapes, 0 if len(shapes[0]) == 1 else 1))


_PAD_MODES = ("constant", "edge", "linear_ramp", "maximum", "mean", "median", "minimum",
              "reflect", "symmetric", "wrap", "empty")


@register(np.pad)
def _pad_rule(call: Call) -> Result:
    """np.pad: the widths as NumPy broadcasts them ((before, after) per axis), the array's
    dtype; NumPy validates the mode's keywords on a stand-in padded by at most 1. A function as
    the mode, an empty axis padded by copying, and widths or keywords computed from data are
    left to NumPy."""
    b = call.bind().arguments
    a, width, mode = b["array"], b["pad_width"], b["mode"]
    if not isinstance(a, ArrayMeta) or a.is_scalar:
        raise RuleError(f"{call.name}: array must be a traced array")
    if not isinstance(mode, str) or mode not in _PAD_MODES:
        raise RuleError(f"{call.name}: mode={mode!r} is not captured (a function, or unknown)")
    if contains_meta(width) or contains_meta(b["kwargs"]):
        raise RuleError(f"{call.name}: widths or keywords computed from data are not captured")
    try:
        widths = np.broadcast_to(np.asarray(width), (a.ndim, 2))
    except ValueError as exc:
        raise RuleError(f"{call.name}: pad_width {width!r} does not fit {a.ndim} axes") from exc
    if widths.dtype.kind != "i" or (widths < 0).any():
        raise RuleError(f"{call.name}: pad_width must be non-negative integers (NumPy raises)")
    if mode not in ("constant", "empty") and any(
            d == 0 and (w > 0).any() for d, w in zip(a.shape, widths)):
        raise RuleError(f"{call.name}: an empty axis cannot be extended by {mode!r} (NumPy "
                        "raises)")
    res = call.run(args=(a, np.minimum(widths, 1), mode), kwargs=b["kwargs"])
    return call.result(res, tuple(d + int(w[0]) + int(w[1]) for d, w in zip(a.shape, widths)))
