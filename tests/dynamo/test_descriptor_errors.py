"""A slot or getset descriptor whose read raises something other than AttributeError.

A class can hold another class's slot (``shadowing = Class.slot``); reading it through an object
of the wrong class raises TypeError in C. The translator called the descriptor while tracing
and the TypeError escaped as an internal error (a RuntimeWarning, the frame in plain Python;
CPython's test_opcache test_load_shadowing_slot_should_raise_type_error). Now the read is a graph
break: it runs in plain Python and raises there. Plain Python is the oracle.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dynamo


class Class:
    __slots__ = ("slot",)


class Sneaky:
    __slots__ = ("shadowed",)
    shadowing = Class.slot


class Borrower:
    borrowed = Class.slot


def reads(o, name, x):
    y = x + 1
    try:
        getattr(o, "__class__")
        value = o.shadowing if name == "shadowing" else o.borrowed
    except TypeError as exc:
        return y, str(exc)
    return y, value


@pytest.mark.parametrize("obj,name", [(Sneaky(), "shadowing"), (Borrower(), "borrowed")])
def test_a_foreign_slot_raises_the_users_type_error(obj, name):
    expected = reads(obj, name, np.arange(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (an internal error is a RuntimeWarning)
        got = dynamo.compile(reads)(obj, name, np.arange(3))
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1] == expected[1]
