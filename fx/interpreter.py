"""`Interpreter`: run a graph node by node in Python, one overridable method per ``op``.

In: a `GraphModule` (or a bare `Graph`) and real argument values. Out: what the output node
returns. Used as a reference executor in tests and as the skeleton of analyses (subclass it and
override ``call_function`` etc. to record or replace values). Call hierarchy::

    run(*args)
     └─ run_node(n)                  for each node, in order
         ├─ placeholder(target, args, kwargs)      -> next positional argument
         ├─ get_attr(target, args, kwargs)         -> gm.attrs[target]
         ├─ call_function(target, args, kwargs)    -> target(*args, **kwargs)
         ├─ call_method(target, args, kwargs)      -> getattr(args[0], target)(*args[1:], ...)
         └─ output(target, args, kwargs)           -> args[0]

A value is dropped from the environment right after its last user ran, so peak memory matches
the generated ``forward``.
"""

from __future__ import annotations

from typing import Any

from .graph import Graph
from .graph_module import GraphModule
from .node import Node, map_arg

__all__ = ["Interpreter"]


class Interpreter:
    """Executes ``gm.graph``; subclass and override the per-op methods to change behaviour."""

    def __init__(self, gm: GraphModule | Graph) -> None:
        self.module = gm if isinstance(gm, GraphModule) else None
        self.graph: Graph = gm.graph if isinstance(gm, GraphModule) else gm
        self.env: dict[Node, Any] = {}
        self._args_iter: Any = iter(())

    def _last_uses(self) -> dict[Node, list[Node]]:
        # Walking backwards, the first user seen of a value is its last use.
        freed: dict[Node, list[Node]] = {}
        seen: set[Node] = set()
        for node in reversed(self.graph.nodes):
            for inp in node.all_input_nodes:
                if inp not in seen:
                    seen.add(inp)
                    freed.setdefault(node, []).append(inp)
        return freed

    def run(self, *args: Any) -> Any:
        n_params = len(self.graph.find_nodes(op="placeholder"))
        if len(args) != n_params:
            raise TypeError(
                f"graph takes {n_params} positional arguments but {len(args)} were given"
            )
        self.env = {}
        self._args_iter = iter(args)
        last_uses = self._last_uses()
        result = None
        for node in self.graph.nodes:
            value = self.run_node(node)
            if node.op == "output":
                result = value
                break
            if node.users:  # a value nobody reads is dropped at once
                self.env[node] = value
            for dead in last_uses.get(node, ()):
                self.env.pop(dead, None)
        self.env, self._args_iter = {}, iter(())
        return result

    def fetch_args_kwargs_from_env(self, n: Node) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``n.args``/``n.kwargs`` with every node replaced by its computed value."""
        lookup = self.env.__getitem__
        return map_arg(n.args, lookup), map_arg(n.kwargs, lookup)

    def run_node(self, n: Node) -> Any:
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        return getattr(self, n.op)(n.target, args, kwargs)

    # -- one method per op ------------------------------------------------------------------------

    def placeholder(self, target: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return next(self._args_iter)

    def get_attr(self, target: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        attrs = self.module.attrs if self.module is not None else {}
        if target not in attrs:
            raise KeyError(f"get_attr target {target!r} has no value; pass a GraphModule with "
                           "attrs={...} to the Interpreter")
        return attrs[target]

    def call_function(self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return target(*args, **kwargs)

    def call_method(self, target: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self_obj, *rest = args
        return getattr(self_obj, target)(*rest, **kwargs)

    def output(self, target: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return args[0] if args else None
