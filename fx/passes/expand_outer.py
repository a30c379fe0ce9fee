"""``ufunc.outer(a, b)`` as the broadcast it is: ``ufunc(a[..., None, ...], b)``.

In: an `fx.Graph` whose nodes carry ``meta["val"]``. Out: the same graph, edited in place; each
``call_function`` of a ufunc's ``outer`` method on two arrays (no keyword arguments) becomes a
view of the first with one new axis per dimension of the second and the ufunc itself, which
NumPy documents as the same computation (same loop, same dtypes, same bits). Returns whether
anything changed. Used by the C backend before fusion: a ufunc call fuses into a kernel, an
``outer`` call does not (floyd_warshall's ``np.minimum(path, np.add.outer(col, row))``).
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

import numpy as np

from .. import op_rules
from ..meta import ArrayMeta

if TYPE_CHECKING:
    from ..graph import Graph

__all__ = ["expand_ufunc_outer"]

_COPIED_META = ("stack", "frame_position")


def expand_ufunc_outer(graph: Graph) -> bool:
    changed = False
    for node in list(graph.nodes):
        target = node.target
        uf = getattr(target, "__self__", None)
        if (node.op != "call_function" or not isinstance(uf, np.ufunc)
                or getattr(target, "__name__", "") != "outer" or node.kwargs
                or len(node.args) != 2 or uf.nin != 2 or uf.nout != 1):
            continue
        a, b = node.args
        a_meta, b_meta = (getattr(x, "meta", {}).get("val") for x in (a, b))
        if not (isinstance(a_meta, ArrayMeta) and isinstance(b_meta, ArrayMeta)
                and b_meta.ndim >= 1 and isinstance(node.meta.get("val"), ArrayMeta)):
            continue
        index = (Ellipsis,) + (None,) * b_meta.ndim
        try:
            view_meta = op_rules.infer_call(operator.getitem, [a_meta, index], {})
        except Exception:  # noqa: BLE001 - a shape the rules cannot describe: left as it is
            continue
        with graph.inserting_before(node):
            view = graph.call_function(operator.getitem, (a, index))
            call = graph.call_function(uf, (view, b))
        view.meta["val"] = view_meta
        call.meta["val"] = node.meta["val"]
        for key in _COPIED_META:
            if key in node.meta:
                view.meta[key] = call.meta[key] = node.meta[key]
        node.replace_all_uses_with(call)
        graph.erase_node(node)
        changed = True
    return changed
