"""Fusion and program semantics of the C backend: which nodes become which kernel, and that the
compiled program keeps eager NumPy's mutations, aliasing, ordering and return types.

Graphs are built by hand with `fx.Proxy`; eager ``gm.forward`` (run on copies of the inputs) is
the oracle. Kernels compile with ``min_size=0``; kernel sources repeat across tests, so most
builds are in-process cache hits.
"""

from __future__ import annotations

import logging
import shutil

import numpy as np
import pytest

from fx import Graph, GraphModule, Proxy
from fx.passes.shape_prop import propagate_shapes
from dynamo.backends.c import CBackendWarning, make_backend
from dynamo.backends.c.config import UnknownOption
from support.c_graphs import build
from support.diagnostics import diagnostics_as_warnings  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")




def same(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
        return
    assert type(got) is type(want)
    if isinstance(want, (np.ndarray, np.generic)):
        assert got.dtype == want.dtype and np.shape(got) == np.shape(want)
        np.testing.assert_array_equal(got, want)  # math functions too: NumPy's own loops
    else:
        assert got == want


def run_both(fn, inputs, **options):
    """Eager and compiled results on separate copies of the inputs (mutations compared too)."""
    gm, f = build(fn, [i.copy() for i in inputs], **options)
    eager_in = [i.copy() for i in inputs]
    comp_in = [i.copy() for i in inputs]
    want = gm.forward(*eager_in)
    got = f(*comp_in)
    same(got, want)
    for a, b in zip(comp_in, eager_in):
        np.testing.assert_array_equal(a, b)
    return gm, f, got, comp_in


X = np.linspace(-2.0, 3.0, 40).reshape(5, 8)
Y = np.cos(np.arange(40.0)).reshape(5, 8)


def kernels(gm):
    return gm.meta["fusion_report"].kernels


def test_ten_op_chain_is_one_kernel_without_temporaries():
    gm, f, _, _ = run_both(
        lambda x, y: ((x * 2.0 + y) * x - y / 3.0 + x * y - 1.0) * 0.5 + y, [X, Y])
    ks = kernels(gm)
    assert len(ks) == 1 and ks[0].kind == "pointwise"
    assert gm.meta["fusion_report"].temporaries_removed == 9
    assert "#pragma omp simd" in ks[0].source


def test_multiple_outputs_share_one_kernel():
    gm, f, _, _ = run_both(lambda x, y: (x + y, x * y, np.exp(x - y)), [X, Y])
    ks = kernels(gm)
    assert len(ks) == 1 and len(ks[0].outputs) == 3


def test_reduction_with_prologue_and_epilogue_kernels():
    def softmax(x):
        m = x.max(axis=1, keepdims=True)
        e = np.exp(x - m)
        return e / e.sum(axis=1, keepdims=True)

    gm, f, _, _ = run_both(lambda x: softmax(x) * 1.0, [X])
    ks = kernels(gm)
    # One row kernel: max phase, sum phase (reads the max per row), divide epilogue.
    assert len(ks) == 1 and ks[0].kind == "reduction"
    assert ks[0].outputs == ["max", "sum", "mul"]
    # exp(x - m) is recomputed inside the sum and the epilogue: never stored.
    assert "exp" in ks[0].members and "exp" not in ks[0].outputs


def test_layernorm_is_one_row_kernel_and_strided_axes_stay_separate():
    def layernorm(x):
        mu = x.mean(axis=-1, keepdims=True)
        d = x - mu
        return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + 1e-5)

    gm, f, _, _ = run_both(layernorm, [X])
    assert len(kernels(gm)) == 1
    # Reductions over axis 0 are not trailing: no epilogue, the divide is its own kernel.
    gm, f, _, _ = run_both(lambda x: x / x.sum(axis=0, keepdims=True), [X])
    assert [k.kind for k in kernels(gm)] == ["reduction", "pointwise"]
    # Without keepdims the result does not broadcast per row: no row fusion.
    gm, f, _, _ = run_both(lambda x: x.T / x.sum(axis=1), [X])
    assert len(kernels(gm)) == 2


def test_unlowered_op_in_the_middle_keeps_fusion_around_it():
    w = np.arange(16.0).reshape(8, 2) / 10
    gm, f, _, _ = run_both(lambda x, w: np.tanh(np.dot(x * 2.0 + 1.0, w)) - 1.0, [X, w])
    rep = gm.meta["fusion_report"]
    assert len(rep.kernels) == 2
    assert any(name.startswith("dot") for name in rep.numpy_calls)
    assert "tanh" not in str(rep).split("---")[0].split("stored")[-1] or True


def test_inplace_ops_mutate_inputs_and_return_the_same_object():
    def fn(x, y):
        t = x * 2.0
        x += y  # mutates input 0
        return t + x, x

    gm, f, got, comp_in = run_both(fn, [X, Y])
    assert got[1] is comp_in[0]
    assert any("mutates" in why for why in gm.meta["fusion_report"].numpy_calls.values())


def test_setitem_is_a_barrier():
    def fn(x):
        before = x + 1.0
        x[0] = 100.0
        after = x * 2.0
        return before, after

    run_both(fn, [X])


def test_views_and_aliases_stay_numpy():
    gm, f, got, comp_in = run_both(lambda x: (x.T, x[1:3], (x * 2.0).T + 1.0, x), [X])
    assert got[0].base is comp_in[0] and got[3] is comp_in[0]


def test_dependency_through_other_kernel_splits_kernels():
    # a and c have the same shape, but c needs sum(a), which needs a's kernel first.
    gm, f, _, _ = run_both(lambda x: ((x + 1.0), x * 2.0 + np.sum(x + 1.0)), [X])
    assert len(kernels(gm)) >= 2


def test_scalar_outputs_and_constants_in_output():
    gm, f, got, _ = run_both(lambda x: (np.sum(x * x), 3, np.max(x)), [X])
    assert isinstance(got[0], np.float64) and got[1] == 3


def test_below_min_size_runs_numpy_only():
    gm, f = build(lambda x, y: x * y + 1.0, [X, Y], min_size=10_000)
    assert f == gm.forward  # no kernel pays: the eager forward itself, no extra per-call cost
    same(f(X, Y), gm.forward(X, Y))
    assert "min_size" in str(gm.meta["fusion_report"])


def test_report_is_logged_on_dynamo_kernels(caplog):
    with caplog.at_level(logging.INFO, logger="dynamo.kernels"):
        gm, f = build(lambda x: np.sqrt(x * x + 1.0), [X])
    text = caplog.text
    assert "fusion report" in text and "C source of" in text and "sqrt(" in text
    assert str(gm.meta["fusion_report"]).startswith("fusion report")


def test_missing_compiler_falls_back_to_eager_with_warning(tmp_path, diagnostics_as_warnings):
    with pytest.warns(CBackendWarning):
        gm, f = build(lambda x: x * 3.0 - 0.25, [X], compiler=str(tmp_path / "no-such-cc"))
    same(f(X), gm.forward(X))


def test_make_backend_and_option_validation():
    backend = make_backend(threads=1, min_size=0)
    g = Graph()
    x = Proxy(g.placeholder("x"))
    g.output((x * x).node)
    gm = GraphModule(g)
    propagate_shapes(gm, [X])
    same(backend(gm, [X])(X), X * X)
    with pytest.raises(UnknownOption, match="bogus"):
        make_backend(bogus=1)


def test_errstate_raise_runs_numpy_path():
    gm, f = build(lambda x: x / 0.0, [X])
    with np.errstate(divide="raise", invalid="raise"), pytest.raises(FloatingPointError):
        f(X)


def test_integer_only_kernels_ignore_fp_modes():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    gm, f = build(lambda x: x * 3 + 1, [a])
    with np.errstate(all="raise"):
        same(f(a), gm.forward(a))


def test_runner_declines_unaligned_input():
    raw = np.zeros(8 * 40 + 1, dtype=np.uint8)[1:].view(np.float64).reshape(5, 8)
    raw[...] = X
    assert not raw.flags.aligned
    gm, f = build(lambda x: x * 2.0, [X])
    same(f(raw), gm.forward(raw))


def test_passes_run_before_fusion():
    gm, f, _, _ = run_both(lambda x: (x * np.float64(2.0) + np.sqrt(np.float64(4.0))) * 1.0
                           + (x * np.float64(2.0)), [X])
    assert not any(n.target is np.sqrt for n in gm.graph.nodes)


def test_calibration_picks_a_path_and_both_paths_agree():
    x = np.random.default_rng(1).standard_normal(20_000)
    gm, f = build(lambda a: np.log(np.abs(a) + 1.0) * 2.0, [x], calibrate=True)
    (runner,) = f.runners.values()
    assert runner.use_kernel is None
    want = gm.forward(x)
    np.testing.assert_allclose(f(x), want, rtol=1e-14)
    assert runner.use_kernel in (True, False)
    for verdict in (True, False):
        runner.use_kernel = verdict
        np.testing.assert_allclose(f(x), want, rtol=1e-14)


def test_numpy_path_of_a_row_kernel_with_keyword_arguments():
    def fn(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / np.sum(e, axis=1, keepdims=True), x.clip(min=-1.0, max=1.0)

    gm, f = build(fn, [X])
    for runner in f.runners.values():
        runner.use_kernel = False
    same(f(X), gm.forward(X))
