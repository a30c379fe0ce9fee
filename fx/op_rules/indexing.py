"""Rules for ``x[index]`` (operator.getitem) and ``x[index] = value`` (operator.setitem).

Basic indexing (ints, slices, None, Ellipsis, traced integer scalars) runs on a zero-strided
full-shape stand-in, so NumPy itself computes the view's shape, rejects out-of-range constants,
and says whether the result is a NumPy scalar. Advanced indexing (integer lists/arrays, constant
boolean masks) produces a copy, so its shape is computed here with NumPy's placement rule: the
broadcast index shape replaces the indexed dimensions in place when the advanced indices are
adjacent, and goes first otherwise. A traced boolean mask gives a data-dependent shape: the
translator records ``x[mask]`` and ``x[mask] = values`` itself (`mask_getitem`, `mask_setitem`,
with the length as a data-dependent symbol, see `fx.symbolic`); the ordinary rules reject it.
"""

from __future__ import annotations

import operator
from math import prod
from typing import Any

import numpy as np

from fx.meta import ArrayMeta
from fx.symbolic import Sym
from fx.op_rules._core import (
    Call, Result, RuleError, broadcast, register, shape_of, shrunk, specialize_call, symbolic,
)
from fx.symbolic import hint, is_symbolic, sym_max, sym_min

__all__: list[str] = []

_INT_KINDS = "iu"


def _expand_constants(entries: list) -> list:
    """Constant lists/arrays become ndarrays; constant boolean masks become their nonzero()."""
    out: list = []
    for e in entries:
        if isinstance(e, (bool, np.bool_)):
            raise RuleError("indexing with a Python/NumPy bool scalar is not supported")
        if isinstance(e, (list, np.ndarray)) and not isinstance(e, ArrayMeta):
            arr = np.asarray(e)
            if isinstance(e, list) and arr.size == 0:
                arr = arr.astype(np.intp)
            if arr.dtype == np.bool_:
                out.append(("mask", arr))
                continue
            if arr.dtype.kind not in _INT_KINDS:
                raise RuleError(f"IndexError: arrays used as indices must be of integer (or "
                                f"boolean) type, got {arr.dtype}")
            e = arr
        out.append(e)
    return out


def _is_advanced(e: Any) -> bool:
    if isinstance(e, ArrayMeta):
        return e.ndim > 0 or e.dtype.kind not in _INT_KINDS
    return isinstance(e, (np.ndarray, tuple))  # tuple: ("mask", constant boolean array)


def _advanced_shape(shape: tuple[int, ...], entries: list) -> tuple[int, ...]:
    consumed = 0
    for e in entries:
        if isinstance(e, tuple):
            consumed += e[1].ndim
        elif e is not None and e is not Ellipsis:
            consumed += 1
    if sum(e is Ellipsis for e in entries) > 1:
        raise RuleError("IndexError: an index can only have a single ellipsis ('...')")
    if consumed > len(shape):
        raise RuleError(f"IndexError: too many indices for array: array is {len(shape)}-"
                        f"dimensional, but {consumed} were indexed")
    if not any(e is Ellipsis for e in entries):
        entries = entries + [Ellipsis]
    dim = 0
    pieces: list = []  # ("dim", n) or ("adv", shape)
    bounds: list = []  # (index, length of its dimension): checked once the shape is known
    for e in entries:
        if e is None:
            pieces.append(("dim", 1))
        elif e is Ellipsis:
            pieces.append(("sep", 0))  # even an empty '...' keeps advanced indices apart
            for _ in range(len(shape) - consumed):
                pieces.append(("dim", shape[dim]))
                dim += 1
        elif isinstance(e, slice):
            pieces.append(("dim", len(range(*e.indices(shape[dim])))))
            dim += 1
        elif isinstance(e, tuple):  # constant boolean mask over mask.ndim dimensions
            mask = e[1]
            if mask.shape != shape[dim: dim + mask.ndim]:
                raise RuleError(f"IndexError: boolean index of shape {mask.shape} does not "
                                f"match the indexed dimensions {shape[dim: dim + mask.ndim]}")
            pieces.append(("adv", (int(mask.sum()),)))
            dim += mask.ndim
        else:
            bounds.append((e, shape[dim]))
            pieces.append(("adv", shape_of(e)))
            dim += 1
    adv = [p for p in pieces if p[0] == "adv"]
    bshape = broadcast(*(p[1] for p in adv), what="IndexError: index arrays")
    for e, n in bounds:
        # NumPy checks integers always, index arrays only when it will use some values
        if prod(bshape) or shape_of(e) == ():
            _check_bounds(e, n)
        else:
            _check_dtype(e)
    first = next(i for i, p in enumerate(pieces) if p[0] == "adv")
    last = max(i for i, p in enumerate(pieces) if p[0] == "adv")
    dims = [(i, p[1]) for i, p in enumerate(pieces) if p[0] == "dim"]
    if last - first + 1 == len(adv):  # adjacent: the block replaces them in place
        return tuple(n for i, n in dims if i < first) + bshape + \
            tuple(n for i, n in dims if i > last)
    return bshape + tuple(n for _, n in dims)


def _check_dtype(e: Any) -> None:
    if isinstance(e, ArrayMeta) and e.dtype.kind not in _INT_KINDS:
        raise RuleError(f"IndexError: arrays used as indices must be of integer type, "
                        f"got {e.dtype}")


def _check_bounds(e: Any, n: int) -> None:
    _check_dtype(e)
    if isinstance(e, ArrayMeta):
        if n == 0 and e.size > 0:
            raise RuleError("IndexError: index into a dimension of size 0")
        return
    arr = np.asarray(e)
    if arr.size and (arr.min() < -n or arr.max() >= n):
        raise RuleError(f"IndexError: index out of bounds for axis with size {n}")


def _index_entries(index: Any) -> list:
    return list(index) if isinstance(index, tuple) else [index]


def _target(call: Call, x: Any, index: Any) -> tuple[Any, tuple]:
    """(stand-in result or None, shape) of ``x[index]``; raises RuleError like NumPy would."""
    entries = _index_entries(index)
    for e in entries:
        if isinstance(e, ArrayMeta) and e.dtype == np.bool_ and not e.is_scalar:
            raise RuleError("indexing with a traced boolean mask gives a data-dependent shape; "
                            "use np.where(mask, x, other) instead")
    entries = _expand_constants(entries)
    if not any(_is_advanced(e) for e in entries) and isinstance(x, ArrayMeta) and (
            is_symbolic(x.shape) or any(isinstance(e, Sym) or isinstance(e, slice) and
                                        is_symbolic((e.start, e.stop, e.step)) for e in entries)):
        return _symbolic_basic(call, x, index, entries)
    if not any(_is_advanced(e) for e in entries):
        res = call.run("view", args=(x, tuple(entries) if isinstance(index, tuple) else
                                     entries[0]), kwargs={}, fn=operator.getitem)
        return res, (res.shape if isinstance(res, np.ndarray) else ())
    if not isinstance(x, ArrayMeta) or x.is_scalar:
        raise RuleError("advanced indexing of a NumPy scalar is not supported")
    if is_symbolic(x.shape) or any(isinstance(e, ArrayMeta) and is_symbolic(e.shape)
                                   for e in entries):
        concrete = specialize_call(call)
        return _target(concrete, concrete.args[0], concrete.args[1])
    return None, _advanced_shape(x.shape, entries)


def _slice_length(sl: slice, n: Any) -> Any:
    """``len(range(*sl.indices(n)))`` where the size `n` and the bounds may be symbolic."""
    if not is_symbolic((n, sl.start, sl.stop, sl.step)):
        return len(range(*sl.indices(n)))
    step = 1 if sl.step is None else operator.index(sl.step)
    if step == 0:
        raise RuleError("ValueError: slice step cannot be zero")
    start, stop = sl.start, sl.stop
    if step > 0:
        lo = 0 if start is None else (sym_min(start, n) if start >= 0 else sym_max(n + start, 0))
        hi = n if stop is None else (sym_min(stop, n) if stop >= 0 else sym_max(n + stop, 0))
        return sym_max((hi - lo + step - 1) // step, 0)
    lo = n - 1 if start is None else (sym_min(start, n - 1) if start >= 0 else
                                      sym_max(n + start, -1))
    hi = -1 if stop is None else (sym_min(stop, n - 1) if stop >= 0 else sym_max(n + stop, -1))
    return sym_max((lo - hi - step - 1) // -step, 0)


def _symbolic_basic(call: Call, x: ArrayMeta, index: Any, entries: list) -> tuple[Any, tuple]:
    """Basic indexing of an array with symbolic sizes: NumPy validates the index (and gives the
    dtype and scalar-ness) on a stand-in of the traced sizes; the shape is computed here, with
    a fact for every integer index whose bounds the sizes do not settle."""
    if any(isinstance(e.step, Sym) for e in entries if isinstance(e, slice)):
        concrete = specialize_call(call)
        return _target(concrete, *concrete.args[:2])
    traced = ArrayMeta(x.dtype, hint(x.shape), x.is_scalar)
    res = call.run("view", args=(traced, index), kwargs={}, fn=operator.getitem)
    consumed = sum(e is not None and e is not Ellipsis for e in entries)
    shape, out, dim = x.shape, [], 0
    if not any(e is Ellipsis for e in entries):
        entries = entries + [Ellipsis]
    for e in entries:
        if e is None:
            out.append(1)
        elif e is Ellipsis:
            k = len(shape) - consumed
            out.extend(shape[dim: dim + k])
            dim += k
        elif isinstance(e, slice):
            out.append(_slice_length(e, shape[dim]))
            dim += 1
        elif isinstance(e, ArrayMeta):  # a traced integer scalar: NumPy checks it at run time
            dim += 1
        else:
            i, n = (e if isinstance(e, Sym) else operator.index(e)), shape[dim]
            if not (n > i if i >= 0 else n >= -i):
                raise RuleError(f"IndexError: index {i} is out of bounds for axis {dim} with "
                                f"size {hint(n)}")
            dim += 1
    if isinstance(res, np.generic):
        return res, ()
    return res, tuple(out)


def _is_field_index(index: Any) -> bool:
    """A field name (``a["x"]``) or a list of them (``a[["x", "y"]]``) of a structured array."""
    return isinstance(index, str) or (isinstance(index, list) and bool(index)
                                      and all(isinstance(e, str) for e in index))


def _field(x: ArrayMeta, index: Any) -> ArrayMeta:
    """``x["name"]``: a view of one field, of the field's dtype, with the array's shape (and
    the field's own subarray dimensions after it), whatever the array's sizes are (symbolic
    after a boolean mask: ``a[ids > 2]["x"]``). NumPy reads the field on a one-element array
    of the dtype, so it rejects what it would reject. A list of names gives a view with the
    fields' offsets, which the rules do not model: not supported."""
    if isinstance(index, list):
        raise RuleError(f"a multi-field index of a structured array (x[{index!r}]: a view with "
                        f"the fields' offsets) is not supported")
    try:
        one = np.zeros(1, x.dtype)
        probe = one[0][index] if x.is_scalar else one[index]
    except Exception as exc:  # (no such field, not a structured dtype)
        raise RuleError(f"NumPy rejects x[{index!r}]: {type(exc).__name__}: {exc}") from exc
    if x.is_scalar:
        return ArrayMeta(probe.dtype, probe.shape, isinstance(probe, np.generic))
    return ArrayMeta(probe.dtype, tuple(x.shape) + probe.shape[1:], False)


@register(operator.getitem)
@symbolic
def _getitem_rule(call: Call) -> Result:
    x, index = call.args
    if not isinstance(x, ArrayMeta):
        raise RuleError("getitem rule needs a traced array")
    if _is_field_index(index):
        return _field(x, index)
    res, shape = _target(call, x, index)
    if res is None:
        return ArrayMeta(x.dtype, shape, False)
    if is_symbolic(x.shape) and not isinstance(res, np.generic):
        return ArrayMeta(res.dtype, shape, False)
    return call.result(res)


def _check_value_cast(call: Call, dtype: np.dtype, value: Any) -> None:
    """Assign the value (or a one-element stand-in of it) into a tiny array of the target
    dtype: NumPy raises there exactly when it would raise on the real assignment."""
    vshape = shrunk(value.shape) if isinstance(value, ArrayMeta) else shape_of(value, "value")
    call.run(args=(np.zeros(vshape, dtype), Ellipsis, value), kwargs={}, fn=operator.setitem)


@register(operator.setitem)
@symbolic
def _setitem_rule(call: Call) -> Result:
    x, index, value = call.args
    if not isinstance(x, ArrayMeta) or x.is_scalar:
        raise RuleError("TypeError: NumPy scalars do not support item assignment")
    entries = _index_entries(index)
    if len(entries) == 1 and isinstance(entries[0], ArrayMeta) and \
            entries[0].dtype == np.bool_ and not entries[0].is_scalar:
        mask = entries[0]
        if mask.shape != x.shape[: mask.ndim]:
            raise RuleError(f"IndexError: boolean index of shape {mask.shape} does not match "
                            f"the array's shape {x.shape}")
        if any(d != 1 for d in shape_of(value, "value")):
            raise RuleError("assigning an array through a traced boolean mask needs as many "
                            "values as True entries (data-dependent)")
        _check_value_cast(call, x.dtype, value)
        return None
    if _is_field_index(index):
        field = _field(x, index)
        res, shape, dtype = None, field.shape, field.dtype
    else:
        (res, shape), dtype = _target(call, x, index), x.dtype
    vshape = shape_of(value, "value")
    if isinstance(res, np.generic) and vshape != ():
        # a single element (every dimension indexed by an integer) takes only 0-d values
        raise RuleError("ValueError: setting an array element with a sequence (the target "
                        f"is one element, the value has shape {vshape})")
    while len(vshape) > len(shape) and vshape[0] == 1:
        vshape = vshape[1:]  # NumPy drops leading length-1 dimensions of the value
    if broadcast(vshape, shape, what="value and indexed target") != shape:
        raise RuleError(f"ValueError: could not broadcast value of shape {vshape} into "
                        f"shape {shape}")
    _check_value_cast(call, dtype, value)
    return None



# --------------------------------------------------------------------------- boolean masks
#
# ``x[mask]`` with a traced boolean mask has a data-dependent length. The translator
# (`dynamo.output_graph`) gives that length a data-dependent symbol of its trace's ShapeEnv
# (one per mask and point of the trace, so ``z[m] ** 2 + c[m]`` broadcasts without a question)
# and asks these two rules for the result / checks the assignment.


def traced_mask(index: Any) -> bool:
    """Is `index` a traced boolean array of at least one dimension (a mask)?"""
    return isinstance(index, ArrayMeta) and index.dtype == np.bool_ and not index.is_scalar \
        and index.ndim > 0


def _check_mask(x: Any, mask: ArrayMeta) -> None:
    if not isinstance(x, ArrayMeta) or x.is_scalar:
        raise RuleError("boolean-mask indexing of a NumPy scalar is not supported")
    if is_symbolic(x.shape) or is_symbolic(mask.shape):
        raise RuleError("boolean-mask indexing of arrays with symbolic sizes is not supported")
    if mask.shape != x.shape[: mask.ndim]:
        raise RuleError(f"IndexError: boolean index of shape {mask.shape} does not match the "
                        f"array's shape {x.shape}")


def mask_getitem(x: Any, mask: ArrayMeta, count: Any) -> ArrayMeta:
    """``x[mask]``: a copy of shape ``(count,) + x.shape[mask.ndim:]``, where `count` (the
    number of True values) is a data-dependent size, or 0 for an empty mask."""
    _check_mask(x, mask)
    return ArrayMeta(x.dtype, (count,) + tuple(x.shape[mask.ndim:]), False)


def mask_setitem(x: Any, mask: ArrayMeta, value: Any, count: Any) -> None:
    """``x[mask] = value`` with `value` of exactly the shape ``x[mask]`` has (the same
    data-dependent length), cast as NumPy casts it (the casting rule checked on stand-ins)."""
    _check_mask(x, mask)
    target = (count,) + tuple(x.shape[mask.ndim:])
    vshape = value.shape if isinstance(value, ArrayMeta) else None
    if vshape is None or len(vshape) != len(target) or not all(
            (v.same_as(t) if isinstance(v, Sym) else (not isinstance(t, Sym) and v == t))
            for v, t in zip(vshape, target)):
        raise RuleError("assigning an array through a traced boolean mask needs as many "
                        "values as True entries (data-dependent)")
    stand_in = np.zeros((1,) * len(vshape), value.dtype)
    try:
        with np.errstate(all="ignore"):
            np.zeros(stand_in.shape, x.dtype)[...] = stand_in
    except Exception as exc:
        raise RuleError(f"NumPy rejects x[mask] = value: {type(exc).__name__}: {exc}") from exc
