"""np.roll lowered into the C backend's fused kernels (issue 11).

In: functions with ``np.roll`` over constant shifts and axes (every kernel dtype, 1-D to 3-D,
zero, negative and huge shifts, tuples of shifts and axes, views with negative strides,
F-ordered and transposed inputs, rolls of rolls, rolls of expressions with broadcast operands,
rolls read by reductions). Out: pass/fail: each roll is computed inside a C kernel (the fusion
report lists it among a kernel's members, not as a NumPy call), the kernel really ran (its call
counter moved), and the result equals NumPy's bit for bit, with NumPy's dtype, shape and strides
(a roll only moves values; `np.roll` lays its result out like its input, ``empty_like``).

The lowering: `lowering._roll_plan` (a rolled Load, `loop_ir.roll_value`), the roll slots'
shifts in the layout block (`kernel.PointwiseRunner._plan`), the wrapped reads in
`c_pointwise._rolled_pointwise_source`, and fusion's rule that a rolled value never enters a row
kernel (`fusion.plan_fusion`).
"""

from __future__ import annotations

import numpy as np
import pytest

import dynamo
from dynamo.backends.c import make_backend

DTYPES = ["?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8"]


def _data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
    return rng.standard_normal(shape).astype(dt)


def _calls(compiled):
    # a runner's calls count every launch (one-call path, whole-graph call, general runner)
    return sum(r.calls for r in compiled.runners.values())


def check(fn, *args, rolls_in_kernel=None, calls=2, **options):
    """Compile ``fn`` with the C backend, call it ``calls`` times, compare with NumPy bit for
    bit (values, dtype, shape, strides); assert the rolls (all of them, or the names given)
    were computed by kernels that ran."""
    graphs = []
    inner = make_backend(**{"calibrate": False, "dynamic_min_size": 1, **options})

    def capture(gm, example_inputs):
        compiled = inner(gm, example_inputs)
        graphs.append((gm, compiled))
        return compiled

    f = dynamo.compile(fn, backend=capture)
    want = fn(*args)
    for _ in range(calls):
        got = f(*args)
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            assert g.dtype == w.dtype and g.shape == w.shape and g.strides == w.strides
            assert g.tobytes() == w.tobytes()
    assert graphs, "nothing was compiled"
    total_rolls = 0
    for gm, compiled in graphs:
        report = gm.meta["fusion_report"]
        rolls = {n.name for n in gm.graph.nodes if n.target is np.roll}
        total_rolls += len(rolls)
        in_kernels = {m for k in report.kernels if k.compiled for m in k.members}
        expected = rolls if rolls_in_kernel is None else set(rolls_in_kernel)
        assert expected <= in_kernels, str(report)
        assert not rolls & set(report.numpy_calls), str(report)
        if rolls:
            assert _calls(compiled) >= calls, str(report)
    assert total_rolls, "no np.roll was captured"
    return graphs


def diffusion(u):
    return u + 0.1 * (np.roll(u, 1, axis=0) + np.roll(u, -1, axis=0)
                      + np.roll(u, 1, axis=1) + np.roll(u, -1, axis=1) - 4.0 * u)


def life_step(board):
    n = np.zeros(board.shape, dtype=np.uint8)
    for di in (-1, 0, 1):
        for dj in (-1, 0, 1):
            if di != 0 or dj != 0:
                n = n + np.roll(np.roll(board, di, axis=0), dj, axis=1)
    return ((n == 3) | ((board == 1) & (n == 2))).astype(np.uint8)


def test_diffusion_step_is_one_kernel():
    u = _data((37, 41), "f8")
    (gm, compiled), = check(diffusion, u)
    report = gm.meta["fusion_report"]
    assert len(report.kernels) == 1 and not report.numpy_calls, str(report)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_alone_and_in_an_expression(dtype):
    x = _data((9, 13), dtype)
    check(lambda a: np.roll(a, 3, axis=1), x)
    check(lambda a: np.roll(a, -2, axis=0), x)
    if dtype == "?":
        check(lambda a: a ^ np.roll(a, 1, axis=0) | np.roll(a, -1, axis=1), x)
    else:
        check(lambda a: a + np.roll(a, 1, axis=0) * np.roll(a, -1, axis=1), x)


@pytest.mark.parametrize("shift", [0, 1, -1, 12, 13, 14, -13, -27, 5 * 13 + 4, -(2 ** 40) - 3,
                                   10 ** 20])
@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_shifts_and_axes(shift, axis):
    x = _data((11, 13), "f8", seed=1)
    check(lambda a: np.roll(a, shift, axis) * 2.0, x)


@pytest.mark.parametrize("shape,shift,axis", [
    ((17,), 5, 0), ((17,), -20, -1), ((1,), 3, 0), ((0,), 2, 0), ((4, 0), 1, 0),
    ((5, 6, 7), 2, 0), ((5, 6, 7), -3, 1), ((5, 6, 7), 9, 2), ((5, 1, 7), 1, 1),
    ((5, 6, 7), (1, -2, 3), (0, 1, 2)), ((5, 6, 7), 2, (0, 2)), ((5, 6, 7), (1, 4), (1, 1)),
    ((3, 40000), (1, -7), (0, 1)),
])
def test_ranks_tuples_and_sizes(shape, shift, axis):
    x = _data(shape, "f4", seed=2)
    if x.size == 0:
        # an empty domain computes nothing: the result is still NumPy's (no kernel call)
        f = dynamo.compile(lambda a: np.roll(a, shift, axis) + 1.0, backend=make_backend(
            calibrate=False))
        got, want = f(x), np.roll(x, shift, axis) + 1.0
        assert got.shape == want.shape and got.dtype == want.dtype
        return
    check(lambda a: np.roll(a, shift, axis) + 1.0, x)


@pytest.mark.parametrize("view", [
    lambda b: b[::-1], lambda b: b[:, ::-2], lambda b: b[::2, 3:], lambda b: b.T,
    lambda b: b[::-1].T, lambda b: np.asfortranarray(b), lambda b: b[1:-1, 1:-1],
])
def test_views_negative_strides_and_orders(view):
    base = _data((24, 30), "f8", seed=3)
    x = view(base)
    check(diffusion, x)
    check(lambda a: np.roll(a, 2, axis=1) - a, x)  # laid out like NumPy (F in, F out)


@pytest.mark.parametrize("axes", [(0, 1, 2), (2, 0, 1), (1, 2, 0)])
def test_transposed_3d(axes):
    x = _data((6, 7, 8), "i4", seed=4).transpose(axes)[::-1]
    check(lambda a: np.roll(a, 1, 0) + np.roll(a, -2, 1) + np.roll(a, 3, 2), x)


def test_rolls_of_rolls_life():
    board = (_data((19, 23), "u1", seed=5) % 2).astype(np.uint8)
    check(life_step, board)
    # shifts that cancel and shifts that add up
    check(lambda a: np.roll(np.roll(a, 3, 0), -3, 0) + np.roll(np.roll(a, 4, 1), 30, 1), board)


def test_life_benchmark_form_with_in_place_adds():
    # the suite's life: `n += roll(roll(board))` (in-place adds are NumPy calls; each roll of
    # a roll is its own kernel, a gather)
    def life(board):
        n = np.zeros(board.shape, dtype=np.uint8)
        for di in (-1, 0, 1):
            for dj in (-1, 0, 1):
                if di != 0 or dj != 0:
                    n += np.roll(np.roll(board, di, axis=0), dj, axis=1)
        return ((n == 3) | ((board == 1) & (n == 2))).astype(np.uint8)

    board = (_data((16, 20), "u1", seed=6) % 2).astype(np.uint8)
    check(life, board)


def test_roll_of_an_expression_with_broadcast_operands():
    a, b, c = _data((8, 9), "f8", 7), _data((9,), "f8", 8), _data((8, 1), "f8", 9)
    check(lambda x, y, z: np.roll(x * y + z, 2, axis=1) - np.roll(x - y * z, -3, axis=0),
          a, b, c)
    check(lambda x, y: np.roll(x + y, (1, 1), (0, 1)) / 3.0, a, b)


def test_rolls_read_by_reductions_are_stored_and_correct():
    x = _data((30, 40), "f8", 10)

    def fn(a):
        r = np.roll(a, 1, 0) * a
        return r.sum(axis=1), np.roll(a, -1, 1).max(axis=0), r

    (gm, compiled), = check(fn, x)
    report = gm.meta["fusion_report"]
    for k in report.kernels:
        if k.kind != "pointwise":
            assert not any(m.startswith("roll") for m in k.members), str(report)

    def epilogue(a):  # softmax of a rolled row: the roll never joins the row kernel
        e = np.roll(a, 3, 1) - a.max(axis=1, keepdims=True)
        return e / a.sum(axis=1, keepdims=True)

    check(epilogue, x)


def test_roll_without_axis_stays_a_numpy_call():
    x = _data((5, 6), "f8", 11)
    graphs = []
    inner = make_backend(calibrate=False, dynamic_min_size=1)

    def capture(gm, example_inputs):
        graphs.append(gm)
        return inner(gm, example_inputs)

    f = dynamo.compile(lambda a: np.roll(a, 4) + 1.0, backend=capture)
    assert np.array_equal(f(x), np.roll(x, 4) + 1.0)
    (gm,) = graphs
    assert any(name.startswith("roll") for name in gm.meta["fusion_report"].numpy_calls)


def test_new_sizes_each_run_a_kernel():
    # np.roll's op rule specialises the sizes (a graph per size even with dynamic=True, as of
    # 2026-11-25); each graph's rolls still run in its kernel.
    graphs = []
    inner = make_backend(calibrate=False, dynamic_min_size=1)

    def capture(gm, example_inputs):
        compiled = inner(gm, example_inputs)
        graphs.append((gm, compiled))
        return compiled

    def fn(u):  # the stencil written out: a called function is a frame of its own
        return u + 0.1 * (np.roll(u, 1, axis=0) + np.roll(u, -1, axis=0)
                          + np.roll(u, 1, axis=1) + np.roll(u, -1, axis=1) - 4.0 * u)

    f = dynamo.compile(fn, backend=capture, dynamic=True)
    for n in (90, 91, 130, 97):
        x = _data((n, n + 3), "f8", n)
        assert f(x).tobytes() == fn(x).tobytes()
    assert graphs
    for gm, compiled in graphs:
        assert not gm.meta["fusion_report"].numpy_calls and _calls(compiled) >= 1


@pytest.mark.parametrize("block,threads", [(5, 1), (7, 2), (1, 2), (64, 2)])
def test_blocks_cut_across_the_wrap_points(block, threads):
    # The inner dim is cut into blocks of `block` elements (work items, split over threads);
    # a block may start or end before, at or after a slot's wrap point.
    x = _data((6, 23), "f8", 12)
    check(lambda a: np.roll(a, 3, 1) + np.roll(a, -5, 1) * np.roll(a, 11, 1) - np.roll(a, 1, 0),
          x, block=block, threads=threads, parallel_threshold=1)
    check(lambda a: np.roll(a, 4, 0) * 0.5, _data((41,), "f4", 13), block=block,
          threads=threads, parallel_threshold=1)


def test_a_roll_by_nothing_is_a_fresh_copy():
    x = _data((6, 7), "i8", 14)
    (gm, compiled), = check(lambda a: np.roll(a, 7, 1), x)
    f = dynamo.compile(lambda a: np.roll(a, 7, 1), backend=make_backend(calibrate=False))
    got = f(x)
    assert got is not x and not np.shares_memory(got, x) and np.array_equal(got, x)


def test_rolls_of_views_taken_inside_the_function():
    x = _data((12, 15), "f8", 15)
    check(lambda a: np.roll(a[1:, ::-1], 2, 0) + np.roll(a[:-1].T, -4, 0).T, x[:, :12])


def test_a_flagging_roll_kernel_warns_like_numpy():
    x = _data((7, 9), "f8", 16)
    x[2, 3] = 0.0

    def fn(a):
        return np.roll(a, 1, 0) / a

    f = dynamo.compile(fn, backend=make_backend(calibrate=False))
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        want = fn(x)
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        got = f(x)
    assert got.tobytes() == want.tobytes()
    y = x + 10.0  # no zero: the kernel's result is kept
    check(fn, y)


def test_a_time_loop_of_stencils_stores_each_step():
    # A roll's input is stored unless it is a roll of stored values: inlined, each step's
    # `u` would be recomputed at every shift of the next step (5 ** steps expressions).
    def steps3(u):
        for _ in range(3):
            u = u + 0.1 * (np.roll(u, 1, axis=0) + np.roll(u, -1, axis=0)
                           + np.roll(u, 1, axis=1) + np.roll(u, -1, axis=1) - 4.0 * u)
        return u

    (gm, compiled), = check(steps3, _data((20, 24), "f8", 17))
    report = gm.meta["fusion_report"]
    assert len(report.kernels) == 3 and not report.numpy_calls, str(report)

    def steps25(u):
        for _ in range(25):
            u = u + 0.1 * (np.roll(u, 1, axis=0) + np.roll(u, -1, axis=0)
                           + np.roll(u, 1, axis=1) + np.roll(u, -1, axis=1) - 4.0 * u)
        return u

    check(steps25, _data((20, 24), "f8", 18), calls=1)
