"""A graph as plain picklable data, and back (for repro files and the minifier).

In: an `fx.Graph` (nodes link to each other through weak references, so a graph does not pickle
as it is). Out: `graph_to_data` gives a list of node records (op, target, arguments with nodes
replaced by `Ref(name)`, keyword arguments, and the picklable part of ``meta``); `graph_from_data`
rebuilds an equal graph. Targets pickle as pickle does them (NumPy functions and ufuncs,
``operator`` functions and builtins by reference; methods are names). A ``meta["val"]`` that does
not pickle (symbolic sizes tied to a trace) is left out: `propagate_shapes` recomputes it from
example inputs. Used by `dynamo.repro`.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

from .graph import Graph
from .node import Node, map_arg

__all__ = ["Ref", "graph_to_data", "graph_from_data"]

#: ``meta`` entries kept when they pickle
_META_KEYS = ("val", "stack", "frame_position")


@dataclass(frozen=True)
class Ref:
    """Stands for the node named `name` in a node record's arguments."""

    name: str


def _picklable(value: Any) -> bool:
    try:
        pickle.dumps(value)
    except Exception:  # noqa: BLE001 - anything that does not pickle is left out
        return False
    return True


def graph_to_data(graph: Graph) -> list[dict[str, Any]]:
    """One record per node, in order."""
    records = []
    for node in graph.nodes:
        meta = {key: node.meta[key] for key in _META_KEYS
                if key in node.meta and _picklable(node.meta[key])}
        records.append({
            "name": node.name, "op": node.op, "target": node.target,
            "args": map_arg(node.args, lambda n: Ref(n.name)),
            "kwargs": map_arg(node.kwargs, lambda n: Ref(n.name)),
            "meta": meta,
        })
    return records


def graph_from_data(records: list[dict[str, Any]]) -> Graph:
    """The graph `graph_to_data` described (node names kept)."""
    graph = Graph()
    made: dict[str, Node] = {}

    def resolve(value: Any) -> Any:
        if isinstance(value, Ref):
            return made[value.name]
        if isinstance(value, tuple):
            return tuple(resolve(v) for v in value)
        if isinstance(value, list):
            return [resolve(v) for v in value]
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        if isinstance(value, slice):
            return slice(resolve(value.start), resolve(value.stop), resolve(value.step))
        return value

    for record in records:
        if record["op"] == "output":
            graph.output(resolve(record["args"][0]) if record["args"] else None)
            continue
        node = graph.create_node(record["op"], record["target"], resolve(record["args"]),
                                 resolve(record["kwargs"]), name=record["name"])
        node.meta.update(record["meta"])
        made[record["name"]] = node
    return graph
