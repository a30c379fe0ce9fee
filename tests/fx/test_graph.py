"""fx.Graph / fx.Node: building, naming, use-def links, editing, DCE, lint and printing."""

import builtins
import keyword
import operator

import numpy as np
import pytest

from fx import ArrayMeta, Graph, Proxy, register_impure
from fx.graph import GraphError


def _simple():
    g = Graph()
    x, y = g.placeholder("x"), g.placeholder("y")
    s = g.call_function(np.sin, (x,))
    m = g.call_function(operator.mul, (s, y))
    out = g.output(m)
    return g, x, y, s, m, out


def test_names_come_from_targets_and_are_unique():
    g = Graph()
    x = g.placeholder("L['x']")
    a = g.call_function(np.sin, (x,))
    b = g.call_function(np.sin, (a,))
    c = g.call_function(operator.mul, (a, b))
    d = g.call_method("sum", (c,))
    e = g.call_function(np.linalg.norm, (d,))
    f = g.call_function(np.sin, (e,), None)
    assert [n.name for n in g.nodes] == ["L_x_", "sin", "sin_1", "mul", "sum", "norm", "sin_2"]
    assert f.name == "sin_2"


@pytest.mark.parametrize("wish", ["numpy", "operator", "float", "slice", "lambda", "None", "for",
                                  "1x", "a-b", "", "sin_1"])
def test_names_are_identifiers_and_never_reserved(wish):
    g = Graph()
    g.call_function(np.sin, ())  # takes "sin"
    g.call_function(np.sin, ())  # takes "sin_1"
    n = g.placeholder(wish)
    assert n.name.isidentifier()
    assert not keyword.iskeyword(n.name)
    assert n.name not in {"numpy", "operator", "float", "slice", "sin", "sin_1"}
    assert len({m.name for m in g.nodes}) == len(g.nodes)


def test_users_follow_args_and_kwargs_setters():
    g, x, y, s, m, out = _simple()
    assert list(x.users) == [s] and list(s.users) == [m] and list(m.users) == [out]
    assert m.all_input_nodes == [s, y]
    # Nested structures and slices count, duplicates appear once, in order.
    n = g.call_function(operator.getitem, (x, (slice(s, None), [y, {"k": s}])), {"o": x})
    assert n.all_input_nodes == [x, s, y]
    assert n in x.users and n in s.users and n in y.users
    n.args = (x, 0)
    n.kwargs = {}
    assert n.all_input_nodes == [x]
    assert n not in s.users and n not in y.users
    n.update_kwarg("axis", y)
    assert n in y.users
    n.update_arg(0, s)
    assert n.all_input_nodes == [s, y] and n not in x.users


def test_replace_all_uses_with_and_replace_input_with():
    g, x, y, s, m, out = _simple()
    with g.inserting_after(s):
        c = g.call_function(np.cos, (x,))
    changed = s.replace_all_uses_with(c)
    assert changed == [m]
    assert not s.users and m.args == (c, y) and list(c.users) == [m]
    m.replace_input_with(y, x)
    assert m.args == (c, x) and m not in y.users and m in x.users
    g.erase_node(s)
    g.lint()


def test_prev_next_and_insertion_points():
    g, x, y, s, m, out = _simple()
    assert s.prev is y and s.next is m
    with g.inserting_before(m):
        a = g.call_function(np.cos, (s,))
        b = g.call_function(np.tan, (a,))
    with g.inserting_after(x):
        c = g.call_function(np.exp, (x,))
        d = g.call_function(np.log, (c,))
    with g.inserting_before(None):
        e = g.placeholder("z")
    assert [n.name for n in g.nodes] == ["z", "x", "exp", "log", "y", "sin", "cos", "tan", "mul",
                                         "output"]
    assert list(reversed(g.nodes))[0] is out
    assert len(g.nodes) == 10 and e.prev.op == "root"
    # Outside the context managers, nodes go to the end again.
    g.erase_node(out)
    last = g.call_function(np.abs, (b,))
    assert list(g.nodes)[-1] is last and d.next is y
    g.lint()


def test_erase_node_with_users_raises():
    g, x, y, s, m, out = _simple()
    with pytest.raises(GraphError, match="still used by %mul"):
        g.erase_node(s)


def test_iterating_while_erasing_the_current_node_is_safe():
    g = Graph()
    x = g.placeholder("x")
    nodes = [g.call_function(np.sin, (x,)) for _ in range(5)]
    for n in g.nodes:
        if n.op == "call_function":
            g.erase_node(n)
    assert list(g.nodes) == [x] and not x.users and len(g.nodes) == 1
    assert all(n._erased for n in nodes)


def test_find_nodes():
    g, x, y, s, m, out = _simple()
    s2 = g.call_function(np.sin, (y,))
    assert g.find_nodes(op="placeholder") == [x, y]
    assert g.find_nodes(target=np.sin) == [s, s2]
    assert g.find_nodes(op="call_function", target=operator.mul) == [m]
    assert g.find_nodes(op="call_method") == []


def test_node_copy_into_another_graph():
    g, x, y, s, m, out = _simple()
    s.meta["val"] = ArrayMeta(np.float64, (8,))
    g2 = Graph()
    env = {}
    for n in g.nodes:
        env[n] = g2.node_copy(n, lambda a: env[a])
    g2.lint()
    copies = list(g2.nodes)
    assert [(c.op, c.name, c.target) for c in copies] == [(n.op, n.name, n.target) for n in g.nodes]
    assert all(c.graph is g2 for c in copies)
    assert env[m].args == (env[s], env[y])
    assert env[s].meta == s.meta and env[s].meta is not s.meta
    # Inputs from another graph are refused with a helpful message.
    with pytest.raises(GraphError, match="another graph"):
        g2.call_function(np.cos, (x,))


def test_is_impure():
    g = Graph()
    x = g.placeholder("x")
    pure = g.call_function(np.add, (x, 1))
    with_out = g.call_function(np.add, (x, 1), {"out": x})
    out_none = g.call_function(np.add, (x, 1), {"out": None})
    setitem = g.call_function(operator.setitem, (x, 0, 1))
    iadd = g.call_function(operator.iadd, (x, 1))
    ixor = g.call_function(operator.ixor, (x, 1))
    fill = g.call_method("fill", (x, 0))
    total = g.call_method("sum", (x,))
    rand = g.call_function(np.random.rand, (3,))
    out = g.output(pure)
    assert [n.is_impure() for n in (x, pure, with_out, out_none, setitem, iadd, ixor, fill, total,
                                    rand, out)] == [True, False, True, False, True, True, True,
                                                    True, False, True, True]


def test_register_impure():
    def log_value(v):
        return v

    g = Graph()
    x = g.placeholder("x")
    n = g.call_function(log_value, (x,))
    assert not n.is_impure()
    assert register_impure(log_value) is log_value
    assert n.is_impure()


def test_dce_removes_dead_pure_chains_and_keeps_impure_nodes():
    g = Graph()
    x = g.placeholder("x")
    x.meta["val"] = ArrayMeta(np.dtype(np.int64), (4,))
    unused = g.placeholder("unused")
    # A dead chain a -> b -> c of operations that cannot raise or warn on an int64[4] input.
    a = g.call_method("reshape", (x, (2, 2)))
    a.meta["val"] = ArrayMeta(np.dtype(np.int64), (2, 2))
    b = g.call_function(operator.mul, (a, 2))
    b.meta["val"] = ArrayMeta(np.dtype(np.int64), (2, 2))
    g.call_function(operator.getitem, (b, 0)).meta["val"] = ArrayMeta(np.dtype(np.int64), (2,))
    g.call_function(operator.setitem, (x, 0, 1.0))
    g.call_function(operator.iadd, (x, 1.0))
    g.call_function(np.multiply, (x, 2), {"out": x})
    live = g.call_function(np.cos, (x,))
    g.output(live)
    assert g.eliminate_dead_code() is True
    assert [n.name for n in g.nodes] == ["x", "unused", "setitem", "iadd", "multiply", "cos",
                                         "output"]
    assert unused.op == "placeholder"
    assert g.eliminate_dead_code() is False
    g.lint()


def test_lint_accepts_good_graphs_and_catches_corruption():
    g, x, y, s, m, out = _simple()
    g.lint()
    # users out of sync with args (bypassing the setter).
    m._args = (x, y)
    with pytest.raises(GraphError, match="without the setters"):
        g.lint()
    m.args = (s, y)
    g.lint()
    del s.users[m]
    with pytest.raises(GraphError, match="missing from its users"):
        g.lint()
    s.users[m] = None
    g.lint()
    # A stale user entry.
    x.users[m] = None
    with pytest.raises(GraphError, match="does not read it"):
        g.lint()
    del x.users[m]
    # Reading a later node (not topologically ordered).
    s.args = (m,)
    with pytest.raises(GraphError, match="not an earlier node"):
        g.lint()
    s.args = (x,)
    # Duplicate names and a second output.
    y.name = "x"
    with pytest.raises(GraphError, match="unique"):
        g.lint()
    y.name = "y"
    g.output(y)
    with pytest.raises(GraphError, match="after the output"):
        g.lint()


def test_format_node_and_str():
    g, x, y, s, m, out = _simple()
    m.meta["val"] = ArrayMeta(np.float64, (8,))
    assert m.format_node() == (
        "%mul : float64[8] = call_function[target=operator.mul](args = (%sin, %y), kwargs = {})"
    )
    assert str(g).splitlines() == [
        "%x = placeholder[target=x]",
        "%y = placeholder[target=y]",
        "%sin = call_function[target=numpy.sin](args = (%x,), kwargs = {})",
        "%mul : float64[8] = call_function[target=operator.mul](args = (%sin, %y), kwargs = {})",
        "return %mul",
    ]


def test_format_tabular_has_every_node(capsys):
    g, x, y, s, m, out = _simple()
    total = g.call_method("sum", (m,), {"axis": 0})
    total.meta["val"] = (ArrayMeta(np.float32, ()), ArrayMeta(np.int64, (2, 3)))
    table = g.format_tabular()
    lines = table.splitlines()
    assert lines[0].split() == ["opcode", "name", "target", "args", "kwargs", "val"]
    assert len(lines) == 2 + len(g.nodes)
    for n, line in zip(g.nodes, lines[2:]):
        assert line.split()[:2] == [n.op, n.name]
    assert "numpy.sin" in table and "{axis: 0}" in table and "(float32[], int64[2, 3])" in table
    g.print_tabular()
    assert capsys.readouterr().out.strip() == table.strip()


def test_proxy_builds_nodes():
    g = Graph()
    x = Proxy(g.placeholder("x"))
    y = (x * 2).sum()
    z = 1 - np.sin(x)[..., None]
    w = x.T
    assert y.node.op == "call_method" and y.node.target == "sum"
    assert y.node.args[0].target is operator.mul and y.node.args[0].args[1] == 2
    assert z.node.target is operator.sub and z.node.args[0] == 1
    assert z.node.args[1].target is operator.getitem
    assert z.node.args[1].args[1] == (Ellipsis, None)
    assert w.node.target is builtins.getattr and w.node.name == "T"
    assert np.linalg.norm(x).node.target is np.linalg.norm
    assert (x < 1).node.target is operator.lt
    assert (abs(x)).node.target is operator.abs
    with pytest.raises(TypeError, match="no concrete value"):
        bool(x > 0)
    g.output(y.node)
    g.lint()


def test_rename_node_keeps_names_unique():
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(np.sin, (x,))
    b = g.call_function(np.cos, (x,))
    assert g.rename_node(a, "var") == "var"
    assert g.rename_node(b, "var") == "var_1"  # taken: a unique variant
    assert g.rename_node(a, "var") == "var"  # its own name: unchanged
    assert g.rename_node(b, "x") != "x"  # never shadows a placeholder
    g.output((a, b))
    g.lint()
