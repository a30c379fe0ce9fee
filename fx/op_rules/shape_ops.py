"""Rules for shape manipulation: views (reshape, transpose, swapaxes, moveaxis, squeeze,
expand_dims, broadcast_to, atleast_*d, flip, rot90, diagonal), copies (ravel, copy, astype) and
joins (concatenate, stack, vstack, hstack).

View functions run on zero-strided full-shape stand-ins: NumPy computes the exact result shape
and validates everything, and no data is allocated because the result is again a view.
"""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from fx.meta import ArrayMeta
from fx.op_rules._core import (
    Call, Result, RuleError, normalize_axes, register, shape_of,
)

__all__ = ["VIEW_FUNCTIONS", "view_rule"]

VIEW_FUNCTIONS = (
    np.reshape, np.transpose, np.swapaxes, np.moveaxis, np.squeeze, np.expand_dims,
    np.broadcast_to, np.matrix_transpose, np.permute_dims, np.flip, np.fliplr, np.flipud,
    np.rot90, np.diagonal,
)


@register(*VIEW_FUNCTIONS)
def view_rule(call: Call) -> Result:
    kwargs = call.kwargs
    if kwargs.get("copy") is True:  # a copy has the view's meta; don't make one
        kwargs = {k: v for k, v in kwargs.items() if k != "copy"}
    res = call.run("view", kwargs=kwargs)
    if isinstance(res, np.ndarray) and res.size > 1 and \
            any(st and d > 1 for st, d in zip(res.strides, res.shape)):
        raise RuleError(f"{call.name}: NumPy copied while evaluating the rule (unexpected)")
    return call.result(res)


@register(np.atleast_1d, np.atleast_2d, np.atleast_3d)
def _atleast_rule(call: Call) -> Result:
    if len(call.args) != 1 or call.kwargs:
        raise RuleError(f"{call.name} with several arrays returns a list; not supported")
    return view_rule(call)


@register(np.ravel)
def _ravel_rule(call: Call) -> Result:
    res = call.run()
    return call.result(res, (prod(shape_of(call.args[0])),))


@register(np.copy, np.astype)
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
def _concatenate_rule(call: Call) -> Result:
    res = call.run()  # validates count, equal ndim, 0-d operands, axis, dtype and casting
    b = call.bind().arguments
    shape = concat_shape("np.concatenate", _join_shapes(call, b["arrays"]), b["axis"])
    _check_join_out(call, b["out"], shape)
    return call.result(res, shape)


@register(np.stack)
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
def _vstack_rule(call: Call) -> Result:
    res = call.run()
    shapes = [_at_least(s, 2) for s in _join_shapes(call, call.bind().arguments["tup"])]
    return call.result(res, concat_shape("np.vstack", shapes, 0))


@register(np.hstack)
def _hstack_rule(call: Call) -> Result:
    res = call.run()
    shapes = [_at_least(s, 1) for s in _join_shapes(call, call.bind().arguments["tup"])]
    return call.result(res, concat_shape("np.hstack", shapes, 0 if len(shapes[0]) == 1 else 1))
