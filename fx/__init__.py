"""npdynamo's graph IR: a small torch.fx-like Graph of NumPy operations.

The translator (``dynamo``) records NumPy calls as `Node`s of a `Graph`; passes in `fx.passes`
rewrite it; `GraphModule` turns it into a readable Python ``forward``; `Interpreter` runs it node
by node; backends receive a `GraphModule`. `ArrayMeta` (``node.meta["val"]``) describes values
without data. Abstract evaluation rules are in `fx.op_rules` (import it directly).
`fx` never imports ``dynamo``.
"""

from .graph import Graph, GraphError
from .graph_module import GraphModule, GraphModuleError
from .interpreter import Interpreter
from .meta import ArrayMeta, meta_of
from .node import Node, map_arg, map_aggregate, register_impure
from .proxy import Proxy, ProxyValueError

__all__ = [
    "ArrayMeta", "Graph", "GraphError", "GraphModule", "GraphModuleError", "Interpreter", "Node",
    "Proxy", "ProxyValueError", "map_aggregate", "map_arg", "meta_of", "register_impure",
]
