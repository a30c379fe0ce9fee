"""An ``if`` statement whose condition depends on the data (an element, a reduction), outside
loops, runs as one C kernel with the C backend: a `fx.control.Cond` node ends the graph where
the trace would have broken it, runs the condition and the branch taken, and the frame goes on
after the statement. Exact by deoptimisation: an IndexError, a ZeroDivisionError or an overflow
inside the branch undoes the kernel's writes and the whole statement runs again in Python,
which raises. Plain Python is the oracle of every result (values, types, arrays written)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dynamo
from fx.control import Cond, Loop
from support.loops import fresh_kernels  # noqa: F401 (a fixture)


def clip_first(a, t):
    c = 0
    if a[0] > t:
        a[0] = t
        c = 1
    elif a[0] < -t:
        a[0] = -t
        c = -1
    return a * 2.0, c


def sign_of_sum(x):
    y = x * 3.0
    if y.sum() > 0.0:
        s = 1.0
    else:
        s = -1.0
    return y * s


def early_return(a, i):
    if a[i] < 0.0:
        return -a[i]
    b = a + 1.0
    return b[i]


def divide_first(a, b):
    q = 0.0
    if a[0] != 0.0:
        q = b[0] / a[1]   # a[1] may be 0.0 (ZeroDivisionError) and a may have one element
        a[0] = q
    return q


def int_arithmetic(a, k):
    n = 1
    if a[0] > 0.0:
        n = k * 3037000500   # overflows int64 for k > 3037000499: Python ints do not
        a[0] = 1.0
    return n


def print_in_branch(a):
    if a[0] > 0.5:
        print("big")
    return a + 1.0


def _outcome(fn, *args):
    """(result or exception, the warnings it gave)"""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            out = ("ok", fn(*args))
        except Exception as exc:  # (the exception type and message are part of the outcome)
            out = ("raised", type(exc), str(exc))
    return out + (tuple((w.category, str(w.message)) for w in seen),)


def _same(x, y) -> bool:
    if isinstance(x, tuple):
        return isinstance(y, tuple) and len(x) == len(y) and all(map(_same, x, y))
    if isinstance(x, np.ndarray):
        return (isinstance(y, np.ndarray) and x.dtype == y.dtype and x.shape == y.shape
                and np.array_equal(x, y, equal_nan=True))
    return type(x) is type(y) and (x == y or (x != x and y != y))


def _check(fn, *args):
    """The compiled function's outcome and arrays written equal plain Python's."""
    plain_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    comp_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    want = _outcome(fn, *plain_args)
    got = _outcome(dynamo.compile(fn, backend="c"), *comp_args)
    assert _same(got, want), (got, want)
    assert all(_same(g, w) for g, w in zip(comp_args, plain_args)), (comp_args, plain_args)


def _cond_nodes(fn):
    nodes = []
    for entry in dynamo.cache_entries(fn):
        gm = getattr(entry.check_fn, "graph_module", None)
        if gm is not None:
            nodes += [(n, gm.code) for n in gm.graph.nodes if isinstance(n.target, Cond)]
    return nodes


@pytest.mark.parametrize("first", [3.0, -3.0, 0.25, np.nan])
def test_if_elif_runs_as_one_kernel_node(first):
    _check(clip_first, np.array([first, 1.0, 2.0]), 0.5)
    ((node, code),) = _cond_nodes(clip_first)
    cond = node.target
    assert isinstance(cond, Loop) and node.is_impure()
    assert cond.writes == ("a",) and cond.assigns == ("c",)
    assert set(cond.reads) == {"a", "c", "t"}
    assert node.next.op == "output"  # (the graph ends with it, as with a loop)
    assert cond.text().startswith("conditional clip_first_line")
    assert "conditional (a C kernel): reads" in code


def ends_of_product(x):
    y = x * 3.0
    if y[0] + y[-1] > 0.0:
        s = 1.0
    else:
        s = -1.0
    return y * s


@pytest.mark.parametrize("scale", [1.0, -1.0])
def test_a_condition_on_a_graph_value(scale):
    _check(ends_of_product, np.arange(5.0) * scale - 1.0)
    assert len(_cond_nodes(ends_of_product)) == 1


@pytest.mark.parametrize("scale", [1.0, -1.0])
def test_a_condition_on_a_reduction_of_a_graph_value(scale):
    """(where NumPy's summation loop is not one a kernel can call, NumPy 2.2's: the graph
    break, named)"""
    _check(sign_of_sum, np.arange(5.0) * scale - 1.0)
    out = dynamo.explain(sign_of_sum, backend="c")(np.arange(5.0) * scale - 1.0)
    assert len(_cond_nodes(sign_of_sum)) == 1 or "does not fold as NumPy sums" in out.loops[0]


@pytest.mark.parametrize("i", [0, 2, -1])
def test_a_return_inside_the_branch(i):
    _check(early_return, np.array([-1.0, 2.0, -3.0]), i)


def test_a_bad_index_in_the_condition_raises_as_python_does():
    _check(early_return, np.array([-1.0, 2.0]), 5)


@pytest.mark.parametrize("a", [[2.0, 4.0], [2.0, 0.0], [2.0], [0.0, 0.0]])
def test_a_deoptimisation_in_the_branch_undoes_its_writes_and_python_raises(a):
    """b[0] / a[1] of NumPy scalars: a division by zero warns (the kernel deoptimises, and NumPy
    warns in Python), an IndexError for a one-element `a` leaves a[0] as it was."""
    _check(divide_first, np.array(a), np.array([6.0]))


@pytest.mark.parametrize("k", [2, 3037000499, 3037000500, -7])
def test_python_ints_overflowing_int64_deoptimise(k):
    _check(int_arithmetic, np.array([1.0, 2.0]), k)


def test_one_compile_serves_other_values_and_sizes():
    f = dynamo.compile(clip_first, backend="c")
    for n, first in [(3, 3.0), (7, -3.0), (2, 0.0)]:
        a = np.full(n, first)
        b = a.copy()
        got, want = f(a, 0.5), clip_first(b, 0.5)
        assert _same(got, want) and _same(a, b)
    assert len(_cond_nodes(clip_first)) == 1


def test_a_branch_that_does_not_lower_is_a_graph_break_with_its_reason(capsys):
    out = dynamo.explain(print_in_branch, backend="c")(np.array([0.9, 0.1]))
    assert "big" in capsys.readouterr().out
    assert not _cond_nodes(print_in_branch)
    assert any("an if statement, not a C kernel (a graph break)" in loop for loop in out.loops)
    _check(print_in_branch, np.array([0.9, 0.1]))


def test_explain_names_the_if_statement():
    out = dynamo.explain(clip_first, backend="c")(np.array([3.0, 1.0]), 0.5)
    text = str(out)
    assert "the if statement at line" in text and "its condition depends on data" in text
    assert any("an if statement as a C kernel" in loop for loop in out.loops)


def test_other_backends_keep_the_graph_break():
    f = dynamo.compile(clip_first, backend="eager")
    a = np.array([3.0, 1.0])
    assert _same(f(a, 0.5), clip_first(np.array([3.0, 1.0]), 0.5))
    assert not _cond_nodes(clip_first)
