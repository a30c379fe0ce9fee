"""fx.GraphModule: generated source is exact, readable, and computes what NumPy computes."""

import linecache
import math
import operator
import traceback

import numpy as np
import pytest

from fx import ArrayMeta, Graph, GraphModule, Proxy
from fx.graph_module import GraphModuleError


def _assert_same(got, want):
    """Equal values, dtypes, and array-vs-scalar kind (NumPy is the oracle)."""
    assert type(got) is type(want), (type(got), type(want))
    if isinstance(got, (tuple, list)):
        assert len(got) == len(want)
        for a, b in zip(got, want):
            _assert_same(a, b)
    elif isinstance(got, (np.ndarray, np.generic)):
        assert got.dtype == want.dtype and np.shape(got) == np.shape(want)
        np.testing.assert_array_equal(got, want)
    else:
        assert got == want or (got != got and want != want)


def test_exact_source_of_a_small_graph():
    g = Graph()
    x, y = g.placeholder("x"), g.placeholder("y")
    s = g.call_function(np.sin, (x,))
    m = g.call_function(operator.mul, (s, y))
    m.meta["stack"] = "f.py:3 in f\n    return np.sin(x) * y"
    t = g.call_method("sum", (m,), {"axis": 0})
    g.output((t, m))
    gm = GraphModule(g)
    assert gm.code == (
        "def forward(x, y):\n"
        "    sin = numpy.sin(x)\n"
        "    # File: f.py:3 in f, code: return np.sin(x) * y\n"
        "    mul = sin * y\n"
        "    del sin\n"  # a value dies after its last use, as in plain NumPy
        "    sum = mul.sum(axis=0)\n"
        "    return (sum, mul)\n"
    )
    assert str(gm) == gm.code
    a, b = np.linspace(0, 1, 6).reshape(2, 3), np.arange(6.0).reshape(2, 3)
    _assert_same(gm(a, b), (np.sin(a).__mul__(b).sum(axis=0), np.sin(a) * b))
    _assert_same(gm.forward(a, b), gm(a, b))


def test_operators_print_as_python_syntax():
    g = Graph()
    x, i = g.placeholder("x"), g.placeholder("i")
    ops = [
        g.call_function(operator.add, (x, 1)),
        g.call_function(operator.pow, (x, -1)),
        g.call_function(operator.truediv, (2.5, x)),
        g.call_function(operator.matmul, (x, x)),
        g.call_function(operator.neg, (x,)),
        g.call_function(operator.invert, (i,)),
        g.call_function(operator.le, (x, float("inf"))),
        g.call_function(operator.ne, (x, float("nan"))),
        g.call_function(operator.getitem, (x, (slice(0, 2), None))),
        g.call_function(operator.getitem, (x, (Ellipsis, slice(None, None, -1)))),
        g.call_function(operator.getitem, (x, (slice(None),))),
        g.call_function(operator.getitem, (x, i)),
        g.call_function(operator.getitem, (x, ())),
        g.call_function(operator.iadd, (x, 1)),
    ]
    g.call_function(operator.setitem, (x, (0, slice(1, None)), -2.0))
    g.output(tuple(ops))
    lines = [line.strip() for line in GraphModule(g).code.splitlines()[1:]]
    assert lines == [
        "add = x + 1",
        "pow = x ** (-1)",
        "truediv = 2.5 / x",
        "matmul = x @ x",
        "neg = -x",
        "invert = ~i",
        "le = x <= float('inf')",
        "ne = x != float('nan')",
        "getitem = x[0:2, None]",
        "getitem_1 = x[..., ::-1]",
        "getitem_2 = x[:,]",
        "getitem_3 = x[i]",
        "getitem_4 = x[()]",
        "iadd = operator.iadd(x, 1)",
        "x[0, 1:] = -2.0",
        "return (add, pow, truediv, matmul, neg, invert, le, ne, getitem, getitem_1, getitem_2, "
        "getitem_3, getitem_4, iadd)",
    ]


def test_numpy_ops_match_eager_and_inplace_ops_mutate_inputs():
    g = Graph()
    x = Proxy(g.placeholder("x"))
    y = Proxy(g.placeholder("y"))
    a = np.sin(x) * y + 1
    b = a.reshape(-1)[1::2]
    c = np.linalg.norm(a, axis=1)
    d = np.add.reduce(a, axis=0)
    e = (x > 0.5).astype(np.float32)
    f = x[None, ..., 0]
    y += 1.0  # in-place on an input
    x[0] = 7.0  # setitem on an input, after its reads
    g.output((a.node, b.node, c.node, d.node, e.node, f.node, y.node))
    gm = GraphModule(g)
    assert "numpy.linalg.norm(add, axis=1)" in gm.code
    assert "numpy.add.reduce(add, axis=0)" in gm.code
    assert "astype(numpy.float32)" in gm.code
    assert "x[0] = 7.0" in gm.code

    def eager(x, y):
        a = np.sin(x) * y + 1
        b = a.reshape(-1)[1::2]
        c = np.linalg.norm(a, axis=1)
        d = np.add.reduce(a, axis=0)
        e = (x > 0.5).astype(np.float32)
        f = x[None, ..., 0]
        y += 1.0
        x[0] = 7.0
        return (a, b, c, d, e, f, y)

    xs, ys = np.linspace(0, 1, 12).reshape(3, 4), np.arange(12.0).reshape(3, 4)
    x1, y1, x2, y2 = xs.copy(), ys.copy(), xs.copy(), ys.copy()
    got, want = gm(x1, y1), eager(x2, y2)
    _assert_same(got, want)
    _assert_same((x1, y1), (x2, y2))  # mutations happened identically
    assert got[-1] is y1  # iadd returns the same (mutated) array
    assert np.shares_memory(got[5], x1)  # getitem view of the input, like eager


def test_float32_promotion_and_scalars_are_preserved():
    g = Graph()
    x = g.placeholder("x")
    m = g.call_function(operator.mul, (x, 2.0))
    s = g.call_method("sum", (m,))
    k = g.call_function(operator.add, (s, np.float64(0.5)))
    g.output((m, s, k, np.int8(-3), np.dtype(">f8"), np.float32))
    gm = GraphModule(g)
    assert "numpy.float64(0.5)" in gm.code and "numpy.int8(-3)" in gm.code
    assert "numpy.dtype('>f8')" in gm.code and "numpy.float32)" in gm.code
    xs = np.arange(4, dtype=np.float32)
    _assert_same(gm(xs), (xs * 2.0, (xs * 2.0).sum(), (xs * 2.0).sum() + np.float64(0.5),
                          np.int8(-3), np.dtype(">f8"), np.float32))


def test_constants_that_do_not_round_trip_become_globals():
    class Box:
        pass

    arr = np.arange(3.0)
    box = Box()
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(np.add, (x, arr))
    b = g.call_function(operator.mul, (a, arr))  # same object -> same global
    c = g.call_function(np.multiply, (b, np.longdouble(2)))
    d = g.call_function(id, (box,))
    e = g.call_function(complex, (float("inf"),))
    g.output((c, d, e, complex(float("nan"), 1), (1, [2, {"k": None}])))
    gm = GraphModule(g)
    assert gm.globals["_const_0"] is arr
    assert "numpy.add(x, _const_0)" in gm.code and "mul = add * _const_0" in gm.code
    # longdouble and the object: two more globals; complex(nan, 1) and the tuple stay literals.
    assert "_const_1" in gm.code and "_const_2" in gm.code and "_const_3" not in gm.code
    assert "complex(float('nan'), 1.0)" in gm.code and "(1, [2, {'k': None}])" in gm.code
    res = gm(np.ones(3))
    _assert_same(res[0], (np.ones(3) + arr) * arr * np.longdouble(2))
    assert res[1] == id(box)
    assert res[2] == complex(float("inf"))
    assert math.isnan(res[3].real) and res[3].imag == 1 and res[4] == (1, [2, {"k": None}])


def test_other_callables_become_globals_named_after_them():
    def helper(v):
        return v + 1

    def helper2(v):
        return v * 2

    helper2.__name__ = "helper"  # a different function with the same name

    g = Graph()
    x = g.placeholder("helper")  # the node name takes "helper" first
    a = g.call_function(helper, (x,))
    b = g.call_function(helper2, (a,))
    c = g.call_function(len, (b,))
    g.output((b, c))
    gm = GraphModule(g)
    # Globals share the namespace of node names, so nothing is shadowed.
    assert gm.globals["helper_3"] is helper and gm.globals["helper_4"] is helper2
    assert gm.globals["len_1"] is len
    assert gm.code.splitlines()[1:5] == [
        "    helper_1 = helper_3(helper)",
        "    helper_2 = helper_4(helper_1)",
        "    del helper_1",
        "    len = len_1(helper_2)",
    ]
    out = gm(np.arange(3.0))
    _assert_same(out, ((np.arange(3.0) + 1) * 2, 3))


def test_get_attr_reads_attrs_as_globals():
    w = np.full((3,), 2.0)
    g = Graph()
    x = g.placeholder("x")
    wn = g.get_attr("weight")
    g.output(g.call_function(operator.mul, (x, wn)))
    gm = GraphModule(g, attrs={"weight": w})
    assert gm.globals["weight"] is w
    assert "mul = x * weight" in gm.code
    _assert_same(gm(np.arange(3.0)), np.arange(3.0) * w)
    with pytest.raises(GraphModuleError, match="'weight'"):
        GraphModule(g)


def test_recompile_after_editing_the_graph():
    g = Graph()
    x = g.placeholder("x")
    s = g.call_function(np.sin, (x,))
    g.output(s)
    gm = GraphModule(g)
    with g.inserting_after(s):
        c = g.call_function(np.cos, (x,))
    s.replace_all_uses_with(c)
    g.erase_node(s)
    old_name = gm.filename
    gm.recompile()
    assert "numpy.cos(x)" in gm.code and "sin" not in gm.code
    assert gm.filename != old_name
    _assert_same(gm(np.arange(3.0)), np.cos(np.arange(3.0)))


def test_generated_lines_show_in_tracebacks():
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.add, (x, 1))
    b = g.call_method("reshape", (a, 7))
    b.meta["stack"] = "user.py:12 in f\n    return (x + 1).reshape(7)"
    g.output(b)
    gm = GraphModule(g, name="Traced")
    assert gm.filename.startswith("<fx-graph Traced_") and gm.filename in linecache.cache
    with pytest.raises(ValueError) as info:
        gm(np.arange(4))
    text = "".join(traceback.format_exception(info.value))
    assert gm.filename in text
    assert "reshape = add.reshape(7)" in text
    assert "    # File: user.py:12 in f, code: return (x + 1).reshape(7)\n    reshape = add.reshape(7)" \
        in gm.code


def test_print_readable_has_header_and_source(capsys):
    g = Graph()
    x = g.placeholder("x")
    g.output(g.call_function(np.add, (x, np.arange(2))))
    gm = GraphModule(g, name="Mod")
    text = gm.print_readable()
    assert capsys.readouterr().out.strip() == text.strip()
    first = text.splitlines()[0]
    assert first.startswith("# Mod (<fx-graph Mod_") and "_const_0 = ndarray int64[2]" in text
    assert text.endswith(gm.code)
    assert gm.print_readable(print_output=False) == text and capsys.readouterr().out == ""


def test_meta_vals_do_not_change_code_and_graph_without_output_returns_none():
    g = Graph()
    x = g.placeholder("x")
    n = g.call_function(operator.setitem, (x, 0, 5))
    n.meta["val"] = None
    x.meta["val"] = ArrayMeta(np.int64, (3,))
    gm = GraphModule(g)
    assert gm.code == "def forward(x):\n    x[0] = 5\n    return None\n"
    arr = np.zeros(3, dtype=np.int64)
    assert gm(arr) is None and arr[0] == 5
    assert gm.meta == {}


@pytest.mark.parametrize("index", [
    0, -1, (0, 1), slice(None), slice(-2, None), slice(None, None, -1), slice(1, 3, 2),
    (Ellipsis, None), (None, slice(0, 1), Ellipsis), ([0, 1], slice(None)), (np.array([1, 0]),),
    (), (slice(None), 0), np.array([True, False, True]),
])
def test_getitem_indices_round_trip(index):
    g = Graph()
    x = g.placeholder("x")
    g.output(g.call_function(operator.getitem, (x, index)))
    gm = GraphModule(g)
    data = np.arange(24.0).reshape(3, 8)
    want = data[index]
    got = gm(data)
    assert type(got) is type(want) and np.shape(got) == np.shape(want)
    np.testing.assert_array_equal(got, want)
    assert np.shares_memory(got, data) == np.shares_memory(want, data)


def test_literal_operands_and_odd_kwargs():
    g = Graph()
    x, lo = g.placeholder("x"), g.placeholder("lo")
    a = g.call_function(operator.mul, (1.5e-05, x))
    b = g.call_function(operator.sub, (-2, a))
    c = g.call_function(operator.getitem, (b, slice(lo, None)))
    d = g.call_function(dict, (), {"not-an-identifier": c, "ok": 1})
    e = g.call_method("conjugate", (3,))
    g.output((b, c, d, e))
    gm = GraphModule(g)
    assert "mul = 1.5e-05 * x" in gm.code and "sub = (-2) - mul" in gm.code
    assert "getitem = sub[lo:]" in gm.code and "(3).conjugate()" in gm.code
    assert "**{'not-an-identifier': getitem, 'ok': 1}" in gm.code
    xs = np.arange(4.0)
    b_want = -2 - 1.5e-05 * xs
    got = gm(xs, 1)
    np.testing.assert_array_equal(got[0], b_want)
    np.testing.assert_array_equal(got[1], b_want[1:])
    assert list(got[2]) == ["not-an-identifier", "ok"] and got[3] == 3


def test_values_are_deleted_after_their_last_use():
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(np.sin, (x,))
    b = g.call_function(np.cos, (a,))
    dead = g.call_function(operator.truediv, (b, 0.0))  # kept: it may warn
    c = g.call_function(np.exp, (b,))
    g.output(c)
    code = GraphModule(g).code.splitlines()
    # `a` dies after cos reads it, `dead` right after it is made; arguments and the returned
    # value are never deleted, and nothing is deleted just before the return
    assert "    del sin" in code and code.index("    del sin") == code.index("    cos = numpy.cos(sin)") + 1
    assert any(line.startswith("    del ") and "truediv" in line for line in code)
    assert not any("del x" in line or "del exp" in line for line in code)
