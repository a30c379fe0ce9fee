"""Rules for reductions (sum, mean, max, std, argmax, any, nan*, ...) and cumulative operations.

The stand-in run keeps zero-length dimensions, so NumPy itself rejects what it would reject on the
real data (bad axes, ``max`` of an empty axis, ``where=`` without ``initial=``) and gives the
dtype (``mean`` of ints is float64) and whether a full reduction returns a NumPy scalar. The rule
removes (or, with ``keepdims``, keeps as 1) the reduced axes.
"""

from __future__ import annotations

from math import prod

import numpy as np

from fx.meta import ArrayMeta
from fx.op_rules._core import (
    Call, Result, RuleError, broadcast, given, normalize_axes, register, shape_of, symbolic,
)

__all__ = ["REDUCTIONS", "CUMULATIVE", "UFUNC_METHOD_RULES", "reduced_shape"]

REDUCTIONS = (
    np.sum, np.prod, np.mean, np.max, np.min, np.amax, np.amin, np.any, np.all, np.std, np.var,
    np.nansum, np.nanprod, np.nanmean, np.nanmax, np.nanmin, np.nanstd, np.nanvar,
    np.argmax, np.argmin, np.nanargmax, np.nanargmin, np.ptp,
)
CUMULATIVE = (np.cumsum, np.cumprod, np.nancumsum, np.nancumprod)


def reduced_shape(shape: tuple[int, ...], axis: object, keepdims: bool) -> tuple[int, ...]:
    if not shape:  # NumPy accepts axis 0 / -1 / (0,) on 0-d arrays (validated by the run)
        return ()
    axes = normalize_axes(axis, len(shape))
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


@register(*REDUCTIONS)
@symbolic
def _reduction_rule(call: Call) -> Result:
    res = call.run()
    b = call.bind().arguments
    shape_in = shape_of(b["a"])
    keepdims = b.get("keepdims", False)
    keepdims = bool(keepdims) if given(keepdims) else False
    shape = reduced_shape(shape_in, b.get("axis"), keepdims)
    where = b.get("where", True)
    if given(where) and where is not True:
        if broadcast(shape_of(where), shape_in, what="where= and the array") != shape_in:
            raise RuleError(f"{call.name}: where= does not broadcast to the array's shape")
    out = b.get("out")
    if out is not None:
        if not isinstance(out, ArrayMeta) or out.shape != shape:
            raise RuleError(f"{call.name}: out= must be a traced array of shape {shape}")
    return call.result(res, shape)


@register(*CUMULATIVE)
@symbolic
def _cumulative_rule(call: Call) -> Result:
    res = call.run()
    b = call.bind().arguments
    shape_in = shape_of(b["a"])
    # a 0-d input always gives a 1-d result
    shape = (prod(shape_in),) if b["axis"] is None or not shape_in else shape_in
    out = b.get("out")
    if out is not None and (not isinstance(out, ArrayMeta) or out.shape != shape):
        raise RuleError(f"{call.name}: out= must be a traced array of shape {shape}")
    return call.result(res, shape)


# --------------------------------------------------------------------------- ufunc methods
# ``np.add.reduce`` etc. are bound methods of the ufunc: one rule per method name serves every
# ufunc (looked up by `fx.op_rules._rule_for`).


def _check_reduce_out(call: Call, out: object, shape: tuple) -> None:
    if isinstance(out, tuple):
        out = out[0] if len(out) == 1 else out
    if out is not None and (not isinstance(out, ArrayMeta) or out.shape != shape):
        raise RuleError(f"{call.name}: out= must be a traced array of shape {shape}")


@symbolic
def _ufunc_reduce_rule(call: Call) -> Result:
    res = call.run()
    b = call.bind().arguments
    extra = b.get("kwargs", {})
    shape_in = shape_of(b["array"])
    shape = reduced_shape(shape_in, b["axis"], bool(extra.get("keepdims", False)))
    where = extra.get("where", True)
    if where is not True and broadcast(shape_of(where), shape_in) != shape_in:
        raise RuleError(f"{call.name}: where= does not broadcast to the array's shape")
    _check_reduce_out(call, b["out"], shape)
    return call.result(res, shape)


@symbolic
def _ufunc_accumulate_rule(call: Call) -> Result:
    res = call.run()
    b = call.bind().arguments
    shape = shape_of(b["array"])
    _check_reduce_out(call, b["out"], shape)
    return call.result(res, shape)


@symbolic
def _ufunc_outer_rule(call: Call) -> Result:
    if "out" in call.kwargs or "where" in call.kwargs:
        raise RuleError(f"{call.name}: out=/where= of ufunc.outer are not supported by the rules")
    res = call.run()
    shape = tuple(d for x in call.args for d in shape_of(x))
    if isinstance(res, tuple):  # several outputs (np.divmod.outer)
        return tuple(call.result(r, shape) for r in res)
    return call.result(res, shape)


UFUNC_METHOD_RULES = {
    "reduce": _ufunc_reduce_rule,
    "accumulate": _ufunc_accumulate_rule,
    "outer": _ufunc_outer_rule,
}
