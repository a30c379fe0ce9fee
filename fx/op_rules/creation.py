"""Rules for array creation: zeros/ones/empty/full(+_like), arange, linspace, eye, identity,
array/asarray.

Creation functions get their shape from plain Python arguments, so the stand-in run replaces the
requested shape by its shrunk version (every dimension ``min(d, 1)``) after the rule has checked
it; NumPy then validates dtype, order and fill value on a one-element array.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from fx.meta import ArrayMeta
from fx.op_rules._core import (
    Call, Result, RuleError, as_shape, broadcast, check_size, contains_meta, normalize_axes,
    register, shape_of, shrunk, symbolic,
)

__all__: list[str] = []


def _run_with(call: Call, **changes: Any) -> Any:
    """Run with some bound arguments replaced (e.g. the shape by its shrunk version)."""
    bound = call.bind()
    for key, value in changes.items():
        bound.arguments[key] = value
    return call.run(args=bound.args, kwargs=bound.kwargs)


@register(np.zeros, np.ones, np.empty, np.full)
@symbolic
def _filled_rule(call: Call) -> Result:
    b = call.bind().arguments
    shape = as_shape(b["shape"])
    res = _run_with(call, shape=shrunk(shape))
    check_size(shape, res.dtype, call.name)
    if "fill_value" in b and broadcast(shape_of(b["fill_value"]), shape) != shape:
        raise RuleError(f"np.full: fill_value does not broadcast to {shape}")
    return call.result(res, shape)


@register(np.zeros_like, np.ones_like, np.empty_like, np.full_like)
@symbolic
def _like_rule(call: Call) -> Result:
    b = call.bind().arguments
    proto = next(iter(b.values()))  # "a" or "prototype", depending on the function
    if b["shape"] is not None:
        shape = as_shape(b["shape"])
        res = _run_with(call, shape=shrunk(shape))
        check_size(shape, res.dtype, call.name)
    else:
        shape = shape_of(proto)
        res = call.run()
    if "fill_value" in b and broadcast(shape_of(b["fill_value"]), shape) != shape:
        raise RuleError(f"{call.name}: fill_value does not broadcast to {shape}")
    return call.result(res, shape)


@register(np.eye)
def _eye_rule(call: Call) -> Result:
    b = call.bind().arguments
    n = as_shape(b["N"], "N")[0]
    m = n if b["M"] is None else as_shape(b["M"], "M")[0]
    res = _run_with(call, N=min(n, 1), M=min(m, 1))
    check_size((n, m), res.dtype, "np.eye")
    return call.result(res, (n, m))


@register(np.identity)
def _identity_rule(call: Call) -> Result:
    b = call.bind().arguments
    n = as_shape(b["n"], "n")[0]
    res = _run_with(call, n=min(n, 1))
    check_size((n, n), res.dtype, "np.identity")
    return call.result(res, (n, n))


_SMALL = 4096  # below this many elements, creating the real (tiny) result is the exact answer


@register(np.arange)
def _arange_rule(call: Call) -> Result:
    if contains_meta(call.args) or contains_meta(call.kwargs):
        raise RuleError("np.arange with traced bounds has a data-dependent length")
    b = call.bind().arguments
    start, stop, step = b["start_or_stop"], b["stop"], b["step"]
    if stop is None:
        start, stop = 0, start
    try:
        length = max(0, math.ceil((stop - start) / step))
    except Exception:  # let NumPy produce the verdict on tiny arguments (it raises)
        length = 0
    if length <= _SMALL:
        return call.result(call.run())
    # the dtype comes from the argument types alone: ask NumPy for an empty range whose stop
    # has the same type as the real one
    try:
        if b["stop"] is None:
            res = _run_with(call, start_or_stop=_same_type(b["start_or_stop"], 0))
        else:
            res = _run_with(call, stop=_same_type(stop, b["start_or_stop"]))
    except (TypeError, ValueError, OverflowError) as exc:
        raise RuleError(f"np.arange: cannot evaluate the dtype of {call.args}: {exc}") from exc
    check_size((length,), res.dtype, "np.arange")
    return call.result(res, (length,))


def _same_type(template: Any, value: Any) -> Any:
    if isinstance(template, np.generic):
        return template.dtype.type(value)
    return type(template)(value)


@register(np.linspace)
def _linspace_rule(call: Call) -> Result:
    b = call.bind().arguments
    if b["retstep"]:
        raise RuleError("np.linspace(retstep=True) is not supported by the rules")
    try:
        num = operator.index(b["num"])
    except TypeError as exc:
        raise RuleError(f"np.linspace: num must be an int, got {b['num']!r}") from exc
    res = _run_with(call, num=min(num, 2))
    base = broadcast(shape_of(b["start"]), shape_of(b["stop"]), what="np.linspace start/stop")
    axis = normalize_axes(b["axis"], len(base) + 1)[0]
    shape = base[:axis] + (num,) + base[axis:]
    check_size(shape, res.dtype, "np.linspace")
    return call.result(res, shape)


@register(np.array, np.asarray, np.asanyarray)
def _array_rule(call: Call) -> Result:
    if not call.args:
        return call.result(call.run())
    obj = call.args[0]
    if not isinstance(obj, ArrayMeta):
        if contains_meta(obj):
            raise RuleError(f"{call.name}: building an array from a list of traced values is "
                            "not supported; use np.stack")
        return call.result(call.run())  # a constant: the data is already here, and small
    res = call.run()
    ndmin = call.bind().arguments.get("ndmin", 0)
    shape = (1,) * max(ndmin - obj.ndim, 0) + obj.shape
    return call.result(res, shape)
