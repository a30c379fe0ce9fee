"""Strings and bytes the translator computes keep plain Python's identity.

In: functions with a graph that compute a string or bytes object from literals or arguments
(``a[:3] + b[3:]``, slicing, joining) and pass it on (returned, or live at a graph break).
Out: ``is`` between the result and an equal literal, and between the results of two calls,
gives what plain Python gives. A computed string used to become a constant of the transformed
code: one object for every call, and, since CPython interns a constant string that looks like
a name, the very object of an equal literal. An operation that returns one of its operands
(``s * 1``, ``s.strip()`` with nothing to strip) on a literal still returns that literal. (Not
on an argument: the result is then a constant equal to it, see docs/graph_breaks.md.)

Found by CPython's test_operator (``test_is`` / ``test_is_not``, C and Python versions).
"""

from __future__ import annotations

import operator
import sys

import numpy as np

import dynamo
from dynamo import graph_break


def joined_halves(x):
    a = b = "xyzpdq"
    c = a[:3] + b[3:]
    graph_break()  # (c is live here: the resume function gets it)
    return np.sin(x), operator.is_(a, c), a == c, c


def from_argument(x, s):
    literal = "name"
    return np.cos(x), s[:2] + s[2:], literal * 1, literal.strip(), s, literal


def from_bytes(x):
    data = b"abcdef"
    return x + 1.0, data[:3] + data[3:], data


def test_a_computed_string_is_not_an_equal_literal():
    x = np.linspace(0.0, 1.0, 4)
    plain = joined_halves(x)
    compiled = dynamo.compile(joined_halves, backend="eager")
    for _ in range(2):
        out = compiled(x)
        np.testing.assert_array_equal(out[0], plain[0])
        assert out[1:3] == plain[1:3] == (False, True)
        assert out[3] == "xyzpdq" and out[3] is not "xyzpdq"  # noqa: F632 (identity is the point)
    assert compiled(x)[3] is not compiled(x)[3]
    assert dynamo.debug.cache_entries(joined_halves)  # (compiled, not run in plain Python)


def test_each_call_makes_its_own_string_and_operands_stay_themselves():
    x = np.linspace(0.0, 1.0, 4)
    s = "".join(["na", "me"])  # (not interned)
    compiled = dynamo.compile(from_argument, backend="eager")
    first, second = compiled(x, s), compiled(x, s)
    assert dynamo.debug.cache_entries(from_argument)
    for out in (first, second):
        assert out[1] == s and out[1] is not s and out[4] is s
        # (as in Python: an operation that returns its operand returns the literal itself)
        assert out[2] is out[5] and out[3] is out[5]
    assert first[1] is not second[1]


def test_computed_bytes_are_new_objects_too():
    x = np.ones(3)
    compiled = dynamo.compile(from_bytes, backend="eager")
    first, second = compiled(x), compiled(x)
    assert dynamo.debug.cache_entries(from_bytes)
    for out in (first, second):
        assert out[1] == out[2] == b"abcdef"
        assert out[1] is not out[2]
    assert first[1] is not second[1]
    assert first[2] is second[2]  # (the literal: one object, as in Python)


COUNT = 0


def interns(x):
    s = "never interned before " + str(COUNT)
    return np.sin(x), sys.intern(s) is s  # (a break at the call: s is on the stack and a local)


def test_a_computed_string_is_one_object_within_a_call():
    # CPython's test_sys test_intern: the value passed to the call and the local are one object
    global COUNT
    x = np.ones(2)
    compiled = dynamo.compile(interns, backend="eager")
    for count in range(1, 4):
        COUNT = count
        assert compiled(x)[1] is True
