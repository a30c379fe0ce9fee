"""Object identity across a graph break: a tuple (a slice, an iterator, a dict view) is one
object, as in Python.

The translator models a tuple as a TupleVariable of its items; at a graph break it rebuilds the
objects the rest of the frame needs. It used to rebuild a tuple once per reference, so the value
passed to the call at the break and the one left in the local were two objects (``g(t) is t``
False, ``sys.getrefcount(t)`` counted a fresh tuple: CPython's test_coroutines test_for_2), and a
tuple constant of the code was a new object on every call. Slices, iterators and dict views
were rebuilt per reference the same way (two iterators: advancing one did not advance the
other). Oracle: the same function in plain
Python (run first), then compiled with the eager backend.
"""

from __future__ import annotations

import sys

import numpy as np

import dynamo


def passthrough(x):
    print("a call the translator does not inline", end="")  # (a graph break in the caller)
    return x


def constant_tuple_passed_at_a_break():
    t = (1, 2, 3)
    r = passthrough(t)
    return r is t


def constant_tuple_kept_across_a_print():
    t = (1.5, "x")
    u = t
    print(t, end="")
    return t is u


def tuple_built_from_locals(a, b):
    t = (a, b)
    r = passthrough(t)
    return r is t, r[0] is a


def tuple_of_arrays(x):
    y = x + 1
    t = (y, y * 2)
    r = passthrough(t)
    return r is t, r[0] is t[0]


def literal_returned_after_a_break():
    t = ("a", 1)
    passthrough(None)
    return t


def refcount_of_a_constant():
    tup = (1, 2, 3)
    before = sys.getrefcount(tup)
    passthrough(tup)
    return sys.getrefcount(tup) == before


def slice_passed_at_a_break():
    a = slice(1, 3)
    r = passthrough(a)
    return r is a


def iterator_passed_at_a_break():
    it = reversed([1, 2, 3])
    r = passthrough(it)
    next(r)
    return r is it, list(it)  # (one iterator: advancing one name advances the other)


def dict_view_passed_at_a_break():
    view = {"k": 1}.items()
    r = passthrough(view)
    return r is view


def _both(fn, *args):
    plain = fn(*args)
    compiled = dynamo.compile(fn, backend="eager")(*args)
    return plain, compiled


def test_a_tuple_is_the_same_object_on_both_sides_of_a_break(capsys):
    for fn in (constant_tuple_passed_at_a_break, constant_tuple_kept_across_a_print):
        plain, compiled = _both(fn)
        assert plain is True and compiled is True, fn.__name__


def test_other_objects_built_by_the_compiled_code_are_built_once(capsys):
    for fn in (slice_passed_at_a_break, iterator_passed_at_a_break,
               dict_view_passed_at_a_break):
        plain, compiled = _both(fn)
        assert plain == compiled, fn.__name__


def test_a_built_tuple_is_built_once():
    plain, compiled = _both(tuple_built_from_locals, [1], "s")
    assert plain == compiled == (True, True)
    plain, compiled = _both(tuple_of_arrays, np.arange(3.0))
    assert plain == compiled == (True, True)


def test_a_code_constant_is_the_same_object_on_every_call(capsys):
    compiled = dynamo.compile(literal_returned_after_a_break, backend="eager")
    first, second = compiled(), compiled()
    assert first is second is literal_returned_after_a_break()


def test_refcounts_of_a_constant_tuple_balance(capsys):
    plain, compiled = _both(refcount_of_a_constant)
    assert plain is True and compiled is True
