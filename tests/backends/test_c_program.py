"""The C backend's program is generated straight-line code (issue 11: per-node overhead, dead
values kept alive).

* ``compiled.program_code`` is the readable source of the compiled function: NumPy nodes are
  plain statements, each C kernel one statement calling its step, each kernel's NumPy path a
  generated function too.
* No Python work per NumPy node: the number of Python function calls of one program call does
  not grow with the graph (a graph-walking runner made several per node).
* Dead values are freed: every intermediate is deleted after its last use, in the program and
  in a kernel's NumPy path, so the peak memory of a long graph is NumPy's own (tracemalloc).
* A 1,200-node graph runs as fast as ``gm.forward`` (timings printed, not asserted).

Oracle: the same function applied to ndarrays (plain NumPy) and ``gm.forward``.
"""

from __future__ import annotations

import gc
import shutil
import sys
import time
import tracemalloc
import types

import numpy as np
import pytest

import dynamo
from dynamo.backends.c import compile_graph
from support.c_graphs import build, same_bits

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

#: Kernels only from this domain size: the small arrays below stay NumPy statements.
BIG = 8192


def mixed(n_small: int):
    """One kernel over a big array plus ``n_small`` cheap NumPy operations on a small one."""
    def fn(big, s):
        out = np.sin(big) * 2.0 + np.cos(big)
        for i in range(n_small // 2):
            s = s * 0.999 + 0.001 if i % 2 else np.abs(s[::-1] - 0.5) + s
        return out, s
    return fn


def mixed_inputs():
    return [np.linspace(0.0, 1.0, BIG), np.linspace(1.0, 2.0, 16)]


def python_calls(fn, *args) -> int:
    """How many Python functions (frames) one call of ``fn`` runs."""
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        count += event == "call"

    sys.setprofile(profile)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return count - 1  # fn itself


def test_program_code_is_readable_straight_line_code():
    fn = mixed(6)
    _, f = build(fn, mixed_inputs(), min_size=BIG)
    code = f.program_code
    assert code.count("def ") == 2  # the kernel's NumPy path and the program
    assert "def forward(a0, a1):" in code and "_numpy(a0):" in code
    assert "# C kernel" in code and " = dyn_k" in code  # one statement per kernel
    assert "numpy.absolute(" in code and "del " in code
    for got, want in zip(f(*mixed_inputs()), fn(*mixed_inputs())):
        np.testing.assert_allclose(got, want, rtol=1e-14)
    assert sum(r.calls for r in f.runners.values()) >= 1


@pytest.mark.parametrize("n_small", [40, 1200])
def test_numpy_nodes_cost_no_python_calls(n_small):
    fn = mixed(n_small)
    inputs = mixed_inputs()
    gm, f = build(fn, inputs, min_size=BIG)
    assert len(gm.graph.nodes) > n_small
    assert same_bits(f(*inputs), gm.forward(*inputs))
    # A kernel step and the runner's few helpers; nothing per NumPy node (the graph-walking
    # runner made 2-3 Python calls per node: thousands here).
    assert python_calls(f, *inputs) < 30


def best_us(fn, args, rounds=30):
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best * 1e6


def test_1200_node_graph_runs_as_fast_as_eager(capsys):
    fn = mixed(1200)
    inputs = mixed_inputs()
    gm, f = build(fn, inputs, min_size=BIG)
    for got, want in zip(f(*inputs), fn(*inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-13)
    compiled, eager = best_us(f, inputs), best_us(gm.forward, inputs)
    with capsys.disabled():
        print(f"\n{len(gm.graph.nodes)}-node graph: C program {compiled:.0f} us, "
              f"gm.forward {eager:.0f} us, plain NumPy {best_us(fn, inputs):.0f} us")


def peak_bytes(fn, *args) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


N = 200_000  # 1.6 MB per float64 array


def long_chain(x):
    """NumPy calls (cumsum: never fused) and kernels alternating: 40 big intermediates."""
    for i in range(20):
        x = np.cumsum(x) * 1e-6
        x = np.sin(x) * 2.0 + 1.0
    return x


def test_long_graph_frees_dead_values_like_numpy():
    x = np.linspace(0.0, 1.0, N)
    _, f = build(long_chain, [x], min_size=BIG)
    np.testing.assert_allclose(f(x), long_chain(x), rtol=1e-12)
    assert sum(r.calls for r in f.runners.values()) >= 20
    numpy_peak, compiled_peak = peak_bytes(long_chain, x), peak_bytes(f, x)
    # Kept alive, the 40 intermediates would take 64 MB; NumPy holds about three at a time.
    assert compiled_peak <= numpy_peak + x.nbytes // 2, (compiled_peak, numpy_peak)


def fused_chain(x):
    for _ in range(20):
        x = np.sin(x) * 1.01
    return np.cumsum(x)  # (a NumPy call after the kernel: the graph is a program)


def test_numpy_path_of_a_kernel_frees_dead_values():
    x = np.linspace(0.0, 1.0, N)
    _, f = build(fused_chain, [x], min_size=BIG)
    (runner,) = f.runners.values()
    runner.use_kernel = False  # calibration chose NumPy: the generated path runs
    calls = runner.calls
    np.testing.assert_allclose(f(x), fused_chain(x), rtol=0)
    assert runner.calls == calls
    numpy_peak, compiled_peak = peak_bytes(fused_chain, x), peak_bytes(f, x)
    assert compiled_peak <= numpy_peak + x.nbytes // 2, (compiled_peak, numpy_peak)


def test_kernel_outputs_read_only_inside_the_kernel_are_computed_by_the_numpy_path():
    # The row kernel's reduction result is an output of the kernel (a phase), read only by
    # its epilogue: the NumPy path must still compute it under its own name, although the
    # source line would nest it into its one user.
    compiled = []

    def backend(gm, example_inputs):
        compiled.append(compile_graph(gm, example_inputs, min_size=BIG))
        return compiled[-1]

    def fn(a):
        return np.cumsum(a * 2.0 - np.sum(a, axis=1, keepdims=True))

    x = np.random.default_rng(0).standard_normal((64, 256))
    f = dynamo.compile(fn, backend=backend)
    want = fn(x)
    assert same_bits(f(x), want)
    (program,) = compiled
    for runner in program.runners.values():
        runner.use_kernel = False
    assert "sum = numpy.sum(a, axis=1, keepdims=True)" in program.program_code
    assert same_bits(f(x), want)


def test_program_frames_are_hidden_from_tracebacks():
    def fn(x, m):
        a = np.sin(x) * 2.0 + 1.0
        return a, np.linalg.inv(m)

    x = np.ones(BIG)
    f = dynamo.compile(fn, backend=lambda gm, ex: compile_graph(gm, ex, min_size=BIG))
    f(x, np.eye(3))
    with pytest.raises(np.linalg.LinAlgError) as info:
        f(x, np.zeros((3, 3)))
    files = [entry.path for entry in info.traceback]
    assert not [p for p in files if "<fx-graph" in str(p) or "dynamo/backends" in str(p)], files


def test_generated_functions_and_steps_are_hidden():
    # An exception inside a kernel's NumPy path (a KeyboardInterrupt, a MemoryError) passes
    # through the step and the generated path: neither may show in the user's traceback.
    from dynamo import _C

    _, f = build(fused_chain, [np.ones(BIG)], min_size=BIG)
    functions, pending = [], [f, f.__globals__["dyn_k0"]]
    while pending:  # the step, the closures it calls, the generated NumPy path
        fn = pending.pop()
        functions.append(fn)
        pending += [c.cell_contents for c in fn.__closure__ or ()
                    if isinstance(c.cell_contents, types.FunctionType)
                    and c.cell_contents not in functions]
    names = {fn.__name__ for fn in functions}
    assert {"forward", "dyn_k0_numpy", "step", "run"} <= names
    assert all(_C.get_code_hidden(fn.__code__) for fn in functions)
