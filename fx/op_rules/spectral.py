"""Rules for np.fft: the transforms (NumPy's pocketfft, in C), the sample frequencies and the
shifts, as graph calls of NumPy itself.

The shapes are computed here from the arguments NumPy would use (``n``/``s``, ``axis``/``axes``,
the halved last axis of the real transforms); the dtype comes from running the same NumPy
function on a small stand-in (complex64 for float32 input in NumPy 2, complex128 for ints, ...).
Whatever NumPy would reject (a number of points below 1, an axis out of range, an unknown
``norm``) is rejected here too, so the call runs in plain NumPy and raises there; so are the
forms NumPy 2 deprecates (``s`` with a None, ``s`` without ``axes`` for the n-d transforms), whose
warning belongs to the user's line, and ``out=``.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from fx.meta import ArrayMeta
from fx.op_rules._core import Call, Result, RuleError, normalize_axes, register

__all__: list[str] = []

_NORMS = (None, "backward", "ortho", "forward")
#: transform -> how the length of its (last) axis is made from n: "same", "half" (n // 2 + 1,
#: the real-input transforms) or "double" (2 * (m - 1) by default: the real-output ones)
_ONE_D = {np.fft.fft: "same", np.fft.ifft: "same", np.fft.rfft: "half", np.fft.ihfft: "half",
          np.fft.irfft: "double", np.fft.hfft: "double"}
_N_D = {np.fft.fft2: "same", np.fft.ifft2: "same", np.fft.fftn: "same", np.fft.ifftn: "same",
        np.fft.rfft2: "half", np.fft.rfftn: "half", np.fft.irfft2: "double",
        np.fft.irfftn: "double"}
_TWO_D = (np.fft.fft2, np.fft.ifft2, np.fft.rfft2, np.fft.irfft2)


def _array(call: Call, value: Any) -> ArrayMeta:
    if not isinstance(value, ArrayMeta) or value.ndim == 0:
        raise RuleError(f"numpy.fft.{call.name}: the input must be a traced array of at least "
                        "one dimension")
    return value


def _common(call: Call, arguments: dict) -> None:
    if arguments.get("norm") not in _NORMS:
        raise RuleError(f"numpy.fft.{call.name}: norm={arguments['norm']!r} is not one of "
                        f"{_NORMS[1:]} (NumPy raises ValueError)")
    if arguments.get("out") is not None:
        raise RuleError(f"numpy.fft.{call.name}: out= is not captured")


def _axes(call: Call, axes: Any, ndim: int) -> tuple[int, ...]:
    """Each axis normalized (all of them for None; a repeated one stays repeated)."""
    if axes is None:
        return tuple(range(ndim))
    found = []
    for axis in axes if isinstance(axes, (tuple, list)) else (axes,):
        try:
            found += normalize_axes(operator.index(axis), ndim, "axes")
        except TypeError as exc:
            raise RuleError(f"numpy.fft.{call.name}: axes must be ints, got {axes!r}") from exc
    return tuple(found)


def _points(call: Call, value: Any) -> int:
    try:
        n = operator.index(value)
    except TypeError as exc:
        raise RuleError(f"numpy.fft.{call.name}: a number of points must be an int, got "
                        f"{value!r}") from exc
    if n < 1:
        raise RuleError(f"numpy.fft.{call.name}: invalid number of FFT data points ({n}); "
                        "NumPy raises ValueError")
    return n


def _length(call: Call, kind: str, given: Any, m: int) -> tuple[int, int]:
    """(the transform's number of points, the output's length) for an axis of length `m`."""
    n = _points(call, given if given is not None else (2 * (m - 1) if kind == "double" else m))
    return n, (n // 2 + 1 if kind == "half" else n)


@register(*_ONE_D)
def _fft_rule(call: Call) -> Result:
    arguments = call.bind().arguments
    _common(call, arguments)
    a = _array(call, arguments["a"])
    (axis,) = normalize_axes(arguments["axis"], a.ndim)
    _, length = _length(call, _ONE_D[call.target], arguments["n"], a.shape[axis])
    res = call.run(args=(a,), kwargs={"n": 2, "axis": axis, "norm": arguments["norm"]})
    return call.result(res, a.shape[:axis] + (length,) + a.shape[axis + 1:])


@register(*_N_D)
def _fftn_rule(call: Call) -> Result:
    arguments = call.bind().arguments
    _common(call, arguments)
    a = _array(call, arguments["a"])
    s, axes = arguments["s"], arguments["axes"]
    if s is not None and (axes is None and call.target not in _TWO_D):
        raise RuleError(f"numpy.fft.{call.name}: s without axes is deprecated in NumPy 2 (it "
                        "warns at your line): not captured")
    if s is not None and (not isinstance(s, (tuple, list)) or any(v is None for v in s)):
        raise RuleError(f"numpy.fft.{call.name}: s must be a sequence of ints here")
    axes = _axes(call, axes, a.ndim)
    if len(set(axes)) != len(axes) or not axes:
        raise RuleError(f"numpy.fft.{call.name}: repeated or no axes are not captured")
    if s is not None and len(s) != len(axes):
        raise RuleError(f"numpy.fft.{call.name}: s and axes differ in length (NumPy raises)")
    kind = _N_D[call.target]
    shape = list(a.shape)
    for k, ax in enumerate(axes):
        last = k == len(axes) - 1
        _, shape[ax] = _length(call, kind if last else "same",
                               None if s is None else s[k], a.shape[ax])
    res = call.run(args=(a,), kwargs={"s": (2,) * len(axes), "axes": axes,
                                      "norm": arguments["norm"]})
    return call.result(res, tuple(shape))


@register(np.fft.fftfreq, np.fft.rfftfreq)
def _fftfreq_rule(call: Call) -> Result:
    arguments = call.bind().arguments
    n = _points(call, arguments["n"])
    if arguments.get("device") not in (None, "cpu"):
        raise RuleError(f"numpy.fft.{call.name}: device={arguments['device']!r} (NumPy raises)")
    d = arguments["d"]
    if isinstance(d, ArrayMeta) and not d.is_scalar and d.ndim:
        raise RuleError(f"numpy.fft.{call.name}: d must be a number")
    res = call.run(args=(2,), kwargs={"d": d})
    return call.result(res, (n if call.target is np.fft.fftfreq else n // 2 + 1,))


@register(np.fft.fftshift, np.fft.ifftshift)
def _shift_rule(call: Call) -> Result:
    arguments = call.bind().arguments
    x = _array(call, arguments["x"])
    if arguments["axes"] is not None:
        _axes(call, arguments["axes"], x.ndim)  # (a repeated axis is rolled twice, as NumPy)
    res = call.run()
    return call.result(res, x.shape)
