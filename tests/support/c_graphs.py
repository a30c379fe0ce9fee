"""Build an fx graph from a Python function over Proxies and compile it with the C backend."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from dynamo.backends.c import compile_graph
from fx import Graph, GraphModule, Proxy
from fx.passes.shape_prop import propagate_shapes


def trace(fn: Callable, inputs: Sequence[Any]) -> GraphModule:
    """``fn`` applied to one Proxy per input, as a GraphModule with metas from ``inputs``.
    ``fn`` may return a Proxy or a tuple/list of Proxies and constants."""
    g = Graph()
    out = fn(*[Proxy(g.placeholder(f"a{i}")) for i in range(len(inputs))])
    if isinstance(out, (tuple, list)):
        g.output(tuple(o.node if isinstance(o, Proxy) else o for o in out))
    else:
        g.output(out.node)
    gm = GraphModule(g)
    propagate_shapes(gm, inputs)
    return gm


def build(fn: Callable, inputs: Sequence[Any], **options: Any) -> tuple[GraphModule, Callable]:
    """(eager GraphModule, C-compiled callable); kernels are used at every size and never
    replaced by calibration unless the test asks."""
    gm = trace(fn, inputs)
    options.setdefault("min_size", 0)
    options.setdefault("calibrate", False)
    return gm, compile_graph(gm, inputs, **options)


def same_bits(got: Any, want: Any) -> bool:
    """Same type, shape, dtype and bytes (tuples item by item): exactness, -0.0 and NaN
    payloads included."""
    if isinstance(want, tuple):
        return (type(got) is tuple and len(got) == len(want)
                and all(same_bits(g, w) for g, w in zip(got, want)))
    return (type(got) is type(want) and np.shape(got) == np.shape(want)
            and np.asarray(got).dtype == np.asarray(want).dtype
            and np.asarray(got).tobytes() == np.asarray(want).tobytes())
