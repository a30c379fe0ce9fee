"""Constant folding: compute at compile time the nodes whose inputs are all constants.

In: an `fx.Graph` (edited in place). Out: the number of nodes folded. Called by backends before
lowering (the C backend runs it) and usable on any graph.

A node is folded when it is a pure ``call_function``/``call_method`` (`Node.is_impure` is False,
not a random-number call) with no node among its arguments, and its result is immutable: a
NumPy scalar or a Python number/bool/None. The value replaces every use of the node (it becomes
an inline constant of the users), and the node is erased. Arrays are never folded: a folded array
would be one shared object returned or mutated across calls, while eager code makes a fresh one
each time. Errors and warnings raised by the computation leave the node alone (it then raises or
warns at run time, as in eager).

Thread safety: compiling runs while other threads run the user's program, so folding must not
touch process-wide state. `warnings.catch_warnings` swaps the module-global `warnings.filters`
(another thread's warning would be turned into an error or lost meanwhile, and a filter it adds
could be undone on restore), so folding never uses it. Instead it only evaluates operations
whose only possible warnings are NumPy's floating-point ones: `operator` arithmetic and
comparisons and NumPy's built-in ufuncs, with no keyword arguments, on plain Python numbers and
NumPy numeric scalars. Those warnings follow `np.errstate`, which is per thread (a context
variable in NumPy), so evaluating under ``np.errstate(all="raise")`` turns each into a
`FloatingPointError`: the node is left alone. Anything else is not folded.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

__all__ = ["fold_constants"]

_IMMUTABLE = (np.generic, int, float, complex, bool, type(None))

#: Operators whose evaluation on numbers can only raise or warn through NumPy's error state.
_OPERATORS = frozenset({
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
    operator.mod, operator.pow, operator.neg, operator.pos, operator.abs, operator.invert,
    operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift,
    operator.lt, operator.le, operator.eq, operator.ne, operator.ge, operator.gt,
})
_PY_NUMBERS = (bool, int, float, complex)


def _is_number(value: Any) -> bool:
    """A plain Python number or a NumPy numeric scalar (exact types: no user code can run)."""
    if type(value) in _PY_NUMBERS:
        return True
    return isinstance(value, np.generic) and type(value).__module__ == "numpy" \
        and value.dtype.kind in "biufc"


def _foldable_target(node: Any) -> bool:
    if node.op != "call_function" or node.kwargs:
        return False
    target = node.target
    if isinstance(target, np.ufunc):
        # Built-in ufuncs only: a np.frompyfunc ufunc (object loops only) runs Python code.
        return any("O" not in types for types in target.types)
    try:
        return target in _OPERATORS
    except TypeError:  # unhashable target
        return False


def _evaluate(node: Any) -> tuple[bool, Any]:
    if not _foldable_target(node) or not all(_is_number(a) for a in node.args):
        return False, None
    try:
        # Floating-point warnings become FloatingPointError: per-thread state, see above.
        with np.errstate(all="raise"):
            value = node.target(*node.args)
    except Exception:  # noqa: BLE001 - leave it to run time, where the user sees the error
        return False, None
    return isinstance(value, _IMMUTABLE) and not isinstance(value, np.ndarray), value


def fold_constants(graph: Any) -> int:
    """Fold constant nodes of ``graph`` (see the module docstring); returns the count."""
    graph = getattr(graph, "graph", graph)
    folded = 0
    for node in list(graph.nodes):
        if node.op not in ("call_function", "call_method") or node.all_input_nodes \
                or node.is_impure():
            continue
        if node.op == "call_method" and not node.args:
            continue
        ok, value = _evaluate(node)
        if not ok or any(u.op == "output" for u in node.users):
            # A folded output would be returned as an inline constant: fine for scalars, but
            # keep the node so the output stays a node (simpler contract for backends).
            continue
        node.replace_all_uses_with(value)
        graph.erase_node(node)
        folded += 1
    return folded
