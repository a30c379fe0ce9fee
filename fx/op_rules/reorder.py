"""Rules for functions that reorder, repeat, difference or select elements along axes:
np.sort, np.argsort, np.partition, np.argpartition, np.searchsorted, np.diff, np.tile,
np.repeat, np.take, np.trace, np.tril, np.triu.

Their results are copies, so shapes are computed here; the stand-in run gets the dtype and lets
NumPy validate axes, kinds and dtypes. Arguments that set a length (repeats, reps) are shrunk to
at most 1 for the run, so it never allocates.
"""

from __future__ import annotations

import operator
from math import prod
from typing import Any

import numpy as np

from fx.meta import ArrayMeta
from fx.op_rules._core import (
    Call, Result, RuleError, check_size, contains_meta, given, normalize_axes, register,
    shape_of,
)

__all__: list[str] = []


def _axis(axis: Any, ndim: int) -> int:
    return normalize_axes(axis, ndim)[0]


@register(np.sort, np.argsort)
def _sort_rule(call: Call) -> Result:
    res = call.run()
    b = call.bind().arguments
    shape = shape_of(b["a"])
    # argsort treats a 0-d array as 1-d for any axis (sort rejects axes there: the run raised)
    return call.result(res, (prod(shape),) if b["axis"] is None or not shape else shape)


@register(np.diff)
def _diff_rule(call: Call) -> Result:
    res = call.run()
    b = call.bind().arguments
    shape = shape_of(b["a"])
    n = operator.index(b["n"])
    if n == 0:
        return call.result(res, shape)
    ax = _axis(b["axis"], len(shape))
    length = shape[ax]
    for key in ("prepend", "append"):
        extra = b[key]
        if not given(extra):
            continue
        eshape = shape_of(extra)
        if eshape == ():
            length += 1
        elif len(eshape) == len(shape) and all(
                d == e for i, (d, e) in enumerate(zip(shape, eshape)) if i != ax):
            length += eshape[ax]
        else:
            raise RuleError(f"np.diff: {key}= of shape {eshape} does not fit {shape}")
    return call.result(res, shape[:ax] + (max(length - n, 0),) + shape[ax + 1:])


def _constant_ints(value: Any, what: str) -> tuple[int, ...]:
    if contains_meta(value):
        raise RuleError(f"{what} from traced values gives a data-dependent shape")
    try:
        return tuple(operator.index(v) for v in np.atleast_1d(np.asarray(value)).tolist())
    except TypeError as exc:
        raise RuleError(f"{what} must be integers, got {value!r}") from exc


@register(np.tile)
def _tile_rule(call: Call) -> Result:
    b = call.bind().arguments
    reps = _constant_ints(b["reps"], "np.tile reps")
    res = call.run(args=(b["A"], tuple(min(r, 1) for r in reps)), kwargs={})
    shape = shape_of(b["A"])
    d = max(len(reps), len(shape))
    shape = (1,) * (d - len(shape)) + shape
    reps = (1,) * (d - len(reps)) + reps
    out = tuple(s * r for s, r in zip(shape, reps))
    check_size(out, res.dtype, "np.tile")
    return call.result(res, out)


@register(np.repeat)
def _repeat_rule(call: Call) -> Result:
    b = call.bind().arguments
    repeats = _constant_ints(b["repeats"], "np.repeat repeats")
    res = call.run(args=(b["a"], 1, b["axis"]), kwargs={})
    shape = shape_of(b["a"])
    if b["axis"] is None or not shape:  # a 0-d array repeats like a 1-d one (axis validated)
        shape, ax = (prod(shape),), 0
    else:
        ax = _axis(b["axis"], len(shape))
    n = shape[ax]
    if n and any(r < 0 for r in repeats):  # NumPy only looks at repeats it uses
        raise RuleError("np.repeat: negative repeats")
    if len(repeats) == 1:
        total = n * repeats[0]
    elif len(repeats) == n:
        total = sum(repeats)
    else:
        raise RuleError(f"np.repeat: {len(repeats)} repeats for an axis of length {n}")
    out = shape[:ax] + (total,) + shape[ax + 1:]
    check_size(out, res.dtype, "np.repeat")
    return call.result(res, out)


@register(np.take)
def _take_rule(call: Call) -> Result:
    b = call.bind().arguments
    if b["out"] is not None:
        raise RuleError("np.take(out=) is not supported by the rules")
    a, indices = b["a"], b["indices"]
    shape, ishape = shape_of(a), shape_of(indices)
    if b["axis"] is None:
        n, out, outer = prod(shape), ishape, 1
    else:
        ax = _axis(b["axis"], len(shape)) if shape else 0
        n = shape[ax] if shape else 1
        out, outer = shape[:ax] + ishape + shape[ax + 1:], prod(shape[:ax])
    # NumPy checks the indices once per outer iteration: never when there is none
    checked = b["mode"] == "raise" and outer > 0 and prod(ishape) > 0
    if isinstance(indices, ArrayMeta):
        if checked and n == 0:
            raise RuleError("IndexError: np.take from an empty axis")
    else:
        ints = np.asarray(indices)
        if ints.dtype.kind not in "iu" and ints.size:
            raise RuleError(f"np.take: indices must be integers, got {ints.dtype}")
        if checked and (ints.min() < -n or ints.max() >= n):
            raise RuleError(f"IndexError: np.take index out of bounds for size {n}")
        indices = np.zeros(ints.shape, np.intp)  # in range for the shrunk stand-in
    bound = call.bind()
    bound.arguments["indices"] = indices
    res = call.run(args=bound.args, kwargs=bound.kwargs)
    return call.result(res, out)


@register(np.trace)
def _trace_rule(call: Call) -> Result:
    res = call.run()
    b = call.bind().arguments
    shape = shape_of(b["a"])
    axes = {_axis(b["axis1"], len(shape)), _axis(b["axis2"], len(shape))}
    out = tuple(d for i, d in enumerate(shape) if i not in axes)
    if b["out"] is not None and (not isinstance(b["out"], ArrayMeta) or b["out"].shape != out):
        raise RuleError(f"np.trace: out= must be a traced array of shape {out}")
    return call.result(res, out)


def _roll_ints(value: Any, what: str) -> int | tuple[int, ...]:
    """A constant shift or axis of np.roll: an int or a flat sequence of ints (never traced)."""
    if contains_meta(value):
        raise RuleError(f"np.roll {what} from traced values is not supported")
    if isinstance(value, (tuple, list)):
        try:
            return tuple(operator.index(v) for v in value)
        except TypeError as exc:
            raise RuleError(f"np.roll {what} must be integers, got {value!r}") from exc
    try:
        return operator.index(value)
    except TypeError as exc:
        raise RuleError(f"np.roll {what} must be integers, got {value!r}") from exc


@register(np.roll)
def _roll_rule(call: Call) -> Result:
    """np.roll(a, shift, axis=None): a copy of ``a``'s shape (an array even for a 0-d or scalar
    ``a``). Only constant integer shifts and axes: the C backend lowers the roll as a gather with
    a wrapped index, which needs the shift at compile time."""
    b = call.bind().arguments
    shift = _roll_ints(b["shift"], "shift")
    axis = b["axis"]
    if axis is not None:
        axis = _roll_ints(axis, "axis")
    bound = call.bind()
    bound.arguments["shift"], bound.arguments["axis"] = shift, axis
    res = call.run(args=bound.args, kwargs=bound.kwargs)  # validates axes and shift lengths
    return call.result(res, shape_of(b["a"]))


def _traced(call: Call, arguments: dict, name: str) -> ArrayMeta:
    value = arguments[name]
    if not isinstance(value, ArrayMeta) or value.ndim == 0:
        raise RuleError(f"{call.name}: {name} must be a traced array with at least one "
                        "dimension")
    return value


def _kth(call: Call, kth: Any, length: int) -> None:
    """NumPy's check of ``kth`` against the axis's real length (the stand-in's is shrunk)."""
    if isinstance(kth, ArrayMeta) or contains_meta(kth):
        raise RuleError(f"{call.name}: a traced kth is not captured")
    try:
        values = [operator.index(k) for k in np.ravel(kth)] if not isinstance(kth, int) \
            else [kth]
    except TypeError as exc:
        raise RuleError(f"{call.name}: kth must be integers (NumPy raises)") from exc
    for k in values:
        if not -length <= k < length:
            raise RuleError(f"{call.name}: kth(={k}) out of bounds ({length}); NumPy raises")


@register(np.partition, np.argpartition)
def _partition_rule(call: Call) -> Result:
    b = call.bind().arguments
    a = _traced(call, b, "a")
    axis = b["axis"]
    length = prod(a.shape) if axis is None else a.shape[_axis(axis, a.ndim)]
    _kth(call, b["kth"], length)
    bound = call.bind()
    bound.arguments["kth"] = 0
    res = call.run(args=bound.args, kwargs=bound.kwargs)  # (validates axis, kind, order)
    return call.result(res, (prod(a.shape),) if axis is None else a.shape)


@register(np.searchsorted)
def _searchsorted_rule(call: Call) -> Result:
    b = call.bind().arguments
    a, v = b["a"], b["v"]
    if not isinstance(a, ArrayMeta) or a.ndim != 1:
        raise RuleError(f"{call.name}: a must be a traced 1-d array")
    sorter = b["sorter"]
    if sorter is not None and shape_of(sorter) != a.shape:
        raise RuleError(f"{call.name}: sorter must have a's length (NumPy raises)")
    bound = call.bind()
    bound.arguments["sorter"] = None  # (its length is a's, which the stand-in's is not)
    res = call.run(args=bound.args, kwargs=bound.kwargs)
    if isinstance(res, np.generic):
        return call.result(res)
    return call.result(res, shape_of(v))


@register(np.tril, np.triu)
def _tri_rule(call: Call) -> Result:
    m = _traced(call, call.bind().arguments, "m")
    res = call.run()  # (validates k as NumPy does)
    return call.result(res, m.shape if m.ndim >= 2 else (m.shape[0], m.shape[0]))
