"""Which array dimensions a compile keeps symbolic (dynamic shapes), and the user's marks.

In: `OutputGraph.add_graph_input` asks `dynamic_dims(code, source, array, mode)` for every array
the translator reads from the frame; `mode` is the ``dynamic=`` of `dynamo.compile` (None,
True or False). Out: one bool per dimension (True: make it a `fx.symbolic.Sym`).

* ``dynamic=False``: every size is specialised (a new size compiles a new version).
* ``dynamic=True``: every size >= 2 is symbolic from the first compile.
* ``dynamic=None`` (default, *automatic dynamic*): the first compile of a code object specialises;
  the compile of that code after a size of an input was seen to change makes that dimension
  symbolic. So calling ``f`` with 20 lengths compiles twice.
* `mark_dynamic(arr, dim)` / `mark_static(arr, dim)` decide for one array object and dimension,
  whatever the mode.

Sizes 0 and 1 are always specialised: broadcasting and emptiness depend on them.
"""

from __future__ import annotations

import operator
import threading
from typing import Any, Iterable

import numpy as np

from fx.symbolic import MIN_DYNAMIC_SIZE
from fx.weak import IdentityMap

from .constant_copies import detached

__all__ = ["mark_dynamic", "mark_static", "dynamic_dims", "scalar_is_dynamic", "forget"]

_lock = threading.Lock()
#: array -> {dim: True (dynamic) or False (static)} (weak keys, by identity: fx.weak)
_marks: "IdentityMap[np.ndarray, dict[int, bool]]" = IdentityMap()
#: code -> {source name: sizes seen, None where they changed} (weak keys, by identity)
_seen: "IdentityMap[Any, dict[str, tuple]]" = IdentityMap()


def _dims(arr: Any, dim: int | Iterable[int], what: str) -> list[int]:
    if type(arr) is not np.ndarray:
        raise TypeError(f"dynamo.{what} expects a numpy.ndarray, got {type(arr).__name__} "
                        "(mark the array the compiled function receives)")
    dims = [dim] if not isinstance(dim, (list, tuple, range)) else list(dim)
    out = []
    for d in dims:
        try:
            d = operator.index(d)
        except TypeError:
            raise TypeError(f"dynamo.{what}: dim must be an int or a sequence of ints, got "
                            f"{type(d).__name__}") from None
        if not -arr.ndim <= d < arr.ndim:
            raise IndexError(f"dynamo.{what}: dim {d} is out of range for an array with "
                             f"{arr.ndim} dimension(s)")
        out.append(d % arr.ndim)
    return out


def _mark(arr: np.ndarray, dim: Any, dynamic: bool, what: str) -> None:
    dims = _dims(arr, dim, what)
    with _lock:
        entry = _marks.setdefault(arr, {})
        for d in dims:
            entry[d] = dynamic


def mark_dynamic(arr: np.ndarray, dim: int | Iterable[int]) -> None:
    """Compile functions receiving `arr` with dimension(s) `dim` symbolic from the first compile
    (any size >= 2 reuses the compiled code; a size of 0 or 1 is still specialised)."""
    _mark(arr, dim, True, "mark_dynamic")


def mark_static(arr: np.ndarray, dim: int | Iterable[int]) -> None:
    """Never make dimension(s) `dim` of `arr` symbolic, even after its size changed."""
    _mark(arr, dim, False, "mark_static")


def _marks_of(arr: Any) -> dict[int, bool]:
    return _marks.get(arr, {})


def dynamic_dims(code: Any, source: str, arr: np.ndarray, mode: bool | None) -> list[bool]:
    """For each dimension of `arr` (read from `source` in a frame of `code`): symbolic?
    Also remembers the sizes for the next compile of `code` (automatic dynamic)."""
    shape = arr.shape
    marks = _marks_of(arr)
    prev = None
    if code is not None:
        with _lock:
            per_code = _seen.setdefault(code, {})
            prev = per_code.get(source)
            if prev is None or len(prev) != len(shape):
                per_code[source] = tuple(shape)
                prev = None
            else:
                per_code[source] = tuple(None if p is None or p != n else n
                                         for p, n in zip(prev, shape))
    out = []
    for d, n in enumerate(shape):
        if n < MIN_DYNAMIC_SIZE:
            out.append(False)
        elif d in marks:
            out.append(marks[d])
        elif mode is True:
            out.append(True)
        elif mode is False:
            out.append(False)
        else:
            out.append(prev is not None and (prev[d] is None or prev[d] != n))
    return out


#: Python scalar arguments: (code, source name) -> last value seen (automatic dynamic scalars)
_MISSING = object()


def scalar_is_dynamic(code: Any, source: str, value: int | float, mode: bool | None) -> bool:
    """Should this Python int/float argument be a graph input instead of a constant? With
    ``dynamic=None`` once its value changed between compiles of `code`, with True always, with
    False never. Also remembers the value for the next compile."""
    if mode is False or code is None:
        return False
    key = "scalar:" + source
    with _lock:
        per_code = _seen.setdefault(code, {})
        prev = per_code.get(key, _MISSING)
        # (floats by repr: -0.0 and NaNs differ; ints by value: the repr of a very long int
        # raises ValueError past sys.get_int_max_str_digits())
        changed = prev is not _MISSING and (
            prev is None or type(prev[0]) is not type(value)
            or (prev[0] != value if type(value) is int else repr(prev[0]) != repr(value)))
        per_code[key] = None if changed or prev is None else (detached(value),)
    return mode is True or changed


def forget(code: Any = None) -> None:
    """Forget the sizes seen (for `code`, or all): `dynamo.reset()`."""
    with _lock:
        if code is None:
            _seen.clear()
        else:
            _seen.pop(code, None)
