"""The Python written around NumPy calls, traced instead of breaking the graph: ``type(x)`` and
``x.__class__`` of arrays, NumPy scalars and constants, identity tests against classes and
ufuncs, and the NumPy functions that only look at a value's kind and shape (``np.ndim``,
``np.shape``, ``np.size``, ``np.isscalar``, ``np.iterable``). Each program is one graph with no
break, and returns what plain Python returns (value, type, dtype)."""

from __future__ import annotations

import errno

import numpy as np
import pytest

import dynamo

SUBTRACT = np.subtract


def by_type(x):
    s = x.sum()
    out = x + 1.0 if type(x) is np.ndarray else x
    if type(s) is np.float64:
        out = out * 2.0
    if type(3) is int and type(x) is not list:
        out = out - 1.0
    return out


def by_class(x):
    return x * 2.0 if x.__class__ is np.ndarray else x


def by_ufunc_identity(x, fn=np.subtract):
    if fn is np.subtract:
        return fn(x, 1.0)
    return np.add(x, 1.0)


def by_global_ufunc(x):
    return x * 3.0 if SUBTRACT is np.subtract and SUBTRACT is not np.add else x


def facts(x):
    s = x.sum()
    z = x.sum(keepdims=True).reshape(())
    return (x + np.ndim(x) + np.size(x) + np.shape(x)[0] + np.isscalar(x) + np.iterable(x)
            + np.isscalar(s) + np.iterable(z) + np.ndim(z) + np.isscalar(2.5)
            + np.ndim(3) + np.iterable("ab") + np.size(4.0) + len(np.shape(1.5)))


PROGRAMS = [by_type, by_class, by_ufunc_identity, by_global_ufunc, facts]


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend", ["eager", "c"])
def test_one_graph_and_plain_results(fn, backend):
    x = np.arange(6.0).reshape(3, 2)
    want = fn(x.copy())
    dynamo.reset()
    out = dynamo.explain(fn, backend=backend)(x.copy())
    assert (out.graph_count, out.graph_break_count) == (1, 0), out.break_reasons
    got = dynamo.compile(fn, backend=backend)(x.copy())
    assert type(got) is type(want) and got.dtype == want.dtype
    assert np.array_equal(got, want)


def test_another_type_takes_another_version():
    """type(x) is a constant because the type is guarded: a NumPy scalar argument in place of
    an array compiles again and gives plain Python's answer."""
    dynamo.reset()
    f = dynamo.compile(by_type)
    x = np.arange(3.0)
    assert np.array_equal(f(x), by_type(x))
    s = np.float64(2.5)
    assert f(s) == by_type(s) and type(f(s)) is type(by_type(s))


def test_a_ufunc_default_that_is_another_ufunc():
    dynamo.reset()
    f = dynamo.compile(by_ufunc_identity)
    x = np.arange(3.0)
    assert np.array_equal(f(x, np.multiply), by_ufunc_identity(x, np.multiply))
    assert np.array_equal(f(x), by_ufunc_identity(x))


def mapped(x):
    doubled = sum(map(lambda v: v * 2.0, [x, x + 1.0]))
    pairs = list(map(np.add, [x, x], [x, 1.0]))
    rows = list(map(np.sum, x))  # (rows read when reached)
    first = next(map(np.max, x))
    none = next(filter(lambda k: k > 5, [1, 2]), 0)
    return doubled + pairs[0] + pairs[1] + rows[0] + rows[-1] + first + none


def filtered(x):
    kept = [v for v in filter(lambda v: v is not None, [x, None, x * 2.0])]
    big = list(filter(lambda k: k > 1, [1, 2, 3]))
    truthy = list(filter(None, [1, 0, None, 2]))
    return kept[0] + kept[1] + len(big) + len(truthy)


@pytest.mark.parametrize("fn", [mapped, filtered], ids=lambda f: f.__name__)
def test_map_and_filter_in_one_graph(fn):
    x = np.arange(6.0).reshape(3, 2)
    dynamo.reset()
    out = dynamo.explain(fn)(x.copy())
    assert (out.graph_count, out.graph_break_count) == (1, 0), out.break_reasons
    assert np.array_equal(dynamo.compile(fn)(x.copy()), fn(x.copy()))


def map_across_a_break(x):
    it = map(lambda v: v + 1.0, [x, x * 2.0, x * 3.0])
    a = next(it)
    print("break")  # (the graph ends with `it` half used: rebuilt for the rest of the frame)
    b = next(it)
    return a + b + sum(it)


def filter_on_data(x):
    return sum(filter(lambda v: v.sum() > 0, [x, -x, x * 2.0]))


@pytest.mark.parametrize("fn", [map_across_a_break, filter_on_data], ids=lambda f: f.__name__)
def test_map_and_filter_across_breaks(fn, capsys):
    x = np.arange(4.0)
    want = fn(x.copy())
    dynamo.reset()
    got = dynamo.compile(fn)(x.copy())
    assert np.array_equal(got, want) and got.dtype == want.dtype
    assert capsys.readouterr().out.count("break") == 2 * (fn is map_across_a_break)


def errno_type(x):
    e = OSError(errno.EEXIST, "exists")
    return x + (type(e) is FileExistsError) + isinstance(e, FileExistsError)


def test_the_type_of_an_exception_its_class_picks_is_left_to_python():
    """Regression: ``OSError(errno.EEXIST, ...)`` is a FileExistsError (OSError's __new__
    picks it); ``type(e)`` read as the class called gave OSError (CPython's
    test_exception_hierarchy under capture), and ``isinstance`` the same way."""
    x = np.arange(3.0)
    dynamo.reset()
    assert np.array_equal(dynamo.compile(errno_type)(x), errno_type(x))


def sets_of_constants(x, names=("a", "b", "a")):
    seen = set(names)
    seen.add("c")
    other = set([1, 2, 2])
    return x + len(seen) + len(other) + ("b" in seen) + (2 in other) + len(set())


def frozenset_of_a_frozenset(x, fs=frozenset({1, 2})):
    return x + (frozenset(fs) is fs)  # (one object: CPython's test_set checks it)


def set_of_arrays(x):
    return len(set([x, x]))  # (arrays are unhashable: Python raises TypeError)


def test_sets_of_constants_in_one_graph():
    x = np.arange(3.0)
    dynamo.reset()
    out = dynamo.explain(sets_of_constants)(x)
    assert (out.graph_count, out.graph_break_count) == (1, 0), out.break_reasons
    assert np.array_equal(dynamo.compile(sets_of_constants)(x), sets_of_constants(x))
    assert np.array_equal(dynamo.compile(frozenset_of_a_frozenset)(x),
                          frozenset_of_a_frozenset(x))
    for fn in (set_of_arrays, dynamo.compile(set_of_arrays)):
        with pytest.raises(TypeError, match="unhashable"):
            fn(x)
