"""Every NPBench-style loop kernel (benchmarks/loop_kernels.py) is captured: at least one graph,
and its first call within the tracing budget (issue 6: triangular solves, LU, Cholesky,
stencils). The first-call time itself is measured by benchmarks/bench_first_call.py, not here
(no timed assertions in tests); this checks what makes it short: the trace is not cut off by
`max_instructions` with nothing captured."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import dynamo

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from loop_kernels import KERNELS  # noqa: E402


@pytest.mark.parametrize("name, fn, make", KERNELS, ids=[k[0] for k in KERNELS])
def test_a_loop_kernel_compiles_at_least_one_graph(name, fn, make):
    args = make(24)
    expected = fn(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    out = dynamo.explain(fn)(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    np.testing.assert_array_equal(out.result, expected)
    assert out.graph_count >= 1, out.break_reasons
