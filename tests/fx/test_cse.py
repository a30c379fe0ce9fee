"""Common-subexpression elimination (fx/passes/cse.py) merges only what is bit- and type-equal.

In: constants that compare equal but differ (signed zeros, NaN payloads, int/float/bool,
containers of them) and a hand-built graph multiplying by 0.0 and -0.0. Out: different CSE
keys for each pair, the same key for identical constants, and the graph's result unchanged by
CSE (bit for bit, `support.oracle.assert_same`).
"""

from __future__ import annotations

import operator

import numpy as np

import fx
from fx.passes.cse import _key, eliminate_common_subexpressions
from fx.passes.shape_prop import propagate_shapes
from support.oracle import assert_same as oracle_assert_same


def test_cse_keys_tell_signed_zeros_nan_payloads_and_types_apart():
    quiet_nan = float("nan")
    other_nan = np.frombuffer(np.array([0x7FF8000000000001], np.uint64).tobytes(), np.float64)[0]
    different = [
        (0.0, -0.0), (np.float64(0.0), np.float64(-0.0)), (np.float32(0.0), np.float64(0.0)),
        (complex(0.0, 0.0), complex(0.0, -0.0)), (quiet_nan, float(other_nan)),
        (1, 1.0), (1, True), ((0.0, 1), (-0.0, 1)), (slice(0.0, 1), slice(-0.0, 1)),
        ({"a": 0.0}, {"a": -0.0}), (np.float64(1.0), 1.0),
    ]
    for a, b in different:
        assert _key(a) != _key(b), (a, b)
    for a, b in [(0.0, 0.0), (quiet_nan, float("nan")), ((1, "x"), (1, "x")),
                 (np.float64(-0.0), np.float64(-0.0)), (None, None)]:
        assert _key(a) == _key(b), (a, b)


def test_cse_does_not_merge_multiplications_by_zero_and_negative_zero(monkeypatch):
    # x * 0.0 cannot warn for finite x; `may_raise_or_warn` is conservative for float
    # multiplications, so it is patched here to let the key alone decide what merges.
    import fx.passes.cse as cse

    monkeypatch.setattr(cse, "_may_raise_or_warn", lambda node: False)
    g = fx.Graph()
    x = g.placeholder("x")
    pos = g.call_function(operator.mul, (x, 0.0))
    neg = g.call_function(operator.mul, (x, -0.0))
    sign_pos = g.call_function(np.copysign, (1.0, pos))
    sign_neg = g.call_function(np.copysign, (1.0, neg))
    ten_neg = g.call_function(operator.mul, (sign_neg, 10.0))
    g.output(g.call_function(operator.add, (sign_pos, ten_neg)))
    xs = np.array([1.0, 2.0])
    propagate_shapes(fx.GraphModule(g), [xs])
    want = fx.GraphModule(g).forward(xs)
    np.testing.assert_array_equal(want, [-9.0, -9.0])
    eliminate_common_subexpressions(g)
    oracle_assert_same(want, fx.GraphModule(g).forward(xs))


def test_cse_does_not_merge_reads_on_either_side_of_a_write():
    """``t = A[0]; A[0] = 5.0; t + A[0]``: the second read sees the write (found by the loop
    fuzzer, tests/fuzz/test_loops_differential.py, on the C backend)."""
    import dynamo

    def f(A):
        t = A[0]
        A[0] = 5.0
        return t + A[0]

    for backend in ("eager", "c"):
        a = np.array([3.0, 2.0])
        assert dynamo.compile(f, backend=backend)(a) == 8.0
        dynamo.reset()
