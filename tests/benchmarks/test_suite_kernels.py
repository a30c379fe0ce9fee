"""Every kernel of the benchmark suite (benchmarks/suite/) gives NumPy's results when compiled.

In: the suite's kernels at their small sizes. Out: pass/fail. Each kernel runs plainly (the oracle)
and compiled with the eager backend and with the C backend forced to build kernels even for these
tiny arrays (``min_size=0, calibrate=False``; the default C backend would leave arrays this small
to NumPy and test nothing of its own), twice (first call and cached call). Results must be NumPy's
bit for bit (type, dtype, shape, strides, values; `tests/support/oracle.py`), exp/log/tanh/...
included (the C kernels call NumPy's own loops for them, docs/c_backend.md section 3). Warnings
must be NumPy's (as a set for C: a fused kernel reports each kind once), so an internal compiler error (a warning and a fallback to plain
Python) fails too; the arguments must be unchanged. Also checks the suite's shape (at least 25
kernels, every family asked for) and that `benchmarks/run_suite.py` runs and flags a wrong result.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.oracle import assert_same, compare, make_backend, run

import dynamo

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import run_suite
import suite

IDS = [k.name for k in suite.KERNELS]


@pytest.mark.parametrize("backend", ["eager", "c"])
@pytest.mark.parametrize("kernel", suite.KERNELS, ids=IDS)
def test_kernel_matches_numpy(kernel, backend):
    args = kernel.make(kernel.small)
    plain = run(kernel.fn, args)
    assert plain.status == "ok", f"{kernel.name} raised in plain NumPy: {plain.value!r}"
    counting = make_backend(backend)
    compiled = dynamo.compile(run_suite.fresh_copy(kernel.fn), backend=counting)
    for attempt in ("first call", "cached call"):
        got = run(compiled, args)
        where = f"{kernel.name} {backend} {attempt}"
        compare(plain, got, where, exact_warnings=backend != "c")
        assert_same(args, got.args, f"{kernel.name}: arguments after the call")
    assert counting.count >= 1, f"{kernel.name}: no graph was captured"


def test_suite_covers_the_asked_kinds():
    families = {k.family for k in suite.KERNELS}
    assert len(suite.KERNELS) >= 25
    assert {"stencil", "linalg", "particles", "statistics", "nn", "spectral"} <= families
    for name in ("nbody", "mandelbrot", "histogram", "softmax", "layernorm", "mlp", "conv2d",
                 "kmeans", "fft_convolve", "cholesky", "lu", "trisolv", "jacobi_2d"):
        assert name in IDS


def test_select_names_unknown_kernels():
    assert [k.name for k in suite.select("lu,nbody")] == ["lu", "nbody"]
    with pytest.raises(SystemExit, match="unknown kernel.*nope.*choose from"):
        suite.select("lu,nope")


def test_compare_flags_mismatches():
    a = np.arange(4.0)
    assert run_suite.compare((a, 1), (a.copy(), 1)) == ""
    assert run_suite.compare(a + 1e-12, a) == "~"
    assert run_suite.compare(a + 1.0, a) == "MISMATCH"
    assert run_suite.compare(a.astype(np.float32), a) == "MISMATCH"
    assert run_suite.compare(a[:3], a) == "MISMATCH"
    assert run_suite.compare(np.array([1, 2]), np.array([1, 3])) == "MISMATCH"


def test_run_suite_quick_prints_the_table(tmp_path):
    out = tmp_path / "table.md"
    proc = subprocess.run(
        [sys.executable, str(BENCH / "run_suite.py"), "--quick", "--kernels",
         "jacobi_1d,softmax,histogram_bincount", "--repeats", "2", "--out", str(out)],
        check=False, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = out.read_text()
    assert text.strip() == proc.stdout.strip()
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| kernel | family | size | NumPy ms | eager ms | eager x | C ms")
    assert [r.split(" | ")[0][2:] for r in rows[1:]] == ["jacobi_1d", "softmax",
                                                          "histogram_bincount"]
    assert "MISMATCH" not in text and "geometric mean" in text
    assert "numpy.bincount is not supported" in text  # break reasons are reported


def test_wrong_result_shows_as_mismatch_in_the_table():
    """The table marks an implementation whose result differs (a broken backend)."""
    k = suite.select("softmax")[0]

    def broken(gm, example_inputs):
        fn = gm.forward

        def wrong(*args):
            return copy.copy(fn(*args)) * 2.0
        return wrong

    args = run_suite.argparse.Namespace(repeats=1, budget=0.01, no_explain=True)
    impls = {"broken": lambda kernel: (dynamo.compile(run_suite.fresh_copy(kernel.fn),
                                                      backend=broken), None)}
    row = run_suite.measure(k, k.small, impls, args)
    assert row.cells["broken"].verdict == "MISMATCH"
    text = run_suite.report([row], ["broken"], [], args)
    assert "MISMATCH" in text and run_suite.ratio(row, "broken") is None


def test_each_timed_call_follows_untimed_calls_of_the_same_implementation():
    """A column is timed from its own steady state, not from the heap the previous column
    left (run_suite.measure): per round, `warm_calls` untimed calls, then the timed one."""
    k = suite.select("softmax")[0]
    order = []

    def counted(name, fn):
        def call(*args):
            order.append(name)
            return fn(*args)
        return call

    impls = {name: (lambda kernel, name=name: (counted(name, kernel.fn), None))
             for name in ("a", "b")}
    args = run_suite.argparse.Namespace(repeats=2, budget=10.0, no_explain=True, warm_calls=2)
    run_suite.measure(k, k.small, impls, args)
    # first calls, then per round: a a a, b b b (NumPy's own column calls kernel.fn directly)
    assert order == ["a", "b"] + ["a"] * 3 + ["b"] * 3 + ["a"] * 3 + ["b"] * 3


def test_npdynamo_warnings_of_the_first_call_are_reported():
    """An internal error (npdynamo warns and runs the frame in plain Python) shows in the notes."""
    k = suite.select("softmax")[0]

    def failing(gm, example_inputs):
        raise RuntimeError("backend exploded")

    args = run_suite.argparse.Namespace(repeats=1, budget=0.01, no_explain=True)
    impls = {"failing": lambda kernel: (dynamo.compile(run_suite.fresh_copy(kernel.fn),
                                                       backend=failing), None)}
    row = run_suite.measure(k, k.small, impls, args)
    assert row.cells["failing"].verdict == ""  # plain Python: NumPy's result
    text = run_suite.report([row], ["failing"], [], args)
    assert "failing on softmax: npdynamo: internal error" in text
    assert "backend exploded" in text
