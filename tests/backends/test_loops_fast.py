"""Fast copies of innermost loops (dynamo/loop_nest/fast.py): a chunk of iterations runs
without the checks a test before it proves, its stores logged as blocks. Plain Python is the
oracle (support.loops.check: value, exception, arrays, warnings, twice); each test also says
whether the kernel took the fast copy, so that it judges the copy and not the checked loop.

How a test knows the fast copy ran: the kernel counts the chunks it ran there
(`LoopKernel.fast_chunks`)."""

from __future__ import annotations

import numpy as np
import pytest

import dynamo
from dynamo import loop_kernels
from dynamo.loop_nest import fast

from support.loops import check, fresh_kernels  # noqa: F401 (a fixture)



def _nest_text(fn):
    kernels = loop_kernels.kernels_for(fn.__code__)
    assert kernels, "no loop kernel was built"
    return "\n".join(k.nest.text() for k in kernels), "\n".join(k.source for k in kernels)


def _fast_taken(fn, *args) -> bool:
    """Whether a call of `fn` (compiled, C, on copies of `args`) ran chunks in a fast copy:
    the kernel counts them (`LoopKernel.fast_chunks`)."""
    compiled = dynamo.compile(fn, backend="c")
    compiled(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    kernels = loop_kernels.kernels_for(fn.__code__)
    assert kernels, "no loop kernel was built"
    before = sum(k.fast_chunks() for k in kernels)
    compiled(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    return sum(k.fast_chunks() for k in kernels) > before


# -- programs ----------------------------------------------------------------------------------
def bump_then_fail(u, k):
    """Fast stores (``+=``: applied twice if the undo missed one), then an IndexError in the
    same save window: the kernel puts the chunk's stores back and Python runs from the save
    point."""
    n = u.shape[0]
    for t in range(3):
        for i in range(n):
            u[i] += 1.0
        if t == k:
            u[n] = 0.0
    return u


def bump_rows_then_fail(A, k):
    n, m = A.shape
    for t in range(2):
        for r in range(n):
            for j in range(1, m):
                A[r, j] += A[r, j - 1] * 0.5
            A[r, 0] -= 1.0
        if t == k:
            A[0, m] = 1.0
    return A


def divide_inside(u, v):
    """A check the test cannot prove (Python's ZeroDivisionError) inside the fast copy, after
    stores of the same chunk."""
    for i in range(u.shape[0]):
        u[i] += 1.0 / float(v[i])
    return u


def count_points(x, start):
    count = start
    for i in range(x.shape[0]):
        if x[i] > 0.5:
            count += 1
        else:
            count += 2
    return count


def neighbours(x, out):
    for i in range(out.shape[0]):
        out[i] = x[i - 1] + x[i + 1]
    return out


def search(x, v):
    for i in range(x.shape[0]):
        if x[i] == v:
            return i
    return -1


def first_big(x):
    found = -1.0
    for i in range(x.shape[0]):
        if x[i] > 0.9:
            found = x[i]
            break
    return found


def scale(x, f):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = x[i] * f
    return out


def fixed_cell(x, A, r):
    for i in range(x.shape[0]):
        A[r, 1] = A[r, 1] + x[i]
    return A


RNG = np.random.default_rng(11)


def test_a_simple_loop_takes_the_fast_copy():
    x = RNG.random(1000)
    check(scale, x, 3.0)
    assert _fast_taken(scale, x, 3.0)


@pytest.mark.parametrize("k", [0, 1, 2, 5])
def test_stores_of_a_chunk_are_put_back_by_a_later_deoptimisation(k):
    check(bump_then_fail, RNG.random(300), k)
    assert _fast_taken(bump_then_fail, RNG.random(300), 5)


@pytest.mark.parametrize("k", [0, 1, 3])
def test_stores_along_rows_of_a_2d_array_are_put_back(k):
    check(bump_rows_then_fail, RNG.random((6, 40)), k)
    assert _fast_taken(bump_rows_then_fail, RNG.random((6, 40)), 3)


def test_a_check_inside_the_fast_copy_deoptimises_after_its_chunk_stores():
    v = RNG.random(500) + 0.5
    v[123] = 0.0
    check(divide_inside, RNG.random(500), v)
    assert _fast_taken(divide_inside, RNG.random(500), RNG.random(500) + 0.5)


@pytest.mark.parametrize("start", [0, 10, 2**63 - 2000, 2**63 - 700])
def test_a_counter_near_int64_max_overflows_as_python_does(start):
    x = RNG.random(500)
    assert check(count_points, x, start) == count_points(x, start)
    assert _fast_taken(count_points, x, 0)


def test_indices_outside_the_array_take_the_checked_loop():
    # x[i - 1] is x[-1] for i == 0 (wraps), and x[i + 1] runs off the end: Python's IndexError
    # after the same writes
    check(neighbours, RNG.random(50), np.zeros(49))
    check(neighbours, RNG.random(50), np.zeros(50))


def test_a_strided_view_takes_the_checked_loop():
    x = RNG.random(2000)[::2]
    check(scale, x, 2.0)


@pytest.mark.parametrize("v", [0.25, 7.0])
def test_return_and_break_from_a_fast_copy(v):
    x = RNG.random(3000)
    x[1717] = 0.25
    assert check(search, x, v) == search(x, v)
    check(first_big, x)
    assert _fast_taken(search, x, v)


def test_a_store_to_one_cell_is_logged_once_per_chunk():
    A = RNG.random((3, 4))
    check(fixed_cell, RNG.random(100), A, 2)
    check(fixed_cell, RNG.random(100), A, -1)  # (-1: the checked loop, which wraps)
    assert _fast_taken(fixed_cell, RNG.random(100), A, 2)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_numpy_overflow_in_a_fast_copy_warns_once_at_its_iteration():
    x = RNG.random(1000)
    x[600] = 1e300
    check(scale, x, 1e10)  # RuntimeWarning: overflow, from NumPy, as in plain Python
    assert _fast_taken(scale, x, 1e10)


def test_chunks_longer_than_one_and_a_size_not_a_multiple_of_it():
    x = RNG.random(fast.CHUNK * 2 + 17)
    check(scale, x, 0.5)
    check(count_points, x, 5)


def test_the_fast_copy_is_printed_with_the_nest():
    check(scale, RNG.random(10), 2.0)
    text, source = _nest_text(scale)
    assert "fast: if step == 1" in text and "# logged before: not here" in text
    assert "npd_log_block(" in source


def test_empty_fortran_and_read_only_arrays_reach_the_kernel_as_they_are():
    # (the wrapper passes a contiguous array's address by the buffer protocol, any other by
    # its array interface)
    check(scale, np.empty(0), 2.0)
    A = np.asfortranarray(RNG.random((4, 5)))
    check(bump_rows_then_fail, A, 7)
    ro = RNG.random(30)
    ro.flags.writeable = False
    check(scale, ro, 2.0)
    check(bump_then_fail, ro, 7)  # (ValueError: assignment destination is read-only)


def grow_then_fail(u, k):
    """Chunks of one window log blocks that start at the same element and grow: each one
    not covered by an earlier block is logged."""
    for t in range(4):
        for i in range(t * 10 + 10):
            u[i] += 1.0
        if t == k:
            u[u.shape[0]] = 0.0
    return u


@pytest.mark.parametrize("k", [1, 3])
def test_a_block_logged_again_in_a_window_only_when_no_earlier_one_covers_it(k):
    check(grow_then_fail, RNG.random(60), k)
    assert _fast_taken(grow_then_fail, RNG.random(60), 9)


def smooth_then_fail(u, A, k):
    """Array statements (1-d and 2-d views, ``+=``: applied twice if an undo missed one), then
    an IndexError in the same save window."""
    for t in range(3):
        u[1:-1] += 0.5 * u[2:]
        A[1:-1, 1:-1] += A[2:, 1:-1] * 0.25
        if t == k:
            u[u.shape[0]] = 0.0
    return u, A


@pytest.mark.parametrize("k", [0, 2, 5])
def test_array_statements_log_their_targets_as_blocks(k):
    check(smooth_then_fail, RNG.random(30), RNG.random((7, 9)), k)
    check(smooth_then_fail, RNG.random(30), np.asfortranarray(RNG.random((7, 9))), k)


def steps_then_fail(u, new, k):
    """A time loop whose rows (longer than a chunk) are logged as blocks once per save window
    (a step repeats them), then an IndexError at step k: every step of the window since its
    save point is undone (the blocks hold the oldest values) and Python runs them again."""
    n = u.shape[0]
    for t in range(300):
        for i in range(1, n - 1):
            new[i] = u[i] + 0.25 * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        for i in range(1, n - 1):
            u[i] = new[i]
        if t == k:
            u[n] = 0.0
    return u


@pytest.mark.parametrize("k", [0, 7, 255, 257, 299])
def test_a_long_save_window_of_repeated_blocks_is_undone_to_its_start(k):
    u = RNG.random(fast.CHUNK + 500)
    check(steps_then_fail, u, u.copy(), k)


def test_buffers_kept_from_an_earlier_call_hold_nothing_of_it():
    """A call reuses the undo log, scratch and batch buffers an earlier call of the library
    kept (no page faults per call): a deoptimisation undoes its own writes only."""
    u = RNG.random(fast.CHUNK * 2 + 3)
    compiled = dynamo.compile(steps_then_fail, backend="c")
    compiled(u.copy(), u.copy(), 1000)  # (a big log, kept)
    check(steps_then_fail, RNG.random(40), RNG.random(40), 3)
    check(smooth_then_fail, RNG.random(30), RNG.random((7, 9)), 2)


def bump_rows(u, k):
    for i in range(u.shape[0] // k):  # (k == 0: ZeroDivisionError before the loop starts)
        u[i] += 1.0
    return u


def test_a_kept_undo_log_starts_empty():
    """The second call deoptimises before its loop's first save point: its undo must not put
    back what the first call logged (the first call's array keeps its new values)."""
    compiled = dynamo.compile(bump_rows, backend="c")
    first = np.zeros(fast.CHUNK + 10)
    compiled(first, 1)
    assert (first == 1.0).all() and loop_kernels.kernels_for(bump_rows.__code__)
    with pytest.raises(ZeroDivisionError):
        compiled(np.zeros(5), 0)
    assert (first == 1.0).all()
