"""Names for graphs: identifiers for nodes, printable names of callables and dtypes.

In: a wished name, a node's ``op``/``target``, a callable, a dtype. Out: unique valid identifiers
(`Namespace`, `candidate_name`, `sanitize`: `Graph.create_node` names nodes with them, the
Python code generator `fx.python_code` names globals), the public NumPy path of a callable
(`numpy_path`), a printable name for tables and node lines (`qualified_name`), and a text
``numpy.dtype`` turns back into a dtype (`dtype_text`). `held_by` reads a module's namespace
without running its ``__getattr__``. The bottom of `fx`: imports nothing of npdynamo.
"""

from __future__ import annotations

import builtins
import keyword
import operator
import re
from typing import Any

import numpy as np

__all__ = ["Namespace", "RESERVED", "candidate_name", "dtype_text", "held_by", "numpy_path",
           "qualified_name", "sanitize"]

# Names the generated code refers to by themselves: no node or global may take them.
RESERVED = frozenset(
    {"numpy", "operator", "float", "complex", "slice", "Ellipsis", "__builtins__", "self"}
    | set(keyword.kwlist)
)

_SUFFIX = re.compile(r"^(.*)_(\d+)$")


def sanitize(name: str) -> str:
    """An identifier made from ``name``: other characters become ``_``, no leading digit."""
    text = re.sub(r"\W+", "_", name) or "_"
    if text[0].isdigit():
        text = "_" + text
    if text in RESERVED or keyword.iskeyword(text):
        text += "_"
    return text


class Namespace:
    """Hands out identifiers that are valid, unique within the namespace and never reserved."""

    def __init__(self, taken: Any = ()) -> None:
        self._taken: set[str] = set(taken)
        self._next: dict[str, int] = {}  # base -> the suffix to try first (keeps naming O(1))

    def create_name(self, candidate: str) -> str:
        name = sanitize(candidate)
        if name in self._taken:
            match = _SUFFIX.match(name)
            base, n = (match.group(1), int(match.group(2))) if match else (name, 0)
            n = max(n, self._next.get(base, 0))
            while name in self._taken:
                n += 1
                name = f"{base}_{n}"
            self._next[base] = n
        self._taken.add(name)
        return name

    def __contains__(self, name: str) -> bool:
        return name in self._taken


def candidate_name(op: str, target: Any, args: tuple[Any, ...] = ()) -> str:
    """The readable name a new node would like: ``numpy.sin`` -> ``sin``, ``"sum"`` -> ``sum``."""
    if op == "output":
        return "output"
    if op in ("placeholder", "get_attr"):
        return str(target)
    if op == "call_method":
        return str(target).strip("_") or "method"
    if target is builtins.getattr and len(args) >= 2 and isinstance(args[1], str):
        return args[1]
    return getattr(target, "__name__", None) or type(target).__name__


_NUMPY_NAMESPACES = (("numpy", np), ("numpy.linalg", np.linalg), ("numpy.fft", np.fft),
                     ("numpy.random", np.random))


def held_by(module: Any, name: str) -> Any:
    """What `module`'s namespace holds under `name` (None if nothing), read from its dict: a
    module-level ``__getattr__`` is never called. NumPy's warns for deprecated and future names
    (``numpy.object``: FutureWarning, ``numpy.chararray``: DeprecationWarning), and a warning of
    the compiler's would reach the user's program (an error under ``-W error``)."""
    return vars(module).get(name)


def numpy_path(obj: Any) -> str | None:
    """``"numpy.linalg.norm"`` if ``obj`` is reachable under that public name, else None."""
    name = getattr(obj, "__name__", None)
    if not isinstance(name, str):
        return None
    for prefix, module in _NUMPY_NAMESPACES:
        if held_by(module, name) is obj:
            return f"{prefix}.{name}"
    # Methods of NumPy objects, e.g. numpy.add.reduce (bound methods compare equal, not `is`).
    owner = getattr(obj, "__self__", None)
    owner_path = numpy_path(owner) if owner is not None and owner is not obj else None
    if owner_path and getattr(owner, name, None) == obj:
        return f"{owner_path}.{name}"
    return None


def qualified_name(target: Any) -> str:
    """Printable name of a callable for tables: ``numpy.sin``, ``operator.mul``, ``mod.func``."""
    path = numpy_path(target)
    if path:
        return path
    name = getattr(target, "__name__", None)
    if name and held_by(operator, name) is target:
        return f"operator.{name}"
    if name and held_by(builtins, name) is target:
        return name
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", name)
    if qualname:
        return f"{module}.{qualname}" if module else qualname
    return repr(target)


def dtype_text(dtype: np.dtype, same_object: bool = True) -> str | None:
    """A string ``numpy.dtype`` turns back into `dtype` -- its name or its ``str`` -- or None.

    With `same_object`, only a text that gives this very object (a builtin dtype, which NumPy
    keeps once: ``"float64"``); else also one that gives an equal dtype NumPy makes anew
    (``">f8"``, ``"<M8[D]"``), equal in every respect, metadata too. Many dtypes have no such
    text: the name of a subarray dtype (``"void192"``), of a string dtype (``"str96"``) or of
    ``StringDType()`` (``"StringDType128"``) is not understood or means another dtype; such a
    dtype is referred to as an object."""
    for text in (dtype.name, dtype.str):
        try:
            rebuilt = np.dtype(text)
        except (TypeError, ValueError):
            continue
        if rebuilt is dtype:
            return text
        if (not same_object and type(rebuilt) is type(dtype) and rebuilt == dtype
                and rebuilt.str == dtype.str and rebuilt.metadata == dtype.metadata
                and dtype.fields is None and dtype.subdtype is None):
            return text
    return None
