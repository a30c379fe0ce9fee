"""A loop kernel is a node of the fx graph (`fx.control.Loop`): the graph ends with the loop,
which owns its body (the loop IR), declares the locals it reads, the arrays it writes and the
locals it assigns, is impure and takes the locals the trace never looked at as inputs with no
guard (one compile serves every size and value). Plain Python is the oracle of every result."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest

import dynamo
import fx
from dynamo import loop_kernels
from fx.control import Loop, Opaque
from support.loops import check, fresh_kernels  # noqa: F401 (a fixture)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_loops import recurrence  # noqa: E402


def fill(a, n):
    for i in range(n):
        a[i] = i * 0.5
    return a


def _graph(fn):
    entries = dynamo.cache_entries(fn)
    assert len(entries) == 1
    return entries[0].check_fn.graph_module


def _loop_nodes(gm):
    return [n for n in gm.graph.nodes if isinstance(n.target, Loop)]


def test_the_graph_ends_with_the_loop_as_one_node_that_prints_its_declarations():
    x = np.random.default_rng(0).random(30)
    f = dynamo.compile(recurrence, backend="c")
    assert np.array_equal(f(x), recurrence(x))
    gm = _graph(f)
    (node,) = _loop_nodes(gm)
    assert node.next.op == "output"  # (its last operation: the dispatch is bytecode)
    loop = node.target
    assert loop.reads == ("x", "y") and loop.writes == ("y",) and loop.assigns == ("i",)
    assert loop.run is loop_kernels.kernels_for(recurrence.__code__)[0]
    assert isinstance(node.meta["val"], Opaque)
    assert "loop nest recurrence_line" in loop.text()  # (the body: its statement IR)
    code = gm.code
    assert "for i in range(1, x.shape[0]):" in code  # (the user's line heads it)
    assert "reads x, y; writes y; assigns i" in code
    assert f"loop = {loop.__name__}(None, x, y)" in code
    assert "return (y, loop)" in code


def test_the_graph_calls_the_kernel_through_its_c_entry():
    """The name the graph code calls is the kernel's `_C.LoopCall` (the whole call in C: no
    Python frame of the wrapper between the graph and the kernel)."""
    f = dynamo.compile(recurrence, backend="c")
    x = np.random.default_rng(1).random(30)
    assert np.array_equal(f(x), recurrence(x))
    (node,) = _loop_nodes(_graph(f))
    loop = node.target
    assert type(loop.entry) is dynamo._C.LoopCall
    assert _graph(f).forward.__globals__[loop.__name__] is loop.entry


def sum_then_return_pair(a, n):
    s = 0.0
    for i in range(n):
        s += a[i]
    return s, a


def sum_then_scale(a, n):
    s = 0.0
    for i in range(n):
        s += a[i]
    return s * 2.0


@pytest.mark.parametrize("fn, resumes", [(fill, False), (sum_then_return_pair, False),
                                         (sum_then_scale, True)])
def test_a_return_of_locals_after_the_loop_runs_in_the_frame(fn, resumes):
    """After the loop, ``return a`` or ``return s, a`` runs in the frame (the plain copy of the
    rest); code that computes still runs in a resume function, captured again."""
    a = np.arange(12.0)
    f = dynamo.compile(fn, backend="c")
    got, want = f(a.copy(), 10), fn(a.copy(), 10)
    assert repr(got) == repr(want)
    (entry,) = dynamo.cache_entries(fn)
    codes = [c for c in entry.code.co_consts if isinstance(c, types.CodeType)]
    assert bool(codes) == resumes


def test_returns_at_once_reads_straight_line_returns_only():
    from dynamo.bytecode_analysis import code_info

    def shapes(a, b):
        for _ in a:
            pass
        return a, b, 1

    def calls(a):
        for _ in a:
            pass
        return len(a)

    def in_try(a):
        try:
            for _ in a:
                pass
            return a
        finally:
            pass

    def after(fn):
        """Whether the code after the (last) ``for`` loop's clean-up returns at once."""
        info = code_info(fn.__code__)
        last = max(i for i, ins in enumerate(info.instructions) if ins.name == "FOR_ITER")
        start = info.target(last)
        while info.instructions[start].name in ("END_FOR", "POP_TOP", "POP_ITER"):
            start += 1
        return info.returns_at_once(start)

    assert after(shapes) and not after(calls) and not after(in_try)


def test_the_loop_node_is_impure_and_declares_the_arrays_it_writes():
    f = dynamo.compile(recurrence, backend="c")
    f(np.ones(5))
    (node,) = _loop_nodes(_graph(f))
    assert node.is_impure()
    assert [a.name for a in node.written()] == ["y"]
    # (as a graph op of its own: DCE keeps it with no user, CSE never merges two)
    graph = fx.Graph()
    x = graph.placeholder("x")
    y = graph.placeholder("y")
    first = graph.call_function(node.target, (None, x, y))
    second = graph.call_function(node.target, (None, x, y))
    graph.output(None)
    graph.eliminate_dead_code()
    from fx.passes.cse import eliminate_common_subexpressions
    eliminate_common_subexpressions(graph)
    assert [n for n in graph.nodes if n.op == "call_function"] == [first, second]


def test_a_loop_declaration_must_be_consistent():
    with pytest.raises(ValueError, match="identifier"):
        Loop("not a name", print, None, ("a",), (), (), "f.py:1")
    with pytest.raises(ValueError, match="writes only arrays it reads"):
        Loop("ok", print, None, ("a",), ("b",), (), "f.py:1")


def swap_steps(u, v, steps):
    for t in range(steps):
        for i in range(1, u.shape[0] - 1):
            v[i] = 0.5 * (u[i - 1] + u[i + 1])
        u, v = v, u
    return u


def test_arrays_rebound_in_the_loop_make_every_array_possibly_written():
    u = np.random.default_rng(1).random(20)
    check(swap_steps, u, np.zeros(20), 5)
    f = dynamo.compile(swap_steps, backend="c")
    f(u.copy(), np.zeros(20), 5)
    (node,) = _loop_nodes(_graph(f))
    assert sorted(node.target.writes) == ["u", "v"]


def test_arguments_only_the_loop_reads_are_inputs_without_guards():
    f = dynamo.compile(fill, backend="c")
    for n in (3, 7, 40, 2, 11, 5, 9, 13, 17, 19):
        a = np.zeros(n + 2)
        assert np.array_equal(f(a, n), fill(np.zeros(n + 2), n))
    assert len(dynamo.cache_entries(f)) == 1  # (no recompile for a size or a value)
    entry = dynamo.cache_entries(f)[0]
    assert "L['a']" not in entry.guards and "L['n']" not in entry.guards
    gm = entry.check_fn.graph_module
    metas = {n.name: n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"}
    assert set(metas) == {"a", "n"} and all(isinstance(m, Opaque) for m in metas.values())
    # (another type: the kernel does not run, plain Python does, with Python's outcome)
    assert np.array_equal(f(np.zeros(4, dtype=np.int64), 3), fill(np.zeros(4, np.int64), 3))
    with pytest.raises(TypeError):
        f(np.zeros(4), "3")


def scalar_from_the_graph(a):
    s = a[0] * 2.0          # a NumPy float64 made by the graph
    t = 0.5                 # a Python float
    for i in range(a.shape[0]):
        s += a[i]
        t = t * 0.5 + a[i]
    return s, t


def fused_then_loop(x):
    y = np.sqrt(x) * 2.0 + 1.0   # a fused kernel of the C backend
    acc = 0.0
    for i in range(y.shape[0]):
        acc += y[i] * y[i]
        y[i] = acc
    return y, acc


@pytest.mark.parametrize("fn, arg", [
    (scalar_from_the_graph, np.arange(1.0, 9.0)),
    (fused_then_loop, np.random.default_rng(2).random(5000)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_graph_values_reach_the_loop_as_python_has_them(fn, arg):
    check(fn, arg)


def test_a_user_backend_that_asks_for_kernels_gets_the_loop_node():
    seen = []

    def backend(gm, example_inputs):
        seen.append((gm, list(example_inputs)))
        return gm.forward

    backend.loop_kernels = True
    f = dynamo.compile(fill, backend=backend)
    a = np.zeros(6)
    assert np.array_equal(f(a, 4), fill(np.zeros(6), 4))
    (gm, inputs), = seen
    assert len(_loop_nodes(gm)) == 1
    assert sorted(map(type, inputs), key=str) == [int, np.ndarray] and any(i is a for i in inputs)


K = 1.0


def assigns_a_global_then_loops(a):
    global K
    K = 3.0
    b = a * 2
    for i in range(a.shape[0]):
        a[i] = b[i] * K
    return a


def test_a_global_the_frame_assigns_before_the_loop_is_read_as_assigned():
    # (the kernel took K's value from before the assignment: 1.0, not 3.0)
    global K
    try:
        check(assigns_a_global_then_loops, np.arange(5.0), kernel=False)
    finally:
        K = 1.0


def test_explain_shows_the_loop_node_in_the_graph():
    out = dynamo.explain(recurrence, backend="c")(np.ones(8))
    text = str(out)
    assert "loop = recurrence_line" in text and "a C loop kernel (recurrence_line" in text


def zipped_divide(a, b):
    s = 0.0
    for i, (u, v) in enumerate(zip(a, b)):
        s += float(u) / float(v)   # Python floats: ZeroDivisionError at b[i] == 0
    return s


def test_check_accuracy_compares_a_loop_node_that_deoptimises_without_a_false_repro(tmp_path):
    # (its outcome holds the rest to iterate, an enumerate object: compared by type, never
    # consumed; it was compared with ==, unequal, and the repro then failed to pickle the loop)
    x = np.arange(1.0, 600.0)
    y = x.copy()
    y[400] = 0.0
    with dynamo.config.patch(check_accuracy=True, repro_dir=str(tmp_path / "repros")):
        check(zipped_divide, x, x)
        check(zipped_divide, x, y)
    assert not (tmp_path / "repros").exists()


def test_a_graph_with_a_loop_node_makes_a_repro_that_runs_again(tmp_path):
    from dynamo import repro
    from fx.serialize import graph_to_data
    x = np.random.default_rng(3).random(40)
    f = dynamo.compile(recurrence, backend="c")
    f(x)
    gm = _graph(f)
    path = repro.write_repro(graph_to_data(gm.graph), dict(gm.attrs), (x,), "c", "a test",
                             "recurrence", tmp_path / "r")
    assert "loop = recurrence_line" in (path / "repro.py").read_text()
    assert repro.run_repro(path) is None  # (the kernel built again from its pickled nest)
