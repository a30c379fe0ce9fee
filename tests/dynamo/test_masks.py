"""Boolean-mask indexing inside graphs: ``x[mask]`` (a data-dependent length) and
``x[mask] = values`` are captured, with NumPy as the oracle.

Comes in: user functions indexing with traced boolean masks (the Mandelbrot loop body, chains
over the selected values, masks over leading dimensions, empty masks, masks changed between
uses). Goes out: one graph where the lengths agree without a guard (the same mask at the same
point of the trace), the same results, errors and warnings as plain NumPy on both backends, a
graph break (never a wrong answer or an internal error) where the length itself is needed, and
no recompilation when the number of selected values changes.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dynamo
from dynamo.backends.c import make_backend


def mandelbrot(c, maxiter):
    n = np.zeros(c.shape, dtype=np.int64)
    z = np.zeros(c.shape, dtype=np.complex128)
    for k in range(maxiter):
        i = np.less(abs(z), 2.0)
        n[i] = k
        z[i] = z[i] ** 2 + c[i]
    n[n == maxiter - 1] = 0
    return z, n


def _grid(n):
    x = np.linspace(-2.0, 0.6, n)
    return x + x[:, None] * 1j


def test_mandelbrot_loop_is_one_graph(check):
    check(mandelbrot, _grid(9), 6)


def test_selected_values_chain(check):
    def f(x, y):
        m = x > 0.3
        x[m] = x[m] * 2.0 + y[m] - 1.0
        return x, x[m].sum(), (y[m] ** 2).mean()

    rng = np.random.default_rng(0)
    check(f, rng.random((6, 5)), rng.random((6, 5)))


def test_mask_over_leading_dimensions(check):
    def f(x, w):
        m = w.sum(axis=1) > 1.0
        x[m] = x[m] * 3.0
        return x[m] + 1.0, x

    rng = np.random.default_rng(1)
    check(f, rng.random((5, 3, 2)), rng.random((5, 2)))


@pytest.mark.parametrize("threshold", [-1.0, 0.5, 2.0])  # every / some / no value selected
def test_any_number_of_selected_values_and_no_recompile(check, threshold):
    def f(x, t):
        m = x < t
        x[m] = np.sqrt(x[m]) + x[m]
        return x

    check(f, np.linspace(0.0, 1.5, 12), threshold)


def test_changing_counts_reuse_the_graph(backend):
    def f(x, y):
        m = x > y
        x[m] = x[m] - y[m]
        return x

    compiled = dynamo.compile(f, backend=backend)
    rng = np.random.default_rng(2)
    for _ in range(4):
        x, y = rng.random(20), rng.random(20) * rng.random()
        want = f(x.copy(), y)
        assert np.array_equal(compiled(x.copy(), y), want)
    assert backend.count == 1


def test_mask_changed_between_uses_gets_a_new_length(check):
    def f(x, y):
        m = x > 0.5
        a = x[m]
        m[0] = True  # the second use may select one more value
        b = y[m]
        return a, b, a.sum() + b.sum()

    check(f, np.linspace(0.0, 1.0, 7), np.linspace(1.0, 2.0, 7), graphs=None)

    def g(x):
        m = x > 0.5
        a = x[m] * 2.0
        m[0] = True
        x[m] = a  # NumPy raises: one value too few; the trace must not take the lengths equal
        return x

    def h(x):  # the same, where the mutation happens not to change the mask
        m = x > 0.5
        a = x[m] * 2.0
        m[-1] = True
        x[m] = a
        return x

    check(g, np.linspace(0.0, 1.0, 7), graphs=None)
    check(h, np.linspace(0.0, 1.0, 7), graphs=None)
    out = dynamo.explain(h)(np.linspace(0.0, 1.0, 7))
    assert out.graph_break_count >= 1


def test_lengths_of_different_masks_do_not_broadcast(check):
    def f(x, y):
        return x[x > 0.5] + y[y > 0.5]

    # equal counts: NumPy adds; different counts: NumPy raises. The graph never guesses.
    check(f, np.linspace(0.0, 1.0, 6), np.linspace(0.0, 1.0, 6), graphs=None)
    check(f, np.linspace(0.0, 1.0, 6), np.linspace(0.4, 1.0, 6), graphs=None)


def test_the_length_itself_breaks_the_graph(check):
    def f(x):
        s = x[x > 0.5]
        return s * 2.0, len(s), s.shape

    check(f, np.linspace(0.0, 1.0, 9), graphs=None)


def test_errors_are_numpys(check):
    def empty_max(x):
        return x[x > 5.0].max()

    def wrong_shape(x, m):
        return x[m]

    check(empty_max, np.linspace(0.0, 1.0, 4), graphs=None)
    check(wrong_shape, np.zeros((3, 4)), np.ones((4,), bool), graphs=None)


def test_assigning_values_of_another_length(check):
    def f(x, y):
        x[x > 0.5] = y[y > 0.2]
        return x

    check(f, np.linspace(0.0, 1.0, 6), np.linspace(0.0, 1.0, 6), graphs=None)


@pytest.mark.parametrize("threshold", [0.25, 2.0])
def test_c_backend_runs_masked_graphs_exactly(threshold):
    def f(x, y):
        m = x > threshold
        x[m] = x[m] * 0.5 + y[m] * y[m]
        return x, np.sqrt(x) + 1.0

    rng = np.random.default_rng(4)
    x, y = rng.random((40, 30)), rng.random((40, 30))
    want = f(x.copy(), y)
    for be in (make_backend(min_size=0, calibrate=False), "c"):
        out = dynamo.explain(f, be)(x.copy(), y)
        assert out.graph_count == 1 and out.graph_break_count == 0, out
        compiled = dynamo.compile(f, backend=be)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for _ in range(2):
                got = compiled(x.copy(), y)
                assert all(g.tobytes() == w.tobytes() and g.shape == w.shape
                           for g, w in zip(got, want))
        dynamo.reset()


def test_c_backend_mandelbrot_is_one_graph_and_exact():
    c = _grid(15)
    want = mandelbrot(c, 8)
    be = make_backend(min_size=0, calibrate=False)
    out = dynamo.explain(mandelbrot, be)(c, 8)
    assert out.graph_count == 1 and out.graph_break_count == 0, out
    compiled = dynamo.compile(mandelbrot, backend=be)
    for _ in range(2):
        z, n = compiled(c, 8)
        assert z.tobytes() == want[0].tobytes() and n.tobytes() == want[1].tobytes()


# Data-dependent lengths in Python code ----------------------------------------------------------


def _iterate_selected(x):
    v = x[x > 0]
    for r in v:
        x = x + r
    return x, [r * 2 for r in v]


def test_iterating_over_the_selected_values_is_not_an_internal_error():
    # ArrayRowIterator.next compares its index with the data-dependent length (s0 > 0):
    # DataDependentSize escapes the translator (an internal error, not a graph break).
    x = np.arange(-3.0, 5.0)
    expected = _iterate_selected(x.copy())
    with dynamo.config.patch(suppress_errors=False):
        got = dynamo.compile(_iterate_selected, backend="eager")(x.copy())
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1] == expected[1]


def _squeezed_selection(x):
    v = np.squeeze(x[x > 0])
    return v.ndim, "scalar" if v.ndim == 0 else "vector"


def test_squeezing_a_selection_of_one_value_gives_a_0d_array():
    # shape_ops._rearranged probes every symbolic size with 10007 (a symbol stands for a size
    # >= 2), but a data-dependent length may be 0 or 1: np.squeeze of a one-value selection is
    # 0-d in NumPy, while the trace's meta (and so ``.ndim`` and Python branches on it) keeps
    # (s0,).
    x = np.array([1.0, -2.0, -3.0])  # (one value selected)
    assert dynamo.compile(_squeezed_selection, backend="eager")(x.copy()) == \
        _squeezed_selection(x.copy())
