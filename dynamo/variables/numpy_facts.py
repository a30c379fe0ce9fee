"""NumPy functions whose answer the trace already knows: ``np.ndim``, ``np.shape``, ``np.size``,
``np.isscalar``, ``np.iterable`` of what it tracks.

In: the function and its one argument's tracker. Out (`answer`): ``("value", v)`` (the answer,
a Python value), ``("attribute", name)`` (the argument's own attribute: an array's shape or
size, which may be symbolic), or None when the function is not one of these or the argument is
not one it settles (the caller goes on as for any NumPy function). They read a value's kind,
dtype and shape, which the guards check (an array's exact type, dtype and shape; a NumPy
scalar's type; a constant's value), never its data, so the graph gains no node and no break.
(Below the trackers' circle: it looks at an array tracker's ``meta``, an `fx.meta.ArrayMeta`,
and the callers wrap what it answers.)
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from fx.meta import ArrayMeta

__all__ = ["answer"]


def _ndim(meta: ArrayMeta) -> Any:
    return meta.ndim


def _isscalar(meta: ArrayMeta) -> Any:
    return meta.is_scalar  # (a NumPy scalar is one; a 0-d array is not)


def _iterable(meta: ArrayMeta) -> Any:
    return not meta.is_scalar and meta.ndim > 0  # (iter() of a 0-d array raises TypeError)


#: function -> (its answer from an array's or NumPy scalar's meta, or None: the attribute)
_FACTS: dict[Callable, tuple[Callable | None, str | None]] = {
    np.ndim: (_ndim, None),
    np.isscalar: (_isscalar, None),
    np.iterable: (_iterable, None),
    np.shape: (None, "shape"),
    np.size: (None, "size"),
}

#: constants these functions are asked about at trace time (numbers, text, None)
_PLAIN = (bool, int, float, complex, str, bytes, type(None))


def answer(fn: Any, arg: Any, n_args: int) -> tuple[str, Any] | None:
    """See the module docstring (`n_args`: how many arguments the call has, keywords too)."""
    fact = _FACTS.get(fn)
    if fact is None or n_args != 1:
        return None
    by_meta, attribute = fact
    meta = getattr(arg, "meta", None)
    if isinstance(meta, ArrayMeta):
        return ("attribute", attribute) if attribute is not None else ("value", by_meta(meta))
    if arg.is_python_constant():
        value = arg.as_python_constant()
        if isinstance(value, _PLAIN):
            return ("value", fn(value))
    return None
