"""The one-call kernel path for small domains (issue 11): `dynamo/backends/c/small.py` and
`csrc/small_call.c`.

A graph that is one kernel over its arguments compiles to a `dynamo._C.SmallKernel` (the
compiled function is one C call); kernels inside larger programs get a `SmallRunner`. The
oracle is NumPy (the graph's eager ``gm.forward``): results are compared bit for bit (values,
dtypes, shapes, strides, scalar types) for ops NumPy computes exactly, and warnings/exceptions
under ``np.errstate`` are NumPy's own.
"""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest
from support.c_graphs import build, same_bits

import dynamo
from dynamo import _C
from dynamo.backends.c import make_backend
from dynamo.backends.c.small import DynamicGate, SmallRunner

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

RNG = np.random.default_rng(11)


def rand(shape, dtype=np.float64):
    if np.dtype(dtype).kind == "b":
        return RNG.random(shape) < 0.5
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(-100 if np.dtype(dtype).kind == "i" else 0, 100, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def same_layout(got, want):
    assert same_bits(got, want), (got, want)
    assert got.strides == want.strides, (got.strides, want.strides)
    assert got.flags.c_contiguous == want.flags.c_contiguous
    assert got.flags.f_contiguous == want.flags.f_contiguous


# -- the whole graph is one C call ----------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 31, 100, 1000])
def test_one_kernel_graph_is_one_c_call_and_exact(n):
    x, y = rand(n), rand(n)
    gm, f = build(lambda a, b: a * b + 1.0 - a / (b * b + 2.0), [x, y])
    assert isinstance(f, _C.SmallKernel)
    before = f.calls
    for _ in range(3):
        same_layout(f(x, y), gm.forward(x, y))
    assert f.calls == before + 3  # every call ran the kernel, none fell back


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.uint8, np.int8])
def test_exact_dtypes_bit_for_bit(dtype):
    x, y = rand((4, 5), dtype), rand((4, 5), dtype)
    gm, f = build(lambda a, b: (a * b - a, np.maximum(a, b), a < b), [x, y])
    assert isinstance(f, _C.SmallKernel)
    got, want = f(x, y), gm.forward(x, y)
    assert type(got) is tuple and len(got) == 3
    for g, w in zip(got, want):
        same_layout(g, w)
    assert f.calls == 1


def test_reductions_and_scalar_results_bit_for_bit():
    x = rand((6, 7))
    gm, f = build(lambda a: np.sum(a * a), [x])
    assert isinstance(f, _C.SmallKernel)
    got, want = f(x), gm.forward(x)
    assert type(got) is np.float64 and same_bits(got, want)  # NumPy's pairwise order
    gm, f = build(lambda a: (a - a.max(axis=1, keepdims=True)), [x])
    same_layout(f(x), gm.forward(x))
    z = np.array(2.5)  # 0-d in: a NumPy scalar out, as NumPy gives
    gm, f = build(lambda a: a * 3.0 + 1.0, [z])
    got, want = f(z), gm.forward(z)
    assert type(got) is type(want) is np.float64 and same_bits(got, want)
    assert f.calls == 1


def test_result_is_a_fresh_array_every_call():
    x = rand(8)
    _gm, f = build(lambda a: a + 1.0, [x])
    r1, r2 = f(x), f(x)
    assert r1 is not r2 and not np.shares_memory(r1, r2) and not np.shares_memory(r1, x)
    assert r1.flags.owndata and r1.flags.writeable


def test_outputs_in_a_tuple_in_graph_order_with_repeats():
    x = rand(5)
    gm, f = build(lambda a: (a * 2.0, a + 1.0, a * 2.0), [x])
    got, want = f(x), gm.forward(x)
    assert isinstance(f, _C.SmallKernel) and same_bits(got, want)


def _cse_outputs_around_numpy_loop(a):
    v1 = 1 + a
    v2 = 1 + a  # the same expression as v1: one value in the kernel, two outputs
    return np.cos(v1), v1, v2


@pytest.mark.parametrize("fn", [_cse_outputs_around_numpy_loop,
                                lambda a: (np.exp(a), a * 2.0, np.exp(a), a * 2.0)])
@pytest.mark.parametrize("shape", [(), (10,), (5000,), (20_000,)])
@pytest.mark.parametrize("small", [True, False])
def test_equal_outputs_each_stored_when_a_numpy_loop_splits_the_kernel(fn, shape, small):
    """Regression (fuzz, test_differential[c]): with NumPy-loop math (cos, exp) the kernel's
    element loop is staged (`c_loops.element_loop`); outputs that are one expression each
    get their own store (not one store written twice and one output left unwritten)."""
    x = np.full(shape, -3.5)  # a 0-d array for shape ()
    x += rand(shape)
    gm, f = build(fn, [x], small_kernels=small)
    assert isinstance(f, _C.SmallKernel) == small
    for _ in range(2):
        got, want = f(x), gm.forward(x)
        assert same_bits(got, want), (got, want)


def test_arguments_the_kernel_does_not_read_and_reordered_operands():
    x, y, z = rand(6), rand(6), rand(6)
    gm, f = build(lambda a, b, c: c * 2.0 - a, [x, y, z])
    assert isinstance(f, _C.SmallKernel)
    same_layout(f(x, y, z), gm.forward(x, y, z))


# -- layouts ---------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda a: a,
    lambda a: np.asfortranarray(a),
    lambda a: a.T,
    lambda a: a[::-1, ::2],
    lambda a: np.broadcast_to(a[:1], a.shape),
], ids=["C", "F", "transposed", "negative-strided", "broadcast"])
def test_other_layouts_give_numpys_layout(make):
    base = rand((6, 6))
    gm, f = build(lambda a, b: a * 2.0 + b, [base, base])
    x = make(base)
    y = rand(x.shape)
    same_layout(f(x, y), gm.forward(x, y))


def test_layouts_registered_once_then_served_in_c():
    x = rand((5, 4))
    gm, f = build(lambda a: a * a, [x])
    f(x)
    f(x[::-1])  # another layout, outputs C-ordered: registered
    assert f.layouts == 2
    f(np.asfortranarray(x))  # F in, F out: the general runner (never registered)
    f(np.asfortranarray(x))
    assert f.layouts == 2
    same_layout(f(np.asfortranarray(x)), gm.forward(np.asfortranarray(x)))


def test_inputs_the_c_path_refuses_still_give_numpys_result():
    x = rand(16)
    gm, f = build(lambda a: a * 2.0 + 1.0, [x])
    raw = np.zeros(16 * 8 + 1, np.uint8)
    unaligned = raw[1:].view(np.float64)  # the kernel declines: NumPy computes it
    unaligned[:] = x
    assert not unaligned.flags.aligned
    same_layout(f(unaligned), gm.forward(unaligned))
    other_dtype_object = x.astype(np.dtype(np.float64, metadata={"k": 1}))
    same_layout(f(other_dtype_object), gm.forward(other_dtype_object))
    sub = x.view(np.ma.MaskedArray)  # not an exact ndarray
    assert np.array_equal(f(sub), gm.forward(sub))


# -- floating-point errors: NumPy's warnings and exceptions ---------------------------------

def test_fp_warnings_and_errstate_are_numpys():
    x = np.array([1.0, 0.0, 2.0, -1.0])
    gm, f = build(lambda a: np.log(a) * 2.0, [x])
    assert isinstance(f, _C.SmallKernel)
    for _ in range(2):  # the errstate cache (in C) must follow every change
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("error")
            assert same_bits(f(x), gm.forward(x))
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            r = f(x)
        with warnings.catch_warnings(record=True) as want:
            warnings.simplefilter("always")
            w = gm.forward(x)
        assert same_bits(r, w)
        assert [str(m.message) for m in got] == [str(m.message) for m in want]
        assert len(got) == 2  # divide by zero and invalid value, in log
        with np.errstate(all="ignore"):
            f(x)
        with np.errstate(divide="raise", invalid="ignore"), \
                pytest.raises(FloatingPointError, match="divide by zero encountered in log"):
            f(x)


def test_quiet_inputs_run_the_kernel_under_warn_mode():
    x = rand(8) ** 2 + 1.0
    gm, f = build(lambda a: np.sqrt(a) - 1.0, [x])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert same_bits(f(x), gm.forward(x))
    assert f.calls == 1


# -- calibration, programs, dynamic shapes ---------------------------------------------------

def test_calibration_decides_once_and_keeps_the_verdict():
    x = rand(8)
    gm, f = build(lambda a: a * 2.0 + 1.0, [x], calibrate=True)
    assert f.state == 1  # undecided until the first call
    same_layout(f(x), gm.forward(x))
    assert f.state in (0, 2)
    (runner,) = f.runners.values()
    assert runner.use_kernel is (f.state == 0) and runner.calibration is not None
    state = f.state
    for _ in range(3):
        same_layout(f(x), gm.forward(x))
    assert f.state == state


def stencil(u):
    # one step of a 2-D diffusion stencil: slices (NumPy views) around one fused kernel
    c = u[1:-1, 1:-1]
    lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * c
    return c + 0.1 * lap * (1.0 - c * c)


def test_program_with_numpy_calls_uses_one_call_runners():
    u = rand((32, 32))
    gm, f = build(lambda a: np.cumsum(stencil(a)), [u])  # cumsum: a NumPy call
    assert not isinstance(f, _C.SmallKernel)
    runners = list(f.runners.values())
    assert runners and all(isinstance(r, SmallRunner) for r in runners)
    same_layout(f(u), gm.forward(u))
    assert sum(r.sk.calls for r in runners) == len(runners)  # the C path, not the general one


@pytest.mark.parametrize("fn", [
    stencil,
    lambda a: a[1:-1, 1:] * 2.0 - a[:-2, :-1] - a[2:, 1:],
    lambda a: a[0] + a[-1] * 2.0 - a[3, ::-1],
    lambda a: a[::-1, ::-2] * a[:, 1::2] - a[..., ::2],
    lambda a: a[None, ..., ::2] * 2.0 + a[None, ::-1, 1::2],
    lambda a: (a[1:] - a[:-1]).sum(axis=1),
], ids=["stencil", "shifted", "int-index", "negative-steps", "none-ellipsis", "reduction"])
def test_constant_views_of_arguments_are_read_in_place(fn):
    u = rand((32, 32))
    gm, f = build(fn, [u])
    assert isinstance(f, _C.SmallKernel)  # the slices are not NumPy calls any more
    big = rand((40, 70))
    layouts = [u, u[::-1], big[3:35, 5:69:2], np.ascontiguousarray(u)]
    for x in layouts:
        for _ in range(2):
            same_layout(f(x), gm.forward(x))
    assert f.calls == 2 * len(layouts) and f.layouts == 3
    fortran = np.asfortranarray(u)  # F-ordered views: NumPy's layout, through the general path
    same_layout(f(fortran), gm.forward(fortran))


def test_through_dynamo_compile_with_default_options():
    def f(x, y):
        return np.sin(x) * y + 1

    x, y = rand(8), rand(8)
    compiled = dynamo.compile(f, backend="c")
    for _ in range(3):
        np.testing.assert_allclose(compiled(x, y), f(x, y), rtol=1e-15, atol=0)

    def g(u):
        return stencil(stencil(u))

    u = rand((32, 32))
    compiled = dynamo.compile(g, backend="c")
    for _ in range(3):
        same_layout(compiled(u), g(u))


def test_dynamic_kernels_are_gated_below_dynamic_min_size():
    seen = []
    backend = make_backend(calibrate=False, dynamic_min_size=100)

    def recorder(gm, example_inputs):
        fn = backend(gm, example_inputs)
        seen.append(fn)
        return fn

    compiled = dynamo.compile(lambda x: x * 2.0 + 1.0, backend=recorder, dynamic=True)
    for n in (500, 50, 700, 99, 100):
        x = rand(n)
        same_layout(compiled(x), x * 2.0 + 1.0)
    (runner,) = seen[0].runners.values()
    assert isinstance(runner, DynamicGate)
    assert runner.calls == 3  # 500, 700 and 100 elements; 50 and 99 ran NumPy


def test_small_kernels_off_keeps_the_general_runner():
    x = rand(8)
    gm, f = build(lambda a: a * 2.0 + 1.0, [x], small_kernels=False)
    assert not isinstance(f, _C.SmallKernel)
    assert not any(isinstance(r, SmallRunner) for r in f.runners.values())
    same_layout(f(x), gm.forward(x))


def test_small_kernel_rejects_bad_arguments_clearly():
    f8 = np.dtype("f8")
    with pytest.raises(TypeError, match="ndarray must be a type"):
        _C.SmallKernel(1, (f8,), ((8,),), (f8,), (False,), 1, np.empty, len, None, None)
    with pytest.raises(TypeError, match="in_dtypes must be NumPy dtypes"):
        from types import SimpleNamespace

        _C.SmallKernel(1, (SimpleNamespace(type=object),), ((8,),), (f8,), (False,),
                       np.ndarray, np.empty, len, None, None)
    with pytest.raises(ValueError, match="outputs"):
        _C.SmallKernel(1, (np.dtype("f8"),), (), (), (), np.ndarray, np.empty, len, None,
                       None)


def test_serial_calls_skip_the_openmp_region_and_parallel_calls_still_agree():
    # A `parallel if(0)` region still builds a one-thread team (~0.5 us per call): a kernel
    # calls its outlined body directly when par == 0.
    x, y = rand((300, 300)), rand((300, 300))
    gm, serial = build(lambda a, b: a * b - a / (b * b + 1.0), [x, y])
    source = str(gm.meta["fusion_report"])
    assert "if (!A[1]) return dyn_k0_region(A, P);" in source
    assert "fl |= dyn_k0_region(A, P);" in source
    _gm2, parallel = build(lambda a, b: a * b - a / (b * b + 1.0), [x, y], threads=2,
                          parallel_threshold=1, block=1024)
    assert not isinstance(parallel, _C.SmallKernel)  # parallel calls: the general runner
    assert same_bits(parallel(x, y), serial(x, y)) and same_bits(serial(x, y), gm.forward(x, y))
    gm3, red = build(lambda a: (a * a).sum(axis=1), [x], threads=2, parallel_threshold=1)
    assert same_bits(red(x), gm3.forward(x))


def test_numpy_scalar_operands_run_in_c():
    x = rand(8)
    gm, f = build(lambda a: a / np.linalg.norm(a) + 1.0, [x])  # norm: a NumPy call -> float64
    (runner,) = f.runners.values()
    assert isinstance(runner, SmallRunner)
    for _ in range(2):
        same_layout(f(x), gm.forward(x))
    assert runner.sk.calls == 2  # the scalar operand went through the one-call path
    x32 = rand(8, np.float32)
    gm, f = build(lambda a, s: a * s - s, [x32, np.float32(1.5)])
    assert isinstance(f, _C.SmallKernel)
    for s in (np.float32(1.5), np.float32(-0.0), np.array(np.float32(2.0))):
        got, want = f(x32, s), gm.forward(x32, s)
        same_layout(got, want)
    assert f.calls == 3 and f.layouts == 1  # a scalar and a 0-d array share the layout


def test_threads_share_one_small_kernel_and_its_layout_table():
    from support.threads import run_in_threads

    base = rand((40, 50))
    gm, f = build(lambda a: a * 2.0 - 1.0, [base])
    big = rand((200, 200))  # >= NOGIL_SIZE elements: the kernel runs without the GIL
    gm_big, f_big = build(lambda a: a * 2.0 - 1.0, [big])
    views = [base, base[::-1], base[:, ::-1], base.T.copy().T, base[::2].copy()]

    def work(i: int) -> None:
        for j in range(200):
            x = views[(i + j) % len(views)]
            if x.shape != base.shape:
                continue
            same_layout(f(x), gm.forward(x))
        for _ in range(20):
            same_layout(f_big(big), gm_big.forward(big))

    assert run_in_threads(work, 4) == []
    assert f.layouts <= 8 and f_big.calls == 80


def test_dropping_the_compiled_function_frees_it_without_the_collector():
    import gc
    import weakref

    for fn, x in ((lambda a: a * 3.0 + 2.0, rand(8)), (stencil, rand((8, 8)))):
        gm, f = build(fn, [x], calibrate=True)
        f(x)
        f(x[::-1])  # a layout registered by the miss path
        (runner,) = f.runners.values()
        library, small = weakref.ref(runner.library), weakref.ref(runner)
        gc.collect()
        gc.disable()
        try:
            del runner, f, gm
            assert library() is None and small() is None  # no cycles: freed at once
        finally:
            gc.enable()


def test_kernels_with_more_operands_than_the_c_path_takes_keep_the_general_runner():
    xs = [rand(4) + i for i in range(70)]

    def many(*args):
        total = args[0] * 1.0
        for a in args[1:]:
            total = total + a
        return total

    gm, f = build(many, xs)
    assert not isinstance(f, _C.SmallKernel)
    assert not any(isinstance(r, SmallRunner) for r in f.runners.values())
    same_layout(f(*xs), gm.forward(*xs))


def scalar_updates(a):
    # a Python-loop kernel unrolled into a program: scalar updates between NumPy calls
    a = a.copy()
    for i in range(1, 4):
        a[i, 0] = (a[i, 0] - np.dot(a[i, :1], a[0, :1])) / a[0, 0] * 0.5 + a[i, i]
    return a


def test_kernels_too_small_for_a_program_step_are_written_out_as_numpy():
    a = rand((4, 4)) + 4.0
    gm, f = build(scalar_updates, [a], calibrate=True)
    assert f == gm.forward  # every kernel is a few scalar ops: NumPy's scalar math wins
    report = str(gm.meta["fusion_report"])
    assert "too small to pay for a program step" in report
    same_layout(f(a), scalar_updates(a))
    gm, f = build(scalar_updates, [a], calibrate=False)  # forced: the kernels run
    assert f != gm.forward and all(isinstance(r, SmallRunner) for r in f.runners.values())
    same_layout(f(a), scalar_updates(a))
    assert all(r.calls == 1 for r in f.runners.values())


def test_a_program_keeps_kernels_that_pay_for_their_step():
    u = rand((32, 32))
    gm, f = build(lambda a: np.cumsum(stencil(a)), [u], calibrate=True)
    (runner,) = f.runners.values()
    same_layout(f(u), gm.forward(u))
    assert isinstance(runner, SmallRunner) and runner.calls >= 1


def cg_update(A, r, Ap):
    # conjugate_gradient's `r - alpha * Ap` between two matmuls: a 2-op kernel over a vector
    alpha = (r @ r) / (r @ Ap)
    return A @ (r - alpha * Ap)


@pytest.mark.parametrize("n, kept", [(300, False), (1000, False), (20_000, True)])
def test_a_two_op_vector_kernel_pays_for_its_step_only_when_long(n, kept):
    # A program step over an array costs ~1.9 us (its output allocated), where NumPy's two
    # ufuncs over 300 / 1,000 elements cost ~1.7 / 2.5 us: such a kernel lost ~0.3 us per
    # step (conjugate_gradient at 0.9x NumPy) until the model priced array steps on their own.
    A, r, Ap = rand((8, n)), rand(n), rand(n)
    gm, f = build(cg_update, [A, r, Ap], calibrate=True)
    report = str(gm.meta["fusion_report"])
    (line,) = [line for line in report.splitlines() if f"(pointwise over [{n}])" in line]
    assert ("too small to pay for a program step" in line) is not kept, report
    same_layout(f(A, r, Ap), gm.forward(A, r, Ap))


def test_prune_before_the_build_keeps_one_call_graphs_and_drops_tiny_program_kernels():
    from support.c_graphs import trace

    from dynamo.backends.c.config import resolve_options
    from dynamo.backends.c.fusion import plan_fusion
    from dynamo.backends.c.small import prune

    opts = resolve_options()
    gm = trace(scalar_updates, [rand((4, 4)) + 4.0])
    plan = plan_fusion(gm.graph)
    worth, notes = list(plan.kernels), {}
    prune(gm, plan, worth, notes, opts)
    assert plan.kernels and worth == [] and set(notes) == {k.name for k in plan.kernels}
    gm = trace(lambda a: a * 2.0, [rand(3)])  # one operation, but the whole graph: one call
    plan = plan_fusion(gm.graph)
    worth, notes = list(plan.kernels), {}
    prune(gm, plan, worth, notes, opts)
    assert len(worth) == 1 and notes == {}
