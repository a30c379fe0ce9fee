"""A backend's compiled callable must return what its graph returns: checked on its first call.

In: the callable a backend made for a graph (``backend(graph_module, example_inputs)``), the
graph's outputs (their abstract values) and whether the graph returns one bare value or a tuple.
Out: an `OutputCheck`, which the transformed code calls through its ``call`` attribute
(`codegen` emits ``LOAD_CONST check; LOAD_ATTR call``). At first ``call`` is a function that
runs the backend's callable and compares its result with the graph: a tuple of as many values
(or the one bare value), each an ndarray or a NumPy scalar as the graph says, of the graph's
dtype and number of dimensions. A mismatch raises `BackendError` naming the backend and what was
expected and returned (a list, too few values, a 0-d array for a scalar): it would otherwise be
passed straight to the program. Once the result was right, ``call`` becomes the backend's
callable itself, so later calls cost one attribute load. Used by `output_graph` for every
backend except npdynamo's generated ``forward`` (the eager backend), which is right by
construction.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any, Callable

import numpy as np

from fx.meta import ArrayMeta

from .exc import BackendError

__all__ = ["OutputCheck", "first_call"]


class OutputCheck:
    """Holds the callable the transformed code calls (``call``); see the module docstring."""

    __slots__ = ("call", "compiled", "metas", "single", "what", "__weakref__")

    def __init__(self, compiled: Callable, metas: list[Any], single: bool, what: str) -> None:
        self.compiled = compiled
        self.metas = metas  # (an output's abstract value; not an ArrayMeta: not checked)
        self.single = single
        self.what = what  # "backend 'mine' (graph graph_f_0 of f (file.py:3))"
        # (through a weak reference: a bound method would make a reference cycle)
        self.call: Callable = functools.partial(first_call, weakref.ref(self))

    def __call__(self, *args: Any) -> Any:
        return self.call(*args)

    def __repr__(self) -> str:
        return f"<output check of {getattr(self.compiled, '__name__', self.compiled)!r}>"


def first_call(ref: Callable[[], OutputCheck], *args: Any) -> Any:
    """The first call of a check's callable: run it, compare, then call it directly."""
    check = ref()  # (alive: the transformed code that runs this holds it)
    result = check.compiled(*args)
    problem = _mismatch(result, check.metas, check.single)
    if problem is not None:
        raise BackendError(f"{check.what} returned {problem}; the graph returns "
                           f"{_expected(check.metas, check.single)}")
    check.call = check.compiled
    return result


def _expected(metas: list[Any], single: bool) -> str:
    shown = [str(m) if isinstance(m, ArrayMeta) else "a value" for m in metas]
    return f"one bare value ({shown[0]})" if single else \
        f"a tuple of {len(metas)} values ({', '.join(shown)})"


def _described(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype.name}[{', '.join(map(str, value.shape))}]"
    if isinstance(value, np.generic):
        return f"{value.dtype.name} scalar"
    return f"a {type(value).__name__}"


def _mismatch(result: Any, metas: list[Any], single: bool) -> str | None:
    """What is wrong with `result`, or None."""
    if single:
        items = (result,)
    elif type(result) is not tuple or len(result) != len(metas):
        count = f" of {len(result)} value(s)" if isinstance(result, (tuple, list)) else ""
        return f"a {type(result).__name__}{count}"
    else:
        items = result
    for i, (item, meta) in enumerate(zip(items, metas)):
        if not isinstance(meta, ArrayMeta):
            continue
        kind = np.generic if meta.is_scalar else np.ndarray
        # (a string or bytes dtype of unknown length in the graph: "str scalar" for "<U1")
        unsized = meta.dtype.itemsize == 0 and meta.dtype.kind in "USV"
        if not isinstance(item, kind) or item.ndim != meta.ndim or (
                item.dtype.kind != meta.dtype.kind if unsized else item.dtype != meta.dtype):
            where = "" if single else f"value {i}: "
            return f"{where}{_described(item)} where the graph has {meta}"
    return None
