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
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

__all__ = ["fold_constants"]

_IMMUTABLE = (np.generic, int, float, complex, bool, type(None))


def _evaluate(node: Any) -> tuple[bool, Any]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with np.errstate(all="raise"):
                if node.op == "call_function":
                    value = node.target(*node.args, **node.kwargs)
                else:
                    self, *rest = node.args
                    value = getattr(self, node.target)(*rest, **node.kwargs)
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
