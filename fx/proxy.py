"""`Proxy`: write ordinary NumPy-style Python, get graph nodes.

In: a `Node` (usually a placeholder). Out: every operation on the proxy appends a node to the
graph and returns a new proxy. A convenience for building graphs in tests, passes and backends;
the real capture path is the bytecode translator in ``dynamo``, which does not use proxies::

    g = Graph()
    x = Proxy(g.placeholder("x"))
    y = (np.sin(x) * 2)[1:].sum(axis=0)
    g.output(y.node)

Python operators become ``operator.*`` targets, ufuncs and NumPy functions are caught through
``__array_ufunc__``/``__array_function__``, ``x.name(...)`` becomes ``call_method`` and a plain
attribute read ``x.T`` becomes ``getattr(x, 'T')``. A proxy has no value: ``bool()``, ``len()``
and iteration raise `ProxyValueError`.
"""

from __future__ import annotations

import builtins
import operator
from typing import Any

from .graph import Graph
from .node import Node, map_aggregate

__all__ = ["Proxy", "ProxyValueError"]


class ProxyValueError(TypeError):
    """A concrete value was asked of a Proxy (bool, len, iteration)."""


def _unwrap(value: Any) -> Any:
    return map_aggregate(value, lambda v: v.node if isinstance(v, Proxy) else v)


class Proxy:
    """Stands for the value of ``node`` while building ``graph`` (default: ``node.graph``)."""

    def __init__(self, node: Node, tracer_graph: Graph | None = None) -> None:
        self._node = node
        self.graph: Graph = tracer_graph if tracer_graph is not None else node.graph

    @property
    def node(self) -> Node:
        return self._node

    def _call(self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None
              ) -> Proxy:
        return Proxy(self.graph.call_function(target, _unwrap(args), _unwrap(kwargs or {})),
                     self.graph)

    def __repr__(self) -> str:
        return f"Proxy(%{self.node.name})"

    __hash__ = object.__hash__  # __eq__ builds a node, identity stays the hash

    def __getattr__(self, name: str) -> _Attribute:
        if name.startswith("__") or name in ("_node", "graph"):
            raise AttributeError(name)
        return _Attribute(self, name)

    def __setitem__(self, index: Any, value: Any) -> None:
        self._call(operator.setitem, (self, index, value))

    def _no_value(self, *args: Any) -> Any:
        raise ProxyValueError(
            f"{self!r} is symbolic and has no concrete value; data-dependent Python control flow "
            "(if/len/for over a proxy) cannot be recorded in a graph"
        )

    __bool__ = __len__ = __iter__ = __index__ = __int__ = __float__ = _no_value

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Proxy:
        target = ufunc if method == "__call__" else getattr(ufunc, method)
        return self._call(target, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Proxy:
        return self._call(func, tuple(args), dict(kwargs))


class _Attribute(Proxy):
    """``proxy.name``: a ``call_method`` when called, else (lazily) a ``getattr`` node."""

    def __init__(self, root: Proxy, attr: str) -> None:
        self._root, self._attr = root, attr
        self._lazy: Node | None = None
        self.graph = root.graph

    @property
    def node(self) -> Node:
        if self._lazy is None:
            self._lazy = self.graph.call_function(builtins.getattr, (self._root.node, self._attr))
        return self._lazy

    def __getattr__(self, name: str) -> _Attribute:
        if name in ("_root", "_attr", "_lazy"):
            raise AttributeError(name)
        return super().__getattr__(name)

    def __call__(self, *args: Any, **kwargs: Any) -> Proxy:
        node = self.graph.call_method(self._attr, (self._root.node, *_unwrap(args)),
                                      _unwrap(kwargs))
        return Proxy(node, self.graph)


def _binary(target: Any) -> tuple[Any, Any]:
    def forward(self: Proxy, other: Any) -> Proxy:
        return self._call(target, (self, other))

    def reflected(self: Proxy, other: Any) -> Proxy:
        return self._call(target, (other, self))

    return forward, reflected


def _unary(target: Any) -> Any:
    return lambda self: self._call(target, (self,))


# Magic methods installed from tables, one row per Python operator.
_BINARY = "add sub mul truediv floordiv mod pow matmul and or xor lshift rshift".split()
for _name in _BINARY:
    _op = getattr(operator, _name + "_" if _name in ("and", "or") else _name)
    _fwd, _refl = _binary(_op)
    setattr(Proxy, f"__{_name}__", _fwd)
    setattr(Proxy, f"__r{_name}__", _refl)
    setattr(Proxy, f"__i{_name}__", _binary(getattr(operator, f"i{_name}"))[0])
for _name in "eq ne lt le gt ge".split():
    setattr(Proxy, f"__{_name}__", _binary(getattr(operator, _name))[0])
for _name in "neg pos invert abs".split():
    setattr(Proxy, f"__{_name}__", _unary(getattr(operator, _name)))
Proxy.__getitem__ = _binary(operator.getitem)[0]  # type: ignore[method-assign]
