"""Chains of graph breaks with no graph (`dynamo.config.max_empty_breaks`).

In: functions whose attribute reads go through ``__getattr__`` (each read is a graph break), some
with NumPy work between the reads. Out: the compiled results equal plain Python's; a chain of
breaks with no graph stops after the configured number (the rest runs in plain Python, and
`explain()` says so); a chain whose links capture graphs is compiled to its end.

Found by CPython's test_descr (test_load_attr_extended_arg: 280 reads, one break each, took ~60 s
to compile, quadratic in the number of breaks).
"""

from __future__ import annotations

import numpy as np
import pytest

import dynamo


class Numbers:
    """Every attribute read is a graph break (the translator does not run ``__getattr__``)."""

    def __getattr__(self, name):
        return int(name.lstrip("_"))


def make_reader(n: int):
    """``def f(z): return [z._000, z._001, ...]`` with `n` reads (n breaks)."""
    attrs = ", ".join(f"z._{k:03d}" for k in range(n))
    namespace: dict = {}
    exec(compile(f"def reads(z):\n    return [{attrs}]\n", "<string>", "exec"), namespace)
    return namespace["reads"]


def reads_with_graphs(x, z):
    x = np.sin(x) + 1.0
    a = z._1
    x = np.cos(x) * a
    b = z._2
    x = x + b
    c = z._3
    x = np.sqrt(np.abs(x)) - c
    d = z._4
    x = x * 2.0 + d
    e = z._5
    return x + e


def empty_then_graph(x, z):
    a = z._1
    b = z._2
    c = z._3
    x = np.sin(x) + a  # a graph: the count of breaks in a row starts again
    d = z._4
    e = z._5
    f = z._6
    return x * (b + c + d + e + f)


def test_chain_without_graphs_stops_after_the_limit():
    reads = make_reader(30)
    with dynamo.config.patch(max_empty_breaks=4):
        out = dynamo.explain(reads)(Numbers())
    assert out.result == list(range(30))
    assert out.graph_count == 0
    assert out.graph_break_count == 4  # the function and 3 resume functions, then plain Python
    (skipped,) = out.skipped_frames
    assert "4 graph breaks in a row captured no graph" in skipped
    assert "dynamo.config.max_empty_breaks = 4" in skipped
    assert "'_004'" in skipped  # the break that was not made


def test_stopped_chain_gives_plain_results_on_every_call():
    reads = make_reader(40)
    compiled = dynamo.optimize("eager")(reads)
    for _ in range(3):
        assert compiled(Numbers()) == list(range(40))


def test_many_reads_compile_few_resume_functions():
    # The default limit: 280 reads (CPython's test) make 32 breaks, not 280.
    reads = make_reader(280)
    out = dynamo.explain(reads)(Numbers())
    assert out.result == list(range(280))
    assert out.graph_break_count == dynamo.config.max_empty_breaks == 32


def test_chain_with_graphs_is_not_stopped():
    x = np.linspace(0.0, 1.0, 5)
    with dynamo.config.patch(max_empty_breaks=1):
        out = dynamo.explain(reads_with_graphs)(x, Numbers())
    np.testing.assert_array_equal(out.result, reads_with_graphs(x, Numbers()))
    assert out.graph_break_count == 5
    assert out.graph_count == 6
    assert out.skipped_frames == []


def test_a_graph_restarts_the_count():
    x = np.linspace(0.0, 1.0, 5)
    with dynamo.config.patch(max_empty_breaks=3):
        out = dynamo.explain(empty_then_graph)(x, Numbers())
    np.testing.assert_array_equal(out.result, empty_then_graph(x, Numbers()))
    assert out.graph_break_count == 6 and out.skipped_frames == []
    assert out.graph_count == 2
    with dynamo.config.patch(max_empty_breaks=2):  # the third break in a row is not made
        out = dynamo.explain(empty_then_graph)(x, Numbers())
    np.testing.assert_array_equal(out.result, empty_then_graph(x, Numbers()))
    assert out.graph_break_count == 2 and out.graph_count == 0
    assert len(out.skipped_frames) == 1


@pytest.mark.parametrize("value", [0, -1, "8", 2.0, True])
def test_max_empty_breaks_is_validated(value):
    with pytest.raises((TypeError, ValueError), match="max_empty_breaks"):
        dynamo.config.max_empty_breaks = value
