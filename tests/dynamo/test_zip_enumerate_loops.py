"""Loops over ``zip``/``enumerate`` whose body breaks the graph run with the body as a function.

Such a loop runs in the transformed code, which needs the loop's iterator on its stack: the zip
or enumerate object the translator made is rebuilt over its sources, each where it was
(`builtin_rules._LazyIterator.reconstruct`; an array's row iterator is the sequence iterator at its
row, `variables.ndarray.ArrayRowIterator.reconstruct`). They ran uncompiled before ("cannot
rebuild a zip iterator"). Also: ``enumerate``/``zip`` over an array the loop writes to read
each row when they reach it. Plain Python is the oracle.
"""

from __future__ import annotations

import numpy as np
import pytest

import dynamo


def run_both(fn, make):
    plain = fn(*make())
    got = dynamo.compile(fn, backend="eager")(*make())
    return plain, got


def zip_of_arrays(X, Y, x):
    acc = x * 0
    for a, b in zip(X, Y):
        acc = acc + a * b
        print(end="")
    return acc


def enumerate_rows(X, x):
    acc = x * 0
    for i, row in enumerate(X, 3):
        acc = acc + row * 2
        print(end="")
    return acc


def enumerate_rows_index_after(X, x):
    acc = x * 0
    for i, row in enumerate(X, 3):
        acc = acc + row * 2
        print(end="")
    return acc, i


def zip_of_lists_appended(xs, ys, x):
    acc = x * 0
    for a, b in zip(xs, ys):
        acc = acc + a * b
        if len(xs) < 6:
            xs.append(a + 1)  # (the zip reads the list live: it reaches this item)
            ys.append(b)
        print(end="")
    return acc, len(xs)


def zip_started_before_the_loop(X, x):
    z = zip(X, X[::-1])
    first = next(z)
    acc = first[0] * first[1] + x
    for a, b in z:
        acc = acc + a - b
        print(end="")
    return acc


def zip_partly_consumed(X, x):
    z = zip(X, X + 1)
    acc = x
    for a, b in z:  # (traced: takes one pair)
        acc = acc + a * b
        break
    for a, b in z:  # (runs with its body as a function, over the same zip)
        acc = acc - b
        print(end="")
    return acc


def enumerate_partly_consumed(X, x):
    e = enumerate(X, 10)
    acc = x
    for i, a in e:
        acc = acc + a * i
        break
    for i, a in e:
        acc = acc - a
        print(end="")
    return acc, next(enumerate(X, i))[0]


def one_iterator_twice(X, x):
    it = iter(X)
    acc = x * 0
    for a, b in zip(it, it):
        acc = acc + a * b
        print(end="")
    return acc


CASES = {
    "zip_of_arrays": (zip_of_arrays, lambda: (np.arange(12.).reshape(4, 3),
                                              np.arange(12.).reshape(4, 3) + 1, np.ones(3))),
    "enumerate_rows": (enumerate_rows, lambda: (np.arange(12.).reshape(4, 3), np.ones(3))),
    "enumerate_rows_index_after": (enumerate_rows_index_after,
                                   lambda: (np.arange(12.).reshape(4, 3), np.ones(3))),
    "zip_of_lists_appended": (zip_of_lists_appended,
                              lambda: ([np.ones(2), np.ones(2) * 2], [np.ones(2) * 3,
                                                                      np.ones(2) * 4],
                                       np.zeros(2))),
    "zip_started_before_the_loop": (zip_started_before_the_loop,
                                    lambda: (np.arange(12.).reshape(4, 3), np.ones(3))),
    "zip_partly_consumed": (zip_partly_consumed,
                            lambda: (np.arange(12.).reshape(4, 3), np.ones(3))),
    "enumerate_partly_consumed": (enumerate_partly_consumed,
                                  lambda: (np.arange(12.).reshape(4, 3), np.ones(3))),
    "one_iterator_twice": (one_iterator_twice,
                           lambda: (np.arange(18.).reshape(6, 3), np.ones(3))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_results_as_plain_python(name):
    fn, make = CASES[name]
    plain, got = run_both(fn, make)
    if isinstance(plain, tuple):
        np.testing.assert_array_equal(got[0], plain[0])
        assert got[1:] == plain[1:]
    else:
        np.testing.assert_array_equal(got, plain)


@pytest.mark.parametrize("name", ["zip_of_arrays", "zip_partly_consumed"])
def test_the_loop_runs_with_its_body_compiled(name):
    fn, make = CASES[name]
    out = dynamo.explain(fn)(*make())
    assert not out.skipped_frames, out.skipped_frames
    assert out.graph_count >= 2  # (before the loop, and the body's)
    assert any("loop body" in reason for reason in out.break_reasons), out.break_reasons


def test_an_exhausted_zip_is_not_rebuilt():
    def exhausted(X, x):
        z = zip(X, X[:1])
        for pair in z:
            x = x + pair[0]
        print(end="")  # (a break with the exhausted zip alive)
        return x, list(z)

    X = np.arange(6.).reshape(2, 3)
    plain = exhausted(X, np.ones(3))
    got = dynamo.compile(exhausted, backend="eager")(X, np.ones(3))
    np.testing.assert_array_equal(got[0], plain[0])
    assert got[1] == plain[1] == []


# Rows of an array the loop writes to ------------------------------------------------------------


def enumerate_rows_of_a_mutated_array(x, y):
    for i, r in enumerate(x):
        x[-1] = (y * r)[0].sum() + i
    return x * 1


def zip_rows_of_a_mutated_array(x, y):
    for r, s in zip(x, y):
        x[-1] = r + s
    return x * 1


@pytest.mark.parametrize("fn", [enumerate_rows_of_a_mutated_array, zip_rows_of_a_mutated_array])
def test_enumerate_and_zip_read_each_row_when_reached(check, fn):
    check(fn, np.array([-1.62, 0.53, -0.17, 1.6]), np.array([1.18, 0.53, 1.88, -0.35]), graphs=1)
