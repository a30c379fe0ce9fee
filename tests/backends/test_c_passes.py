"""Graph passes used by the C backend: CSE, constant folding, shape propagation.

Each test builds a graph with `fx.Proxy`, runs the pass, and checks the graph (node counts) and
that ``gm.forward`` still returns what it returned before (eager NumPy is the oracle).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fx import ArrayMeta, Graph, GraphModule, Proxy
from fx.passes.constant_fold import fold_constants
from fx.passes.cse import eliminate_common_subexpressions
from fx.passes.shape_prop import ShapePropError, propagate_shapes

X = np.arange(12.0).reshape(3, 4)


def graph_of(fn, n=1):
    g = Graph()
    ps = [Proxy(g.placeholder(f"a{i}")) for i in range(n)]
    out = fn(*ps)
    g.output(tuple(o.node for o in out) if isinstance(out, tuple) else out.node)
    return g


def count(g, op="call_function"):
    return sum(1 for n in g.nodes if n.op == op)


def test_cse_merges_identical_pure_nodes():
    xi = np.arange(12).reshape(3, 4)
    g = graph_of(lambda x: np.bitwise_and(x * 2, 7) + np.bitwise_and(x * 2, 7))
    propagate_shapes(GraphModule(g), [xi])  # integer array ops: nothing can raise or warn
    want = GraphModule(g).forward(xi)
    assert eliminate_common_subexpressions(g) == 2
    assert count(g) == 3
    np.testing.assert_array_equal(GraphModule(g).forward(xi), want)


def test_cse_keeps_duplicates_that_may_warn():
    # Eager NumPy warns once per evaluation: two overflowing exps warn twice.
    g = graph_of(lambda x: np.exp(x * 2.0) + np.exp(x * 2.0))
    big = np.full((3, 4), 500.0)
    propagate_shapes(GraphModule(g), [big])
    counts = []
    for merge in (False, True):
        if merge:
            assert eliminate_common_subexpressions(g) == 0
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            GraphModule(g).forward(big)
        counts.append([str(w.message) for w in rec])
    assert counts[0] == counts[1] == ["overflow encountered in exp"] * 2


def test_cse_respects_constant_types():
    g = graph_of(lambda x: (x * 2) + (x * 2.0) + (x * True), 1)
    assert eliminate_common_subexpressions(g) == 0


def test_cse_tells_dtypes_apart_by_their_metadata():
    """``np.dtype(f8, metadata=m) == np.dtype(f8)``, yet the results' dtypes differ."""
    tagged = np.dtype(np.int64, metadata={"unit": "m"})
    xi = np.arange(12).reshape(3, 4)
    g = graph_of(lambda x: (x.astype(tagged) + 0) * (x.astype(np.dtype(np.int64)) + 0))
    propagate_shapes(GraphModule(g), [xi])
    assert eliminate_common_subexpressions(g) == 0
    g = graph_of(lambda x: (x.astype(tagged) + 0) * (x.astype(tagged) + 0))
    propagate_shapes(GraphModule(g), [xi])
    assert eliminate_common_subexpressions(g) == 2


def test_cse_keeps_distinct_returned_objects():
    g = graph_of(lambda x: (x + 1.0, x + 1.0))
    assert eliminate_common_subexpressions(g) == 0
    a, b = GraphModule(g).forward(X)
    assert a is not b


def test_cse_does_not_merge_values_that_are_mutated_later():
    def fn(x):
        a = x + 1.0
        b = x + 1.0
        a += 1.0
        return a * 1.0, b * 1.0

    g = graph_of(fn)
    want = GraphModule(g).forward(X.copy())
    assert eliminate_common_subexpressions(g) == 0
    got = GraphModule(g).forward(X.copy())
    for u, v in zip(got, want):
        np.testing.assert_array_equal(u, v)


def test_constant_folding_of_scalar_subexpressions():
    g = Graph()
    x = g.placeholder("x")
    two = g.call_function(np.sqrt, (np.float64(4.0),))
    three = g.call_function(np.multiply, (np.float32(1.5), 2))
    y = g.call_function(np.add, (g.call_function(np.multiply, (x, two)), three))
    g.output(y)
    want = GraphModule(g).forward(X)
    assert fold_constants(g) == 2
    g.eliminate_dead_code()
    assert count(g) == 2
    got = GraphModule(g).forward(X)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype


def test_constant_folding_keeps_arrays_errors_and_outputs():
    g = Graph()
    x = g.placeholder("x")
    zeros = g.call_function(np.zeros, (4,))  # an array: a fresh object per call, never folded
    bad = g.call_function(np.log, (np.float64(0.0),))  # warns at run time: not folded
    out = g.call_function(np.sqrt, (np.float64(9.0),))  # returned directly: kept as a node
    g.output((g.call_function(np.add, (g.call_function(np.add, (x, zeros)), bad)), out))
    assert fold_constants(g) == 0


def test_shape_prop_fills_and_validates_meta():
    g = graph_of(lambda x, y: (np.sum(x * y, axis=0), (x > 0).astype(np.int8)), 2)
    y = np.ones(4, dtype=np.float32)
    out = propagate_shapes(g, [X, y])
    assert out == (ArrayMeta(np.float64, (4,)), ArrayMeta(np.int8, (3, 4)))
    propagate_shapes(g, [X, y], validate=True)
    first = next(n for n in g.nodes if n.op == "call_function")
    first.meta["val"] = ArrayMeta(np.float32, (3, 4))
    with pytest.raises(ShapePropError, match=first.name):
        propagate_shapes(g, None, validate=True)


def test_shape_prop_reports_broadcast_errors():
    g = graph_of(lambda x, y: x + y, 2)
    with pytest.raises(ShapePropError, match="broadcast"):
        propagate_shapes(g, [X, np.ones(5)])


# ufunc.outer as a broadcast (fx/passes/expand_outer.py) -------------------------------------


@pytest.mark.parametrize("uf, a, b", [
    (np.add, np.linspace(0, 1, 5), np.linspace(1, 2, 4)),
    (np.multiply, np.arange(6.0).reshape(2, 3), np.linspace(-1, 1, 4)),
    (np.subtract, np.arange(3, dtype=np.int64), np.arange(4, dtype=np.int32)),
    (np.maximum, np.float32([1, np.nan, 3]), np.float32([2, 2])),
])
def test_ufunc_outer_becomes_the_same_broadcast(uf, a, b):
    import dynamo
    from dynamo.backends.c import compile_graph
    from fx.passes.expand_outer import expand_ufunc_outer

    def f(x, y):
        return uf.outer(x, y) * 2

    gm = dynamo.explain(f)(a, b).graphs[0]
    expected = gm.forward(a, b)
    assert expand_ufunc_outer(gm.graph)
    gm.recompile()
    code = "\n".join(line for line in gm.code.splitlines() if not line.strip().startswith("#"))
    assert ".outer(" not in code and f"numpy.{uf.__name__}(" in code
    got = gm.forward(a, b)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    propagate_shapes(gm, [a, b], validate=True)  # (the new nodes' metas are right)
    fn = compile_graph(dynamo.explain(f)(a, b).graphs[0], [a, b], min_size=0, calibrate=False)
    np.testing.assert_array_equal(fn(a, b), expected)


def test_floyd_warshall_s_outer_fuses_into_the_kernel():
    import dynamo

    def step(path, k):
        return np.minimum(path, np.add.outer(path[:, k], path[k, :]))

    x = np.random.default_rng(6).random((64, 64))
    out = dynamo.explain(step, backend="c")(x, 3)
    np.testing.assert_array_equal(out.result, step(x, 3))
    report = str(out.fusion_reports[0])
    assert "computes add, minimum" in report, report
