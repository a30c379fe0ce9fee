"""fx.Interpreter: node-by-node execution equals the generated forward and eager NumPy."""

import operator
import weakref

import numpy as np
import pytest

from fx import Graph, GraphModule, Interpreter, Proxy


def _graph():
    g = Graph()
    x = Proxy(g.placeholder("x"))
    y = Proxy(g.placeholder("y"))
    w = Proxy(g.get_attr("w"))
    a = np.sin(x) * y + w
    b = a[:, None, ...].sum(axis=(0, 1))
    n = np.linalg.norm(b)
    x += 1.0
    g.output({"a": a.node, "pair": (b.node, n.node), "x": x.node})
    return GraphModule(g, attrs={"w": np.float32(0.5)})


def _eager(x, y):
    a = np.sin(x) * y + np.float32(0.5)
    b = a[:, None, ...].sum(axis=(0, 1))
    n = np.linalg.norm(b)
    x += 1.0
    return {"a": a, "pair": (b, n), "x": x}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_interpreter_matches_forward_and_numpy(dtype):
    gm = _graph()
    xs = np.linspace(0, 1, 6, dtype=dtype).reshape(2, 3)
    ys = np.arange(6, dtype=dtype).reshape(2, 3)
    runs = []
    for fn in (Interpreter(gm).run, gm.forward, _eager):
        x = xs.copy()
        runs.append((fn(x, ys), x))
    for result, x in runs[:2]:
        want, want_x = runs[2]
        assert result.keys() == want.keys()
        for got, exp in [(result["a"], want["a"]), (result["pair"][0], want["pair"][0]),
                         (result["pair"][1], want["pair"][1]), (result["x"], want["x"])]:
            assert type(got) is type(exp) and got.dtype == exp.dtype
            np.testing.assert_array_equal(got, exp)
        np.testing.assert_array_equal(x, want_x)  # the in-place op mutated the input
        assert result["x"] is x


def test_interpreter_accepts_a_bare_graph_and_checks_arity():
    g = Graph()
    x = g.placeholder("x")
    g.output(g.call_method("reshape", (g.call_function(operator.neg, (x,)), (2, 2))))
    interp = Interpreter(g)
    np.testing.assert_array_equal(interp.run(np.arange(4)), -np.arange(4).reshape(2, 2))
    with pytest.raises(TypeError, match="takes 1 positional"):
        interp.run()
    g2 = Graph()
    g2.output(g2.get_attr("missing"))
    with pytest.raises(KeyError, match="missing"):
        Interpreter(g2).run()


def test_overriding_per_op_methods():
    class Recorder(Interpreter):
        def __init__(self, gm):
            super().__init__(gm)
            self.seen = []

        def call_function(self, target, args, kwargs):
            self.seen.append(getattr(target, "__name__", target))
            if target is np.sin:
                return np.cos(*args)  # replace an op
            return super().call_function(target, args, kwargs)

        def run_node(self, n):
            value = super().run_node(n)
            n.meta["seen_shape"] = np.shape(value)
            return value

    g = Graph()
    x = Proxy(g.placeholder("x"))
    y = np.sin(x) + 1
    g.output(y.node)
    rec = Recorder(GraphModule(g))
    np.testing.assert_array_equal(rec.run(np.zeros(3)), np.cos(np.zeros(3)) + 1)
    assert rec.seen == ["sin", "add"]
    assert all(n.meta["seen_shape"] == (3,) for n in g.nodes)


def test_values_are_freed_after_their_last_use():
    class Tracking(Interpreter):
        def __init__(self, gm):
            super().__init__(gm)
            self.refs = {}
            self.env_sizes = []

        def run_node(self, n):
            self.env_sizes.append(len(self.env))
            value = super().run_node(n)
            if isinstance(value, np.ndarray):
                self.refs[n.name] = weakref.ref(value)
            return value

    g = Graph()
    x = Proxy(g.placeholder("x"))
    v = x
    for _ in range(6):  # a chain: each value dies once the next one exists
        v = np.sin(v) + 1
    g.output(v.node)
    interp = Tracking(GraphModule(g))
    big = np.ones(1000)
    result = interp.run(big)
    del big
    assert max(interp.env_sizes) <= 2  # never more than the current chain link (+ input)
    alive = [name for name, ref in interp.refs.items() if ref() is not None]
    assert alive == [v.node.name, "output"]  # only the returned value survives (the input too)
    assert result is interp.refs[v.node.name]()
