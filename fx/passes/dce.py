"""Dead code elimination: drop nodes whose value nobody reads and that have no side effects.

In: an `fx.Graph`. Out: the same graph, edited in place; returns whether anything was removed.
Called by `Graph.eliminate_dead_code`, by the compiler before handing a graph to a backend, and
by the C backend's passes. A node is kept when `Node.is_impure` (placeholders, output, setitem,
in-place operators, ``out=`` calls, targets registered with `fx.node.register_impure`) or when
`Node.may_raise_or_warn` (an unused ``x ** x`` on negative integers must still raise, an unused
``x / 0.0`` must still warn): removing it would change what the program does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..graph import Graph

__all__ = ["eliminate_dead_code"]


def eliminate_dead_code(graph: Graph) -> bool:
    """Erase unused pure nodes until none is left; True if the graph changed."""
    changed = False
    while True:
        # Walking backwards erases a whole dead chain in one sweep: by the time we reach a node,
        # its dead users (which come later) are already gone. Loop anyway until a fixed point.
        removed = False
        for node in reversed(graph.nodes):
            if not node.users and not node.is_impure() and not node.may_raise_or_warn():
                graph.erase_node(node)
                removed = True
        if not removed:
            return changed
        changed = True
