"""Lowering decisions and generated C of the C backend (no compiler needed).

`lowering.lower` must accept exactly the nodes whose C form equals NumPy's semantics and refuse
the rest with a reason; `codegen_c` must print the NumPy-faithful C idioms (unsigned wrap-around,
quiet comparisons, pairwise sums, simd loops, NumPy's own loops for transcendentals).
"""

from __future__ import annotations


import numpy as np
import pytest

from fx import Graph, Proxy
from fx.passes.shape_prop import propagate_shapes
from dynamo.backends.c.codegen_c import module_source
from dynamo.backends.c.fusion import plan_fusion
from dynamo.backends.c.loop_ir import Op
from dynamo.backends.c.lowering import lower


def node_for(fn, *inputs):
    g = Graph()
    ps = [Proxy(g.placeholder(f"a{i}")) for i in range(len(inputs))]
    out = fn(*ps)
    g.output(out.node)
    propagate_shapes(g, list(inputs))
    return out.node, g


F8 = np.ones((3, 4))
F4 = np.ones((3, 4), np.float32)
I4 = np.ones((3, 4), np.int32)
F2 = np.ones((3, 4), np.float16)


@pytest.mark.parametrize("fn,inputs", [
    (lambda x: x + 1.0, [F8]),
    (lambda x: np.exp(x), [I4]),
    (lambda x, y: np.where(x > 0, x, y), [F8, F4]),
    (lambda x: x.astype(np.float32), [I4]),
    (lambda x: np.clip(x, 0, 1), [F4]),
    (lambda x: x ** 3, [I4]),
    (lambda x: x.sum(axis=1, keepdims=True), [I4]),
    (lambda x: np.argmax(x, axis=0), [F8]),
])
def test_lowered(fn, inputs):
    node, _ = node_for(fn, *inputs)
    plan, why = lower(node)
    assert plan is not None, why


@pytest.mark.parametrize("fn,inputs,reason", [
    (lambda x: x + 1.0, [F2], "float16"),
    (lambda x: x // 2, [I4], "no C lowering"),
    (lambda x: x % 3, [F8], "no C lowering"),
    (lambda x: x.astype(np.int32), [F8], "float -> integer"),
    (lambda x, y: x ** y, [I4, I4], "array exponent"),
    (lambda x, y: x ** y, [F8, F8], "array exponent"),
    (lambda x, y: np.clip(x, y, 1.0), [F8, F8], "array bounds"),
    (lambda x: np.sum(x, dtype=np.float32), [F8], "axis= and keepdims="),
    (lambda x: np.dot(x, x.T), [F8], "no lowering"),
    (lambda x: x << 2, [I4], "no C lowering"),
    (lambda x: np.add(x, 1.0, dtype=np.float32), [F8], "keyword"),
])
def test_refused_with_reason(fn, inputs, reason):
    node, _ = node_for(fn, *inputs)
    plan, why = lower(node)
    assert plan is None and reason in why


def test_mean_of_empty_axis_is_left_to_numpy():
    node, _ = node_for(lambda x: x.mean(axis=0), np.ones((0, 3)))
    plan, why = lower(node)
    assert plan is None and "empty" in why


@pytest.mark.parametrize("exponent, dtype, name, param", [
    (4, "f8", None, None), (3, "f4", None, None), (2.5, "f8", None, None),
    (2, "f8", "powi", 2), (-1, "f8", "reciprocal", None), (0.5, "f4", "sqrt", None),
    (4, "i8", "powi", 4)])
def test_power_lowering_follows_numpy(exponent, dtype, name, param):
    # NumPy squares for 2, takes reciprocal/sqrt for -1/0.5 and calls its own pow for other
    # float exponents (3 and 4 included): those stay NumPy calls (its last bit is NumPy's);
    # integer powers are exact by repeated squaring.
    node, _ = node_for(lambda x: x ** exponent, np.zeros(4, dtype))
    plan, why = lower(node)
    if name is None:
        assert plan is None and "pow" in why
        return
    v = plan.build(lambda n: Op("load", (), np.dtype(dtype)))
    assert (v.name, v.param) == (name, param)


def source_of(fn, *inputs):
    _, g = node_for(fn, *inputs)
    return module_source(plan_fusion(g).kernels)


def test_signed_arithmetic_goes_through_unsigned():
    src = source_of(lambda x, y: x * y + x, I4, I4)
    assert "(int32_t)((uint32_t)" in src


def test_small_int_multiply_widens_before_wrapping():
    a = np.ones(4, np.uint16)
    assert "(uint16_t)((uint32_t)" in source_of(lambda x: x * x, a)


def test_float_comparisons_are_quiet_and_loops_simd():
    src = source_of(lambda x: np.maximum(x, 0.0) < 1.0, F8)
    assert "DYN_LT(" in src and "DYN_GT(" in src and "#pragma omp simd" in src


def test_sum_is_pairwise_and_math_is_numpys_loop():
    src = source_of(lambda x: np.sum(np.exp(x)), F8)
    assert "n <= 128" in src and "q[8]" in src
    # exp is NumPy's own loop on a block of the row (its bits), never libm's exp
    assert "DYN_NUMPY1(exp_f8, " in src and "DYN_NP_exp_f8 = 0" in src
    assert "extern double exp(double);" not in src and "exp(v" not in src


def test_kernel_source_is_shape_independent():
    a = source_of(lambda x: np.tanh(x) * 2.0, np.ones((3, 4)))
    b = source_of(lambda x: np.tanh(x) * 2.0, np.ones((1000,)))
    assert a == b  # one compiled library serves every shape and layout


def test_broadcast_operands_are_hoisted_out_of_the_simd_loop():
    src = source_of(lambda x, s, row: x * s + row, F8, np.float64(2.0), np.ones((3, 1)))
    assert "const double x1 = in1[o1];" in src and "const double x2 = in2[o2];" in src
    # The full-size operand must be unit-stride and the hoisted ones stride 0 in the inner run
    # (with F-ordered inputs the kernel runs over a permuted domain where they may not be).
    assert "st0[nd - 1] == 1 && st1[nd - 1] == 0 && st2[nd - 1] == 0;" in src


def test_a_python_int_beyond_64_bits_times_a_float_array_is_lowered():
    """``A * 2**64``: the int is finite (np.isfinite refused it: an internal error; found by
    the loop fuzzer)."""
    import dynamo

    def f(A, k):
        return A * k

    a = np.array([1.5, 2.0])
    for k in (2 ** 64, -2 ** 63 - 1):
        out = dynamo.explain(f, backend="c")(a, k)
        assert np.array_equal(out.result, a * k)
        assert out.graph_count == 1 and not out.skipped_frames
