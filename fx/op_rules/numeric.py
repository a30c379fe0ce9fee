"""Rules for interpolation, binning, convolution, integration, polynomials and grids: np.interp,
np.digitize, np.convolve, np.trapezoid, np.polyval, np.meshgrid.

NumPy's own call runs in the graph (interp, digitize and convolve are C routines; trapezoid,
polyval and meshgrid compose ufuncs in Python). The shapes are computed here; the dtype comes
from NumPy on small stand-ins, which also lets NumPy reject what it rejects (a 2-d ``xp``, an
unknown ``mode``). Where the real sizes matter to NumPy's checks (``xp`` and ``fp`` of different
lengths, an empty operand of convolve), they are checked here.
"""

from __future__ import annotations

import numpy as np

from fx.meta import ArrayMeta
from fx.op_rules._core import (
    Call, Result, RuleError, broadcast, normalize_axes, register, shape_of,
)

__all__: list[str] = []



@register(np.interp)
def _interp_rule(call: Call) -> Result:
    b = call.bind().arguments
    xp, fp = shape_of(b["xp"], "xp"), shape_of(b["fp"], "fp")
    if len(xp) != 1 or len(fp) != 1 or xp != fp or xp[0] == 0:
        raise RuleError(f"{call.name}: xp and fp must be 1-d, non-empty and of one length "
                        f"(got {xp} and {fp}; NumPy raises)")
    res = call.run()
    return call.scalar_or_result(res, shape_of(b["x"], "x"))


@register(np.digitize)
def _digitize_rule(call: Call) -> Result:
    b = call.bind().arguments
    if len(shape_of(b["bins"], "bins")) != 1:
        raise RuleError(f"{call.name}: bins must be 1-d (NumPy raises)")
    res = call.run()  # (monotonic bins are data: NumPy checks them when the graph runs)
    return call.scalar_or_result(res, shape_of(b["x"], "x"))


@register(np.convolve)
def _convolve_rule(call: Call) -> Result:
    b = call.bind().arguments
    sizes = []
    for name in ("a", "v"):
        shape = shape_of(b[name], name)
        if len(shape) > 1:
            raise RuleError(f"{call.name}: {name} must be 1-d (NumPy raises)")
        sizes.append(shape[0] if shape else 1)
    n, m = sizes
    if n == 0 or m == 0:
        raise RuleError(f"{call.name}: an empty operand (NumPy raises)")
    mode = b["mode"]
    lengths = {"full": n + m - 1, "same": max(n, m), "valid": max(n, m) - min(n, m) + 1}
    if mode not in lengths:
        raise RuleError(f"{call.name}: mode={mode!r} is not one of full, same, valid")
    res = call.run()
    return call.result(res, (lengths[mode],))


@register(np.trapezoid)
def _trapezoid_rule(call: Call) -> Result:
    b = call.bind().arguments
    y = b["y"]
    if not isinstance(y, ArrayMeta) or y.ndim == 0:
        raise RuleError(f"{call.name}: y must be a traced array with at least one dimension")
    (axis,) = normalize_axes(b["axis"], y.ndim)
    x = b["x"]
    if x is not None and len(shape_of(x, "x")) == 1 and shape_of(x, "x")[0] != y.shape[axis]:
        raise RuleError(f"{call.name}: x's length is not y's along the axis (NumPy raises)")
    if x is not None and len(shape_of(x, "x")) > 1:
        raise RuleError(f"{call.name}: an x of more than one dimension is not captured")
    shape = y.shape[:axis] + y.shape[axis + 1:]
    bound = call.bind()
    if x is not None:  # (as long as y's axis in the stand-in run, as it is in the real one)
        dtype = x.dtype if isinstance(x, ArrayMeta) else np.asarray(x).dtype
        bound.arguments["x"] = ArrayMeta(dtype, (y.shape[axis],))
    res = call.run(args=bound.args, kwargs=bound.kwargs)
    return call.scalar_or_result(res, shape)


@register(np.polyval)
def _polyval_rule(call: Call) -> Result:
    b = call.bind().arguments
    if len(shape_of(b["p"], "p")) != 1:
        raise RuleError(f"{call.name}: p must be 1-d here")
    res = call.run()
    x = b["x"]
    if isinstance(x, ArrayMeta) and not x.is_scalar:
        return call.result(res, x.shape)
    return call.scalar_or_result(res, shape_of(x, "x"))


@register(np.meshgrid)
def _meshgrid_rule(call: Call) -> Result:
    b = call.bind().arguments
    xi = b["xi"]
    if not xi or not all(isinstance(x, ArrayMeta) for x in xi):
        raise RuleError(f"{call.name}: the coordinates must be traced arrays")
    if b["indexing"] not in ("xy", "ij") or b["copy"] is not True:
        raise RuleError(f"{call.name}: indexing must be 'xy' or 'ij' and copy=True here")
    sizes = [x.size for x in xi]
    if b["indexing"] == "xy" and len(sizes) > 1:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    res = call.run()
    if b["sparse"]:
        shapes = []
        for k in range(len(xi)):
            shape = [1] * len(xi)
            shape[1 - k if b["indexing"] == "xy" and k < 2 and len(xi) > 1 else k] = xi[k].size
            shapes.append(tuple(shape))
    else:
        shapes = [tuple(sizes)] * len(xi)
    broadcast(*shapes)  # (the sparse grids broadcast to the full one)
    return tuple(call.result(r, s) for r, s in zip(res, shapes))
