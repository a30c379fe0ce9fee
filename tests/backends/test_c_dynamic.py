"""The C backend with symbolic (dynamic) shapes (issue 7, "Dynamic shapes", C part).

A graph whose sizes are symbolic (`fx.symbolic.Sym`) is planned and built once; every length the
guards admit runs the same kernels (sizes read per call), so calling a function with 20 lengths
compiles at most twice and runs gcc at most twice. Checked here, with plain NumPy as the oracle
(values, dtypes, shapes, strides): elementwise chains, reductions, slicing, 2-D broadcasting
with one dynamic dimension, Fortran-ordered inputs; that the kernels really run for every
length; that no build happens for a new length; that planning records no guard fact; that the
graph's metas are given back; lengths below ``min_size``; independent sizes; threads.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from support.oracle import assert_same
from support.threads import run_in_threads

import dynamo
import dynamo.backends.c as cbackend
from dynamo.backends.c import build as cbuild
from fx.meta import ArrayMeta
from fx.symbolic import Sym

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

#: 20 lengths, every kernel domain above the default min_size (8192).
LENGTHS = list(range(10_000, 30_000, 1_000))


def _env_of(gm):
    """The trace's ShapeEnv (from a placeholder's symbolic size), or None."""
    for n in gm.graph.nodes:
        val = n.meta.get("val")
        if n.op == "placeholder" and isinstance(val, ArrayMeta):
            for d in val.shape:
                if isinstance(d, Sym):
                    return d.env
    return None


class Recorder:
    """The C backend (no calibration: kernels always used above min_size), recording each
    graph, the compiled function, the guard facts before and after the backend ran, and the
    trace's ShapeEnv."""

    def __init__(self, **options):
        self.inner = cbackend.make_backend(calibrate=False, **options)
        self.compiled = []

    def __call__(self, gm, example_inputs):
        env = _env_of(gm)
        facts = list(env.facts) if env is not None else None
        fn = self.inner(gm, example_inputs)
        self.compiled.append((gm, fn, facts, list(env.facts) if env is not None else None, env))
        return fn


@pytest.fixture
def builds(monkeypatch):
    """Counts of `build_library` calls and gcc runs (`build._compile`)."""
    counts = {"build_library": 0, "gcc": 0}
    real_build, real_compile = cbuild.build_library, cbuild._compile

    def counting_build(*a, **k):
        counts["build_library"] += 1
        return real_build(*a, **k)

    def counting_compile(*a, **k):
        counts["gcc"] += 1
        return real_compile(*a, **k)

    monkeypatch.setattr(cbuild, "build_library", counting_build)
    monkeypatch.setattr(cbuild, "_compile", counting_compile)
    return counts


def _lin(n):
    return np.linspace(-2.0, 3.0, n)


def _pos(n):
    """Inputs for sin/cos/exp chains: all terms positive, so the few ULP libm may differ from
    NumPy's loops do not grow by cancellation."""
    return np.linspace(0.1, 3.0, n)


CASES = {
    "elementwise": (lambda x, y: np.sin(x) * y + 1.5 + x,
                    lambda n: (_pos(n), np.arange(n, dtype=np.float64)), 4),
    "reduction_rows": (lambda x: (x * 2.0 + 1.0).sum(axis=1),
                       lambda n: (_lin(n * 8).reshape(n, 8),), 0),
    "reduction_full": (lambda x: (x * x).sum(), lambda n: (_lin(n),), 0),
    "slicing": (lambda x: x[1:] - x[:-1] * 2.0, lambda n: (_lin(n) ** 2,), 0),
    "broadcast_2d": (lambda x, y: x * y + y,
                     lambda n: (_lin(n * 4).reshape(n, 4), np.arange(4.0) - 1.5), 0),
    "fortran_input": (lambda x: np.sin(x) * 2.0 + x,
                      lambda n: (np.asfortranarray(_pos(n * 3).reshape(n, 3)),), 4),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_twenty_lengths_compile_twice_and_reuse_the_kernels(case, builds):
    fn, make_args, ulps = CASES[case]
    dynamo.reset()
    backend = Recorder()
    compiled = dynamo.compile(fn, backend=backend)
    after_dynamic = None
    for i, n in enumerate(LENGTHS):
        args = make_args(n)
        assert_same(fn(*args), compiled(*args), f"{case} at length {n}", ulps=ulps)
        if i == 1:  # the second length made the sizes symbolic: the last compile and build
            after_dynamic = dict(builds)
    assert len(backend.compiled) <= 2
    gm, fn_c, facts_before, facts_after, _ = backend.compiled[-1]
    assert facts_before is not None, "the last graph should have symbolic sizes"
    # The kernels were built for the symbolic graph and ran for every length after that.
    runners = getattr(fn_c, "runners", None)
    assert runners, f"no kernel for the dynamic graph:\n{gm.meta.get('fusion_report')}"
    assert all(r.dynamic for r in runners.values())
    assert all(r.calls == len(LENGTHS) - 1 for r in runners.values()), \
        {name: r.calls for name, r in runners.items()}
    # No build (let alone gcc) for a new length.
    assert builds == after_dynamic, (builds, after_dynamic)
    # Planning over symbols asked no question that needed a guard.
    assert facts_after == facts_before


def test_a_new_length_runs_no_build(builds):
    def f(x):
        return np.exp(x) * 0.5 + x

    backend = Recorder()
    compiled = dynamo.compile(f, backend=backend, dynamic=True)
    x = _pos(20_000)
    assert_same(f(x), compiled(x), ulps=4)
    before = dict(builds)
    for n in (12_345, 40_001, 9_999):
        x = _pos(n)
        assert_same(f(x), compiled(x), ulps=4)
    assert builds == before and len(backend.compiled) == 1
    (runner,) = backend.compiled[0][1].runners.values()
    assert runner.calls == 4


def test_lengths_below_min_size_run_numpy_with_the_same_version():
    def f(x):
        return np.cos(x) + x * 3.0

    backend = Recorder()
    compiled = dynamo.compile(f, backend=backend, dynamic=True)
    x = _pos(10_000)
    assert_same(f(x), compiled(x), ulps=4)
    (runner,) = backend.compiled[0][1].runners.values()
    for n in (2, 3, 100, 8_191):
        x = _pos(n)
        assert_same(f(x), compiled(x), f"length {n}")  # NumPy itself: bit-exact
    assert runner.calls == 1 and len(backend.compiled) == 1
    x = _pos(8_192)
    assert_same(f(x), compiled(x), ulps=4)
    assert runner.calls == 2


def test_independent_sizes_get_their_own_kernels_and_no_guard():
    def f(x, y):
        return np.sin(x) + 1.0, np.cos(y) * 2.0

    backend = Recorder()
    compiled = dynamo.compile(f, backend=backend, dynamic=True)
    pairs = [(10_000, 12_000), (15_000, 15_000), (11_000, 20_000)]
    for n, m in pairs:
        args = (_pos(n), _pos(m) * 0.5)
        assert_same(f(*args), compiled(*args), f"lengths {n}, {m}", ulps=4)
    assert len(backend.compiled) == 1
    _, fn_c, facts_before, facts_after, _ = backend.compiled[0]
    # x and y may differ in length: fusing them into one loop would need a guard s0 == s1.
    assert len(fn_c.runners) == 2
    assert all(r.calls == len(pairs) for r in fn_c.runners.values())
    assert facts_after == facts_before


def test_the_graph_keeps_its_own_symbolic_metas():
    def f(x):
        return np.sqrt(x) * 2.0

    backend = Recorder()
    compiled = dynamo.compile(f, backend=backend, dynamic=True)
    x = _pos(10_000) ** 2
    assert_same(f(x), compiled(x), ulps=4)
    gm, env = backend.compiled[0][0], backend.compiled[0][4]
    assert env is not None
    # The backend plans over a copy of the env (`_PlanningEnv`), then gives the metas back.
    for n in gm.graph.nodes:
        val = n.meta.get("val")
        if isinstance(val, ArrayMeta):
            assert all(d.env is env for d in val.shape if isinstance(d, Sym)), n


def test_threads_with_mixed_lengths():
    def f(x, y):
        return (np.sin(x) * y).sum(axis=1) + 1.0

    backend = Recorder()
    compiled = dynamo.compile(f, backend=backend, dynamic=True)
    lengths = [2_000, 3_000, 5_000, 7_000]
    inputs = {n: (_pos(n * 8).reshape(n, 8), np.ones((n, 8)) * 0.25) for n in lengths}
    expected = {n: f(*args) for n, args in inputs.items()}
    compiled(*inputs[lengths[-1]])

    def worker(k):
        for i in range(100):
            n = lengths[(i + k) % len(lengths)]
            assert_same(expected[n], compiled(*inputs[n]), f"length {n}", ulps=4)

    errors = run_in_threads(worker, 4)
    assert not errors, errors[0]
    assert len(backend.compiled) == 1
    assert sum(r.calls for r in backend.compiled[0][1].runners.values()) > 1


def test_a_reduction_over_a_size_that_may_be_zero_stays_numpy():
    # x[2:] has s0 - 2 elements: possibly none, where max raises. The max stays a NumPy call
    # (decided from the symbol's bounds, no guard); the kernels around it are still built.
    def f(x):
        return np.exp(x[2:] * 0.5).max() + x * 2.0

    backend = Recorder()
    compiled = dynamo.compile(f, backend=backend, dynamic=True)
    for n in (10_000, 12_000, 3):
        x = _pos(n)
        assert_same(f(x), compiled(x), f"length {n}", ulps=4)
    gm, fn_c, facts_before, facts_after, _ = backend.compiled[0]
    assert len(fn_c.runners) == 2 and all(r.calls >= 2 for r in fn_c.runners.values())
    assert "may be empty" in str(gm.meta["fusion_report"])
    assert facts_after == facts_before
    with pytest.raises(ValueError, match="zero-size array"):
        compiled(_pos(2))


def test_a_domain_that_does_not_match_the_inputs_is_never_launched():
    # The domain of a symbolic kernel is computed from the sizes, not read from a meta: if it
    # ever disagreed with an input, the kernel would read out of bounds. The runner declines
    # (None: the NumPy path runs) instead.
    def f(x):
        return np.sqrt(x) + 1.0

    backend = Recorder()
    compiled = dynamo.compile(f, backend=backend, dynamic=True)
    x = _pos(10_000)
    assert_same(f(x), compiled(x), ulps=4)
    (runner,) = backend.compiled[0][1].runners.values()
    assert runner([x], (10_000,)) is not None
    assert runner([x], (10_005,)) is None
    assert runner([x.reshape(100, 100)], (100,)) is None
    assert runner.calls == 2


def test_planning_asks_only_what_the_guards_already_check():
    from fx.symbolic import ShapeEnv

    env = ShapeEnv()
    a = env.size_symbol("x", 0, 10, "x")
    b = env.size_symbol("y", 0, 12, "y")
    assert a != b  # the trace relied on this: a fact, so a guard
    facts = list(env.facts)
    plan_env = cbackend._planning_env(env)
    pa, pb = Sym(a.poly, plan_env), Sym(b.poly, plan_env)
    assert pa != pb  # already guarded: answered
    assert pa - 1 >= 1 and (pa == pa + 1) is False  # settled by the bounds / structure
    with pytest.raises(cbackend._Undecided):
        _ = pa < pb  # would need a new guard: planning gives up (the graph runs with NumPy)
    with pytest.raises(cbackend._Undecided):
        int(pa)
    assert env.facts == facts and plan_env.facts == facts
