"""Dead code elimination: drop nodes whose value nobody reads and that have no side effects.

In: an `fx.Graph`. Out: the same graph, edited in place; returns whether anything was removed.
Called by `Graph.eliminate_dead_code` and by the compiler before handing a graph to a backend.
What counts as a side effect is `Node.is_impure` (placeholders, output, setitem, in-place
operators, ``out=`` calls, targets registered with `fx.node.register_impure`).
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
            if not node.users and not node.is_impure():
                graph.erase_node(node)
                removed = True
        if not removed:
            return changed
        changed = True
