"""Output memory layout of C kernels: equal to eager NumPy's (order 'K') for non-C inputs.

NumPy's ufuncs allocate their outputs in the axis order of the inputs (F-ordered in, F-ordered
out; transposed in, transposed out; negative strides become positive). The C backend's
`kernel.output_order` reproduces NumPy's iterator rule and runs the kernel over the permuted
domain; reduction kernels whose outputs NumPy would lay out non-C fall back to NumPy calls.
The oracle is the graph's eager ``gm.forward`` on the same (non-contiguous) inputs; strides,
flags and values are compared.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import dynamo
from dynamo.backends.c.kernel import output_order
from support.c_graphs import build

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

RNG = np.random.default_rng(7)


def compiled_and_eager(fn, inputs, **options):
    gm, compiled = build(fn, inputs, **options)
    return compiled(*inputs), gm.forward(*inputs), compiled


def same_layout(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert g.strides == w.strides, (g.strides, w.strides)
        assert g.flags.c_contiguous == w.flags.c_contiguous
        assert g.flags.f_contiguous == w.flags.f_contiguous
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)  # libm vs SIMD: ULPs


def arr(shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


F2 = np.asfortranarray(arr((37, 53)))
F2b = np.asfortranarray(arr((37, 53)))
C2 = arr((37, 53))
F3 = np.asfortranarray(arr((5, 6, 7)))
T3 = arr((7, 5, 6)).transpose(1, 2, 0)  # a non-C, non-F axis order


@pytest.mark.parametrize("case", [
    ("F,F", lambda x, y: np.sin(x) * 2.0 + y, [F2, F2b]),
    ("F transposed (C view)", lambda x, y: x * y - 1.0, [F2.T, F2b.T]),
    ("F 3-D", lambda x, y: np.exp(x) + y, [F3, np.asfortranarray(arr((5, 6, 7)))]),
    ("transposed 3-D", lambda x: x * x + 1.0, [T3]),
    ("negative strides", lambda x: x * 3.0, [F2[::-1, ::-1]]),
    ("F with a broadcast row", lambda x, b: x * b + 1.0, [F2, arr(53)]),
    ("F with a broadcast column", lambda x, b: x - b, [F2, arr((37, 1))]),
    ("mixed C and F: C wins", lambda x, y: x + y, [F2, C2]),
    ("F float32 to bool", lambda x: np.sqrt(np.abs(x)) > 0.5, [F2.astype(np.float32, order="F")]),
    ("several outputs", lambda x, y: (x + y, x * y), [F2, F2b]),
], ids=lambda c: c[0])
def test_pointwise_output_layout_matches_numpy(case):
    _, fn, inputs = case
    got, want, _ = compiled_and_eager(fn, inputs)
    same_layout(got, want)


def test_strided_slices_of_f_arrays():
    x = np.asfortranarray(arr((40, 60)))[::2, 1::3]
    got, want, _ = compiled_and_eager(lambda a: np.tanh(a) * a, [x])
    same_layout(got, want)


def test_row_invariant_operand_stays_correct_in_permuted_domain():
    # `b` is hoisted out of the inner loop in C order (broadcast along the last axis); with
    # F inputs the inner run is axis 0, where b varies: the kernel must take the strided path.
    x, b = F2, arr((37, 1))
    got, want, _ = compiled_and_eager(lambda a, c: a * c + c, [x, b])
    same_layout(got, want)


def test_c_inputs_keep_c_outputs():
    got, want, _ = compiled_and_eager(lambda x, y: x * y + 1.0, [C2, arr(53)])
    assert got.flags.c_contiguous
    same_layout(got, want)


def test_reduction_epilogue_on_f_input_matches_numpy():
    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    got, want, _ = compiled_and_eager(softmax, [F2])
    same_layout(got, want)
    got, want, _ = compiled_and_eager(softmax, [C2])  # C input: the fused kernel, C output
    same_layout(got, want)


@pytest.mark.parametrize("axis", [0, 1, 2, (1, 2)])
def test_reduction_outputs_of_f_input(axis):
    got, want, _ = compiled_and_eager(lambda x: (x * x).sum(axis=axis), [F3])
    same_layout(got, want)


def test_output_order_rule_against_numpy_ufuncs():
    base = np.ones((3, 4, 5))
    views = [base, np.asfortranarray(base), base.transpose(2, 0, 1), base[:, :1, :],
             base.transpose(1, 2, 0)[::-1], np.asfortranarray(base)[:, :1, :], base[::-1, :, ::2]]
    rng = np.random.default_rng(0)
    for _ in range(200):
        ops = [views[i].transpose(rng.permutation(3)) if rng.random() < 0.3 else views[i]
               for i in rng.integers(len(views), size=rng.integers(1, 3))]
        try:
            shape = np.broadcast_shapes(*[o.shape for o in ops])
        except ValueError:
            continue
        want = np.negative(ops[0]) if len(ops) == 1 else np.add(*ops)
        strides = [[0 if n == 1 else s // 8 for n, s in zip(o.shape, o.strides)] for o in ops]
        perm = output_order(shape, strides)
        got = np.empty([shape[p] for p in perm]).transpose(np.argsort(perm))
        assert got.strides == want.strides, ([o.strides for o in ops], perm)


def test_end_to_end_f_ordered_through_dynamo_compile():
    def f(x, y):
        return (x * 2.0 + y) * x - 1.0

    fc = dynamo.compile(f, backend=dynamo.backends.c.make_backend(min_size=0, calibrate=False)) \
        if hasattr(dynamo, "backends") else dynamo.compile(f, backend="c")
    x, y = np.asfortranarray(arr((64, 300))), np.asfortranarray(arr((64, 300)))
    got, want = fc(x, y), f(x, y)
    same_layout(got, want)
