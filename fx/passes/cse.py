"""Common-subexpression elimination: one node for identical pure computations.

In: an `fx.Graph` (edited in place). Out: the number of nodes removed. Called by backends (the C
backend runs it before fusion) and usable on any graph.

Two nodes are the same computation when op, target, args and kwargs are equal, constants compared
with their exact types and bits (``1``, ``1.0`` and ``True`` differ, and so do ``0.0`` and
``-0.0``: `_key`). Merging must not change what the user can observe, so a duplicate ``B`` of
``A`` is replaced only when
  * neither has side effects (`Node.is_impure`), and no mutation in the graph can reach the
    memory of ``A`` or ``B`` (nothing upstream of a mutating node is merged: a mutation of an
    alias would otherwise show through both names), nor the memory they are computed from
    (nothing computed from a value a mutation reaches: two reads of ``A[0]`` on either side of
    ``A[0] = 5.0`` differ), and
  * every user of ``B`` makes a fresh array from it (ufuncs, arithmetic operators, reductions):
    ``B`` is not returned and no view of it escapes, so the caller never sees two names for one
    object, and
  * ``B`` cannot raise or warn (`Node.may_raise_or_warn`, the predicate DCE uses): eager code
    warns once per evaluation (``np.exp(x) + np.exp(x)`` warns twice on overflow), and an
    ``np.errstate(call=...)`` handler or a "always" warnings filter sees the count. (The C
    backend still computes equal expressions once inside a kernel, and runs the NumPy path
    when the kernel flags, so merging there costs nothing.)
"""

from __future__ import annotations

import operator
import struct
from typing import Any

import numpy as np

__all__ = ["eliminate_common_subexpressions"]

# operator functions whose result is always a new array (never a view of an argument).
_FRESH_OPERATORS = {
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
    operator.pow, operator.neg, operator.pos, operator.abs, operator.invert, operator.lt,
    operator.le, operator.gt, operator.ge, operator.eq, operator.ne, operator.and_,
    operator.or_, operator.xor, operator.matmul, operator.lshift, operator.rshift,
}
_FRESH_FUNCTIONS = {np.sum, np.prod, np.mean, np.max, np.min, np.amax, np.amin, np.any, np.all,
                    np.argmax, np.argmin, np.where, np.clip, np.dot, np.matmul, np.std, np.var}
_FRESH_METHODS = {"sum", "prod", "mean", "max", "min", "any", "all", "argmax", "argmin",
                  "std", "var", "clip", "dot", "copy"}


def _makes_fresh_array(node: Any) -> bool:
    if node.op == "call_function":
        t = node.target
        if isinstance(t, np.ufunc):
            return not node.written()
        try:
            return (t in _FRESH_OPERATORS or t in _FRESH_FUNCTIONS) and not node.written()
        except TypeError:
            return False
    if node.op == "call_method":
        return node.target in _FRESH_METHODS and not node.written()
    return False


# Constants compared by value within their exact type; floats, complexes and NumPy scalars by
# their bits (``0.0 == -0.0`` and ``np.float64(1) == 1``, but merging either would change results).
_BY_VALUE = (int, bool, str, bytes, type(None), type(Ellipsis), range, type, np.dtype)


def _key(value: Any) -> Any:
    """A hashable key for an argument structure, equal only for interchangeable values: exact
    types (``1``, ``1.0``, ``True`` differ) and exact bits (``0.0`` and ``-0.0`` differ; two
    NaNs are one key only with the same payload). Other objects are keyed by identity. Raises
    TypeError for an array constant (never merged)."""
    if hasattr(value, "op") and hasattr(value, "users"):
        return ("node", id(value))
    kind = type(value)
    if kind in (tuple, list):
        return (kind, tuple(_key(v) for v in value))
    if kind is dict:
        return (dict, tuple((_key(k), _key(v)) for k, v in value.items()))
    if kind is slice:
        return (slice, _key(value.start), _key(value.stop), _key(value.step))
    if kind is float:
        return (float, struct.pack("<d", value))
    if kind is complex:
        return (complex, struct.pack("<dd", value.real, value.imag))
    if isinstance(value, np.ndarray):
        raise TypeError("array constant")
    if isinstance(value, np.generic):
        return (kind, value.dtype.str, value.tobytes())
    if isinstance(value, np.dtype) and value.metadata:
        return ("object", id(value))  # (== ignores metadata, which results carry)
    if kind in _BY_VALUE or isinstance(value, np.dtype):
        return (kind, value)
    return ("object", id(value))  # the node holds a reference: the id stays this object's


def _may_raise_or_warn(node: Any) -> bool:
    check = getattr(node, "may_raise_or_warn", None)
    return True if check is None else bool(check())


def _upstream_of_mutations(graph: Any) -> set[Any]:
    tainted: set[Any] = set()
    stack = [n for n in graph.nodes if n.op not in ("placeholder", "output") and n.is_impure()]
    while stack:
        n = stack.pop()
        for i in n.all_input_nodes:
            if i not in tainted:
                tainted.add(i)
                stack.append(i)
    return tainted


def _reads_mutated_memory(graph: Any, tainted: set[Any]) -> set[Any]:
    """Nodes computed (directly or through others) from a value a mutation reaches: two equal
    reads on either side of a write (``t = A[0]; A[0] = 5.0; t + A[0]``) differ."""
    found: set[Any] = set()
    for node in graph.nodes:
        if any(i in tainted or i in found for i in node.all_input_nodes):
            found.add(node)
    return found


def eliminate_common_subexpressions(graph: Any) -> int:
    """Merge duplicate pure nodes of ``graph`` (see the module docstring); returns the count."""
    graph = getattr(graph, "graph", graph)
    tainted = _upstream_of_mutations(graph)
    tainted |= _reads_mutated_memory(graph, tainted)
    seen: dict[Any, Any] = {}
    removed = 0
    for node in list(graph.nodes):
        if node.op not in ("call_function", "call_method") or node.is_impure() \
                or node in tainted:
            continue
        try:
            key = (node.op, _key(node.target) if isinstance(node.target, str)
                   else ("target", id(node.target)), _key(node.args), _key(node.kwargs))
        except TypeError:
            continue
        first = seen.get(key)
        if first is None:
            seen[key] = node
            continue
        if not node.users or not all(_makes_fresh_array(u) for u in node.users):
            continue
        if _may_raise_or_warn(node):
            continue
        node.replace_all_uses_with(first)
        graph.erase_node(node)
        removed += 1
    return removed
