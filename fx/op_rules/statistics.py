"""Rules for order statistics and counts: np.median, np.percentile, np.quantile,
np.count_nonzero.

NumPy's own call runs in the graph (median and the percentiles partition a copy, in NumPy's
Python code); the shapes are the reductions' (``axis``, ``keepdims``; the percentiles put the
shape of ``q`` first), the dtype comes from NumPy on a one-element stand-in. Left to NumPy (not
captured): ``overwrite_input=True`` (it reorders the input in place), ``out=``, ``weights=``, the
deprecated ``interpolation=``, a ``q`` computed from data (NumPy checks its range) and a ``q``
out of range (NumPy raises).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fx.meta import ArrayMeta
from fx.op_rules._core import Call, Result, RuleError, contains_meta, normalize_axes, register

__all__: list[str] = []


def _reduced(call: Call, a: ArrayMeta, axis: Any, keepdims: bool) -> tuple:
    axes = normalize_axes(axis, a.ndim)
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(a.shape))
    return tuple(d for i, d in enumerate(a.shape) if i not in axes)


def _array(call: Call, arguments: dict) -> ArrayMeta:
    a = arguments["a"]
    if not isinstance(a, ArrayMeta):
        raise RuleError(f"{call.name}: a must be a traced array")
    for name, default in (("out", None), ("overwrite_input", False), ("weights", None),
                          ("interpolation", None)):
        if arguments.get(name, default) is not default:
            raise RuleError(f"{call.name}: {name}= is not captured (NumPy runs the call)")
    return a


def _result(call: Call, res: Any, shape: tuple) -> Result:
    return call.result(res) if isinstance(res, np.generic) else call.result(res, shape)


@register(np.median)
def _median_rule(call: Call) -> Result:
    b = call.bind().arguments
    a = _array(call, b)
    shape = _reduced(call, a, b["axis"], b["keepdims"])
    return _result(call, call.run(), shape)


@register(np.percentile, np.quantile)
def _percentile_rule(call: Call) -> Result:
    b = call.bind().arguments
    a = _array(call, b)
    q = b["q"]
    if isinstance(q, ArrayMeta) or contains_meta(q):
        raise RuleError(f"{call.name}: a q computed from data is not captured (NumPy checks "
                        "its range)")
    top = 100.0 if call.target is np.percentile else 1.0
    values = np.asarray(q)
    if values.dtype.kind not in "biuf" or not np.all((values >= 0) & (values <= top)):
        raise RuleError(f"{call.name}: q must be numbers in [0, {top:g}] (NumPy raises)")
    shape = np.shape(q) + _reduced(call, a, b["axis"], b["keepdims"])
    return _result(call, call.run(), shape)


@register(np.count_nonzero)
def _count_nonzero_rule(call: Call) -> Result:
    b = call.bind().arguments
    a = b["a"]
    if not isinstance(a, ArrayMeta):
        raise RuleError(f"{call.name}: a must be a traced array")
    shape = _reduced(call, a, b["axis"], b["keepdims"])
    return _result(call, call.run(), shape)
