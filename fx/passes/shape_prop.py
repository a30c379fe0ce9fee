"""Shape/dtype propagation: recompute ``node.meta["val"]`` for every node with `fx.op_rules`.

In: an `fx.Graph` or `GraphModule` and, optionally, example inputs for the placeholders (real
arrays / NumPy scalars / ArrayMetas; without them the placeholders' existing metas are used).
Out: the graph annotated in place; returns the output node's value. Used by tests and backends to
fill metas on hand-built graphs, and with ``validate=True`` to check metas recorded by the
translator (a mismatch raises `ShapePropError`, naming the node).
Never allocates memory proportional to the data: everything goes through the rules.
"""

from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as np

from .. import op_rules
from ..meta import ArrayMeta, meta_of
from ..node import map_arg

__all__ = ["propagate_shapes", "ShapePropError"]


class ShapePropError(RuntimeError):
    """A node's rule failed, or (``validate=True``) disagrees with its recorded ``meta["val"]``."""


def _abstract(value: Any) -> Any:
    if isinstance(value, (np.ndarray, np.generic)):
        return meta_of(value)
    return value


def _infer(node: Any, env: dict[Any, Any], attrs: dict[str, Any]) -> Any:
    def val(n: Any) -> Any:
        return env[n]

    args = map_arg(node.args, val)
    kwargs = map_arg(node.kwargs, val)
    if node.op == "call_function":
        if node.target is builtins.getattr and isinstance(args[0], ArrayMeta):
            return op_rules.infer_attr(args[1], args[0])
        return op_rules.infer_call(node.target, args, kwargs)
    if node.op == "call_method":
        return op_rules.infer_method(node.target, args[0], args[1:], kwargs)
    if node.op == "get_attr":
        return _abstract(attrs.get(node.target, node.meta.get("val")))
    if node.op == "output":
        return args[0]
    raise ShapePropError(f"unknown op {node.op!r} at %{node.name}")


def propagate_shapes(
    gm_or_graph: Any, example_inputs: Sequence[Any] | None = None, *, validate: bool = False
) -> Any:
    """Annotate every node's ``meta["val"]``; see the module docstring."""
    graph = getattr(gm_or_graph, "graph", gm_or_graph)
    attrs = getattr(gm_or_graph, "attrs", {}) or {}
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if example_inputs is not None and len(example_inputs) != len(placeholders):
        raise ShapePropError(
            f"{len(example_inputs)} example inputs for {len(placeholders)} placeholders"
        )
    env: dict[Any, Any] = {}
    result: Any = None
    for node in graph.nodes:
        if node.op == "placeholder":
            if example_inputs is not None:
                value = _abstract(example_inputs[placeholders.index(node)])
            else:
                value = node.meta.get("val")
        else:
            try:
                value = _infer(node, env, attrs)
            except op_rules.RuleError as exc:
                raise ShapePropError(f"%{node.name} ({node.format_node()}): {exc}") from exc
        if validate and "val" in node.meta and node.op != "output" \
                and node.meta["val"] != value:
            raise ShapePropError(
                f"%{node.name}: recorded meta {node.meta['val']!r} but the rules give {value!r}"
            )
        env[node] = value
        if node.op == "output":
            result = value
        else:
            node.meta["val"] = value
    return result
