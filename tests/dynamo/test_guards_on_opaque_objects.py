"""Decisions about objects the translator does not model must be guarded.

An object of a type npdynamo has no tracker for (an exception, a traceback, a third-party
object) is an `OpaqueObjectVariable`: passed around and rebuilt, with no guard. Deciding
``x is None``, ``x.attr is None`` or ``hasattr(x, name)`` from it used to install nothing, so
the transformed code made for one object ran for the next call's None: ``[] if exc is None
else [...]`` took the else branch with ``exc = None`` (CPython's test_exception_group
NestedExceptionGroupSplitTest). Each function below has a graph break after the decision (a
function with no break is left to Python), and is called with every value of `VALUES` after
compiling on each of them; plain Python is the oracle.
"""

from __future__ import annotations

import pytest

import dynamo


class Plain:
    """A user class (modelled: guarded by type)."""


def _raised():
    try:
        raise ValueError(1)
    except ValueError as exc:
        return exc


VALUES = [ValueError(1), _raised(), KeyError(2), None, Plain(), print]


def _break():
    print(end="")


def is_none_branch(x):
    r = 0 if x is None else 1
    _break()
    return r


def is_none_value(x):
    r = x is None
    _break()
    return r


def attribute_is_none(x):
    r = 0 if x.__traceback__ is None else 1
    _break()
    return r


def has_attribute(x):
    r = hasattr(x, "args")
    _break()
    return r


def attribute_or_default(x):
    r = getattr(x, "args", "none")
    _break()
    return r


def _outcome(fn, value):
    try:
        return fn(value)
    except Exception as exc:  # noqa: BLE001 (the oracle raises too)
        return type(exc).__name__


@pytest.mark.parametrize("fn", [is_none_branch, is_none_value, attribute_is_none, has_attribute,
                                attribute_or_default])
@pytest.mark.parametrize("first", range(len(VALUES)))
def test_a_decision_about_an_untraced_object_holds_for_the_next_object(fn, first, capsys):
    order = VALUES[first:] + VALUES[:first]
    expected = [_outcome(fn, value) for value in order]
    compiled = dynamo.compile(fn, backend="eager")
    assert [_outcome(compiled, value) for value in order] == expected


class _Target:
    pass


def _equal(a, b):
    if not a == b:
        raise AssertionError(f"{a} != {b}")


def read_through_a_proxy(o, proxy):
    o.foo = 1
    _equal(proxy.foo, 1)
    o.foo = 2  # (replayed after the graph; the proxy must see it when it is read)
    _equal(proxy.foo, 2)
    return "seen"


def test_an_untraced_alias_sees_the_frames_changes():
    import weakref

    for fn in (read_through_a_proxy, dynamo.compile(read_through_a_proxy, backend="eager")):
        target = _Target()
        assert fn(target, weakref.proxy(target)) == "seen"
