"""Loop kernels over the elements of 1-d arrays (dynamo/loop_nest/items.py): ``for v in a``,
``enumerate(a)``, ``enumerate(a, 1)``, ``zip(a, b)``, ``enumerate(zip(a, b))``. Plain Python is
the oracle (support.loops.check: value, exception, arrays, warnings, twice, and whether a
kernel was built), including a deoptimisation in the middle of the outermost loop, after which
Python iterates on from the rebuilt rest (``a[n:]``, ``zip(a[n:], b[n:])``,
``enumerate(..., n + start)``)."""

from __future__ import annotations

import numpy as np
import pytest

import dynamo
from dynamo import loop_kernels
from support.loops import check, fresh_kernels  # noqa: F401 (a fixture)


def total(a):
    s = 0.0
    for v in a:
        s += v
    return s


def weighted(a):
    s = 0.0
    for i, v in enumerate(a):
        s += i * v
    return s


def dot(a, b):
    s = 0.0
    for u, v in zip(a, b):
        s += u * v
    return s


def where_greater(a, b, out):
    n = 0
    for i, (u, v) in enumerate(zip(a, b)):
        if u > v:
            out[n] = i
            n += 1
    return n


def scaled_ints(a, k):
    t = 0
    for v in a:
        t += int(v) * k  # past int64 somewhere: Python's big int, from the rebuilt rest
    return t


def histogram(x, counts):
    for v in x:
        counts[int(v * 10)] += 1  # IndexError for v >= 1
    return counts


def first_negative(a):
    for i, v in enumerate(a):
        if v < 0:
            return i
    return -1


def running(a):
    """Each step reads the element when it steps: the write to a[i + 1] is seen."""
    for i, v in enumerate(a):
        if i + 1 < a.shape[0]:
            a[i + 1] += v
    return a


def rebinds(a, b):
    s = 0.0
    for v in a:
        s += v
        a = b  # the loop goes on over the first array
    return s, a is b


def rows(A, out):
    for i in range(A.shape[0]):
        s = 0.0
        for j, v in enumerate(A[i, :]):  # (a slice: not an array local; the loop is refused)
            s += v * j
        out[i] = s
    return out


def inner_items(A, w, out):
    for i in range(A.shape[0]):
        s = 0.0
        for k, v in enumerate(w):
            s += A[i, k] * v
        out[i] = s
    return out


def zipped_rows(A, B):
    t = 0.0
    for u, v in zip(A, B):  # (rows zipped: not lowered)
        t += u[0] * v[0]
    return t


def from_one(a):
    s = 0.0
    for i, v in enumerate(a, 1):
        s += i * v
    return s


def zipped_from(a, b):
    s = 0.0
    for i, (u, v) in enumerate(zip(a, b), -3):
        s += i * (u - v)
    return s


def counted_from(a, k):
    t = 0
    for i, v in enumerate(a, 10):
        t += int(v) * k * i  # past int64 somewhere: Python counts on from the right i
    return t, i


def from_a_variable(a, n):
    s = 0.0
    for i, v in enumerate(a, n):
        s += i * v
    return s


def sum_items(a):
    s = 0.0
    for v in a:
        s += v
    return s


def calls_an_item_loop(a, n):
    t = 0.0
    for i in range(n):
        t += sum_items(a) * i  # (the callee's loop over a, inlined)
    return t


def row_sums(A, out):
    for i, row in enumerate(A):
        s = 0.0
        for j in range(row.shape[0]):
            s += row[j] * j
        out[i] = s + row.max()  # (not .sum(): NumPy 2.2 sums float64 in pieces)
    return out


def scale_rows(A, k):
    """Writes through each row (into A), then an IndexError at row k."""
    for i, row in enumerate(A):
        for j in range(len(row)):
            row[j] *= 2.0
        if i == k:
            row[len(row)] = 0.0
    return A


def int_rows(A, k):
    """A deoptimisation in the middle (past int64 at some row): Python goes on over A[n:]."""
    t = 0
    for row in A:
        t += int(row[0]) * k
    return t


def last_row(A):
    t = 0.0
    for row in A:
        t += row[0] + row[-1]
    return row, t


def planes(A3):
    """Rows of a 3-d array are 2-d; a row of one of them deoptimises (a row of a row)."""
    t = 0.0
    for plane in A3:
        t += plane[0, 0]
        for row in plane:
            t += row[1]
    return t


def three(a, b, c):
    s = 0.0
    for u, v, x in zip(a, b, c):
        s += u * v - x
    return s


RNG = np.random.default_rng(3)


@pytest.mark.parametrize("fn, args", [
    (total, (RNG.random(500),)),
    (total, (np.arange(300, dtype=np.int64),)),
    (weighted, (RNG.random(400),)),
    (dot, (RNG.random(300), RNG.random(200))),
    (dot, (RNG.random(10), RNG.integers(0, 9, 30))),
    (where_greater, (RNG.random(300), RNG.random(300), np.zeros(300))),
    (first_negative, (RNG.random(50) - 0.9,)),
    (first_negative, (RNG.random(50),)),
    (running, (RNG.random(100),)),
    (rebinds, (RNG.random(20), RNG.random(5))),
    (inner_items, (RNG.random((6, 8)), RNG.random(8), np.zeros(6))),
    (total, (np.zeros(0),)),
    (from_one, (RNG.random(300),)),
    (zipped_from, (RNG.random(30), RNG.random(40))),
    (calls_an_item_loop, (RNG.random(30), 20)),
    (row_sums, (RNG.random((40, 9)), np.zeros(40))),
    (row_sums, (np.asfortranarray(RNG.random((40, 9))), np.zeros(40))),
    (row_sums, (RNG.random((30, 0)), np.zeros(30))),
    (scale_rows, (RNG.random((20, 5)), 100)),
    (last_row, (RNG.random((6, 4)),)),
    (last_row, (RNG.random((0, 4)),)),
    (planes, (RNG.random((3, 4, 5)),)),
], ids=lambda x: getattr(x, "__name__", ""))
def test_loops_over_elements_run_as_kernels(fn, args):
    check(fn, *args)


@pytest.mark.parametrize("fn, args", [
    (scaled_ints, (np.arange(40.0), 2**59)),
    (scaled_ints, (np.arange(1000.0), 2**45)),  # (past the save point at the 512th element)
    (histogram, (np.concatenate([RNG.random(550), [1.5], RNG.random(49)]),
                 np.zeros(10, np.int64))),
    (histogram, (RNG.random(600), np.zeros(10, np.int64))),
    (histogram, (RNG.random(600) * 1.001, np.zeros(10, np.int64))),
    (where_greater, (RNG.random(300), RNG.random(300), np.zeros(100))),
    (counted_from, (np.arange(1000.0), 2**45)),
    (scale_rows, (RNG.random((20, 5)), 7)),
    (scale_rows, (RNG.random((600, 3)), 520)),  # (past a save point)
    (int_rows, (np.arange(2000.0).reshape(1000, 2), 2**44)),
], ids=lambda x: getattr(x, "__name__", ""))
def test_a_deoptimisation_continues_over_the_rest_of_the_elements(fn, args):
    check(fn, *args)


def test_a_row_comes_back_as_a_view_of_its_row():
    A = RNG.random((6, 4))
    row, _ = dynamo.compile(last_row, backend="c")(A)
    assert row.base is A and np.shares_memory(row, A) and np.array_equal(row, A[5])
    assert loop_kernels.kernels_for(last_row.__code__)


def test_what_is_not_lowered_stays_exact():
    check(three, RNG.random(9), RNG.random(9), RNG.random(9), kernel=False)
    check(rows, RNG.random((4, 5)), np.zeros(4), kernel=False)
    check(zipped_rows, RNG.random((4, 5)), RNG.random((4, 5)), kernel=False)
    check(from_a_variable, RNG.random(9), 4, kernel=False)


def row_by_index(A, out):
    for i in range(A.shape[0]):
        r = A[i]  # (a row: a view of A, as in Python)
        out[i] = r[0] * 2.0 + A[i][-1] + A[i].max() + len(A[i])
        A[i] += 1.0  # (in place through the row, then the row copied onto itself)
        A[i][1] = -r[1]
    return out, r


def test_a_row_taken_by_index_is_a_view():
    A = RNG.random((12, 5))
    check(row_by_index, A, np.zeros(12))
    check(row_by_index, np.asfortranarray(RNG.random((12, 5))), np.zeros(12))
    check(row_by_index, RNG.random((3, 1)), np.zeros(3))  # (IndexError at A[i][1])
