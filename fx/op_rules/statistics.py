"""Rules for order statistics, counts, averages and covariances: np.median, np.percentile,
np.quantile, np.count_nonzero, np.histogram, np.isin, np.average, np.cov, np.corrcoef.

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
from fx.op_rules._core import (
    Call, Result, RuleError, contains_meta, normalize_axes, register, shape_of,
)

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



@register(np.median)
def _median_rule(call: Call) -> Result:
    b = call.bind().arguments
    a = _array(call, b)
    shape = _reduced(call, a, b["axis"], b["keepdims"])
    return call.scalar_or_result(call.run(), shape)


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
    return call.scalar_or_result(call.run(), shape)


@register(np.count_nonzero)
def _count_nonzero_rule(call: Call) -> Result:
    b = call.bind().arguments
    a = b["a"]
    if not isinstance(a, ArrayMeta):
        raise RuleError(f"{call.name}: a must be a traced array")
    shape = _reduced(call, a, b["axis"], b["keepdims"])
    return call.scalar_or_result(call.run(), shape)


@register(np.histogram)
def _histogram_rule(call: Call) -> Result:
    """``(hist, edges)``: as many bins as an int ``bins`` says (one fewer than the edges an
    array ``bins`` gives); a named rule for the bins (``"auto"``), whose number depends on the
    data, is left to NumPy."""
    b = call.bind().arguments
    a, bins, weights = b["a"], b["bins"], b["weights"]
    if not isinstance(a, ArrayMeta):
        raise RuleError(f"{call.name}: a must be a traced array")
    if isinstance(bins, str) or isinstance(b["range"], ArrayMeta) or contains_meta(b["range"]):
        raise RuleError(f"{call.name}: bins by a rule or a range from data: the number of "
                        "bins depends on the data (not captured)")
    if weights is not None and shape_of(weights, "weights") != a.shape:
        raise RuleError(f"{call.name}: weights must have a's shape (NumPy raises)")
    bound = call.bind()
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        if bins < 1:
            raise RuleError(f"{call.name}: bins must be positive (NumPy raises)")
        edges = int(bins) + 1
    else:  # (constant edges: a new array of them on every call)
        if isinstance(bins, ArrayMeta):
            raise RuleError(f"{call.name}: an array of edges comes back as the edges array "
                            "itself (the same object): not captured")
        shape = shape_of(bins, "bins")
        if len(shape) != 1 or shape[0] < 2:
            raise RuleError(f"{call.name}: bins must be an int, or 1-d with 2 edges or more")
        edges = shape[0]
    if weights is not None:
        bound.arguments["weights"] = ArrayMeta(weights.dtype if isinstance(weights, ArrayMeta)
                                               else np.asarray(weights).dtype, a.shape)
    res = call.run(args=bound.args, kwargs=bound.kwargs)
    return call.results(res, [(edges - 1,), (edges,)])


@register(np.isin)
def _isin_rule(call: Call) -> Result:
    b = call.bind().arguments
    element = b["element"]
    return call.scalar_or_result(call.run(), shape_of(element, "element"))


@register(np.average)
def _average_rule(call: Call) -> Result:
    """The weighted mean: a reduction's shape; ``returned=True`` also gives the sum of the
    weights, broadcast to that shape. NumPy's checks of the weights' shape are made on the real
    sizes (the stand-ins are shrunk)."""
    b = call.bind().arguments
    a, axis, weights = b["a"], b["axis"], b["weights"]
    if not isinstance(a, ArrayMeta):
        raise RuleError(f"{call.name}: a must be a traced array")
    if weights is not None:
        w = shape_of(weights, "weights")
        one_axis = not isinstance(axis, (tuple, list)) and axis is not None
        if w != a.shape and not (one_axis and len(w) == 1
                                 and w[0] == a.shape[normalize_axes(axis, a.ndim)[0]]):
            raise RuleError(f"{call.name}: weights of shape {w} do not fit a {a.shape} "
                            "(NumPy raises)")
    keepdims = b["keepdims"] is True
    shape = _reduced(call, a, axis, keepdims)
    bound = call.bind()
    if weights is not None:  # (ones: the stand-ins are zeros, whose sum NumPy refuses)
        dtype = weights.dtype if isinstance(weights, ArrayMeta) else np.asarray(weights).dtype
        bound.arguments["weights"] = np.ones(tuple(min(d, 1) for d in shape_of(weights)), dtype)
    res = call.run(args=bound.args, kwargs=bound.kwargs)
    if isinstance(res, tuple):
        return tuple(call.scalar_or_result(r, shape) for r in res)
    return call.scalar_or_result(res, shape)


def _variables(call: Call, value: Any, rowvar: bool, what: str, nobs: int) -> tuple:
    """(variables, observations, a stand-in with `nobs` observations) of an operand of cov."""
    shape = shape_of(value, what)
    if len(shape) > 2:
        raise RuleError(f"{call.name}: {what} has more than 2 dimensions (NumPy raises)")
    dtype = value.dtype if isinstance(value, ArrayMeta) else np.asarray(value).dtype
    if len(shape) < 2:
        found = (1, shape[0] if shape else 1)
        standin = np.arange(1, nobs + 1).astype(dtype) if shape else np.ones((), dtype)
    else:
        found = (shape[0], shape[1]) if rowvar else (shape[1], shape[0])
        standin = np.arange(1, nobs + 1).astype(dtype).reshape((1, nobs) if rowvar else (nobs, 1))
    return found[0], found[1], standin


@register(np.cov, np.corrcoef)
def _cov_rule(call: Call) -> Result:
    """A covariance or correlation matrix of every variable of ``m`` (and ``y``): ``(n, n)``,
    or one value for one variable. The stand-ins have more observations than ``ddof`` (so
    NumPy's run warns of nothing); frequency and analytic weights are left to NumPy."""
    b = call.bind().arguments
    first = "m" if call.target is np.cov else "x"
    m, y, rowvar = b[first], b["y"], b["rowvar"]
    if not isinstance(m, ArrayMeta) or not isinstance(rowvar, (bool, np.bool_)):
        raise RuleError(f"{call.name}: {first} must be a traced array and rowvar a bool")
    ddof = b.get("ddof")
    if call.target is np.corrcoef and any(b.get(k, np._NoValue) is not np._NoValue
                                          for k in ("bias", "ddof")):  # (NumPy 2.2's)
        raise RuleError(f"{call.name}: bias= and ddof= are deprecated (NumPy warns at your "
                        "line): not captured")
    ddof = None if ddof is np._NoValue else ddof
    if b.get("fweights") is not None or b.get("aweights") is not None or not (
            ddof is None or type(ddof) is int):
        raise RuleError(f"{call.name}: weights or a ddof that is not a Python int: not captured")
    nobs = (ddof or 1) + 2 if (ddof or 0) >= 0 else 3
    n, obs, standin = _variables(call, m, bool(rowvar), first, nobs)
    bound = call.bind()
    bound.arguments[first] = standin
    if y is not None:
        ny, yobs, bound.arguments["y"] = _variables(call, y, bool(rowvar), "y", nobs)
        if yobs != obs:
            raise RuleError(f"{call.name}: {first} and y have {obs} and {yobs} observations "
                            "(NumPy raises)")
        n += ny
    dtype = b.get("dtype")
    if dtype is not None and np.dtype(dtype).kind != "c" and any(
            getattr(v, "dtype", np.dtype(float)).kind == "c" for v in (m, y) if v is not None):
        raise RuleError(f"{call.name}: a real dtype= for complex data warns (ComplexWarning, at "
                        "your line): not captured")
    res = call.run(args=bound.args, kwargs=bound.kwargs)
    if n == 1:  # (the stand-in has one variable too: its result's kind is NumPy's)
        return call.scalar_or_result(res, ())
    return call.result(np.asarray(res), (n, n))
