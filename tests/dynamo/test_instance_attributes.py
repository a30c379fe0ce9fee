"""Reading a user object's attribute in compiled code must not make the object's ``__dict__``.

In: small functions compiled with a counting backend that read attributes of, call methods of,
and read class attributes through objects of Python classes. Out: the results plain Python
gives (values, AttributeError, properties, slots, shadowing, methods) and, on 3.11+, objects
still without a dict object when plain Python doing the same reads leaves them without one.

Why: 3.11+ keeps an object's attributes in place (inline values) until ``obj.__dict__`` is
asked for; making the dict is visible to the program (the garbage collector's counts,
``sys.getsizeof(obj.__dict__)``, CPython's test_gc/test_sys/test_dict tracking tests), and
`UserObjectVariable.var_getattr` used to ask for it on every attribute read.

The oracle (`_has_dict`) reads the object's managed-dict word, which sits three pointers before
the object on 3.11-3.13 (NULL, or on 3.12 a tagged values pointer, until the dict is made);
`test_the_oracle_sees_what_plain_python_does` checks it against plain Python first.
"""

from __future__ import annotations

import ctypes
import functools
import sys
import warnings

import numpy as np
import pytest

import dynamo

INLINE_VALUES = sys.version_info >= (3, 11)
needs_inline_values = pytest.mark.skipif(
    not INLINE_VALUES, reason="3.10 has no dict-less objects (inline values are 3.11+)")


def _has_dict(obj) -> bool:
    """Whether `obj` (of a Python class without __slots__) has made its dict object."""
    word = ctypes.c_void_p.from_address(id(obj) - 3 * ctypes.sizeof(ctypes.c_void_p)).value or 0
    if sys.version_info[:2] == (3, 12):  # (values pointer tagged with 1, else the dict)
        return word != 0 and not word & 1
    return word != 0


class Base:
    scale = 3.0  # a class attribute read through the object

    def __init__(self) -> None:
        self.w = np.arange(4.0)
        self.b = 2.0

    def forward(self, x):
        return x * self.w + self.b

    @staticmethod
    def twice(x):
        return x * 2

    @classmethod
    def kind(cls):
        return cls.scale


def _compile(fn, backend):
    return dynamo.compile(fn, backend=backend)


# The oracle ------------------------------------------------------------------------------------


@needs_inline_values
def test_the_oracle_sees_what_plain_python_does():
    obj = Base()
    assert not _has_dict(obj)
    obj.w, obj.b, obj.scale, obj.forward, obj.twice, obj.kind  # plain reads make no dict
    hasattr(obj, "missing")
    assert not _has_dict(obj)
    obj.__dict__
    assert _has_dict(obj)


# No dict on 3.11+ ------------------------------------------------------------------------------


def _assert_no_dict_after(backend, fn, make_obj, *args):
    """`fn(obj, *args)` compiled (twice: trace, then cache hit) and plain, on fresh objects:
    the same result, a graph captured, and no dict made where plain Python makes none."""
    plain_obj = make_obj()
    expected = fn(plain_obj, *args)
    compiled = _compile(fn, backend)
    for _ in range(2):
        obj = make_obj()
        actual = compiled(obj, *args)
        np.testing.assert_array_equal(actual, expected)
        assert type(actual) is type(expected)
        if INLINE_VALUES:
            assert not _has_dict(plain_obj), "plain Python made the dict: the test is wrong"
            assert not _has_dict(obj), "compiled code made the object's __dict__"
    assert backend.count >= 1, "nothing was captured: the test does not exercise the translator"


@needs_inline_values
def test_reading_instance_attributes_makes_no_dict(backend):
    _assert_no_dict_after(backend, lambda obj, x: x * obj.w + obj.b, Base, np.ones(4))


@needs_inline_values
def test_calling_a_method_makes_no_dict(backend):
    _assert_no_dict_after(backend, lambda obj, x: obj.forward(x) + 1, Base, np.ones(4))


@needs_inline_values
def test_reading_a_class_attribute_through_the_object_makes_no_dict(backend):
    _assert_no_dict_after(backend, lambda obj, x: x * obj.scale, Base, np.ones(4))


@needs_inline_values
def test_static_and_class_methods_through_the_object_make_no_dict(backend):
    _assert_no_dict_after(backend, lambda obj, x: obj.twice(x) * obj.kind(), Base, np.ones(4))


@needs_inline_values
def test_a_missing_attribute_with_a_default_makes_no_dict(backend):
    def fn(obj, x):
        return x + getattr(obj, "missing", 1.0) + hasattr(obj, "absent")

    _assert_no_dict_after(backend, fn, Base, np.ones(4))


@needs_inline_values
def test_reading_writing_and_reading_again_makes_no_dict(backend):
    def fn(obj, x):
        y = x * obj.b
        obj.b = 5.0
        return y * obj.b

    _assert_no_dict_after(backend, fn, Base, np.ones(4))


# Results unchanged (all versions) --------------------------------------------------------------


def _same(backend, fn, make_obj, *args, captured=True):
    """Plain and compiled `fn(make_obj(), *args)` give the same result or the same exception,
    on two calls (trace, then cache hit), with no warning (npdynamo's internal errors warn)."""
    def run(f):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                return "ok", f(make_obj(), *args)
            except Exception as exc:
                return "raised", exc

    status, expected = run(fn)
    compiled = _compile(fn, backend)
    for _ in range(2):
        comp_status, actual = run(compiled)
        assert comp_status == status, (expected, actual)
        if status == "raised":
            assert type(actual) is type(expected) and str(actual) == str(expected)
        else:
            np.testing.assert_array_equal(actual, expected)
    if captured:
        assert backend.count >= 1
    return expected


def test_a_missing_attribute_raises_attribute_error(backend):
    exc = _same(backend, lambda obj, x: x + obj.missing, Base, np.ones(2), captured=False)
    assert isinstance(exc, AttributeError)


def test_a_class_attribute_shadowed_by_the_object(backend):
    def make():
        obj = Base()
        obj.scale = np.full(4, 7.0)  # (a plain class attribute of the same name)
        return obj

    _same(backend, lambda obj, x: x * obj.scale, make, np.ones(4))


def test_a_method_shadowed_by_an_attribute_of_the_object(backend):
    class Other:
        def forward(self, x):
            return x - 100

    def make():
        obj = Base()
        obj.forward = Other().forward  # (a bound method, as the class's binding would give)
        return obj

    assert _same(backend, lambda obj, x: obj.forward(x) * 1, make,
                 np.ones(2), captured=False)[0] == -99


def test_a_method_stored_on_the_object_bound_to_itself(backend):
    def make():
        obj = Base()
        obj.forward = obj.forward  # (the same function and self: only identity tells)
        return obj

    _same(backend, lambda obj, x: obj.forward(x) * 1, make, np.ones(4), captured=False)


def test_a_staticmethod_and_classmethod_shadowed_by_the_object(backend):
    def make():
        obj = Base()
        obj.twice = lambda x: x * 10
        obj.kind = lambda: 0.5
        return obj

    _same(backend, lambda obj, x: obj.twice(x) + obj.kind(), make, np.ones(2), captured=False)


class WithProperty:
    calls = 0

    def __init__(self) -> None:
        self.v = np.arange(3.0)

    @property
    def p(self):
        type(self).calls += 1
        return self.v * 2


def test_a_property_runs_as_often_as_in_plain_python(backend):
    WithProperty.calls = 0
    _same(backend, lambda obj, x: x + obj.p, WithProperty, np.ones(3), captured=False)
    assert WithProperty.calls == 3  # plain, then two compiled calls: the property runs each time


def test_a_property_wins_over_the_objects_own_attribute(backend):
    def make():
        obj = WithProperty()
        obj.__dict__["p"] = np.zeros(3)  # (shadowed: a data descriptor comes first)
        return obj

    WithProperty.calls = 0
    result = _same(backend, lambda obj, x: x + obj.p, make, np.ones(3), captured=False)
    np.testing.assert_array_equal(result, [1.0, 3.0, 5.0])
    assert WithProperty.calls == 3


class Slotted:
    __slots__ = ("a", "b")
    c = 4.0

    def __init__(self) -> None:
        self.a = np.arange(3.0)


def test_slots_set_and_class_attribute(backend):
    _same(backend, lambda obj, x: x + obj.a * obj.c, Slotted, np.ones(3))


def test_an_empty_slot_raises_attribute_error(backend):
    exc = _same(backend, lambda obj, x: x + obj.b, Slotted, np.ones(3), captured=False)
    assert isinstance(exc, AttributeError)


def test_an_empty_slot_with_a_default(backend):
    _same(backend, lambda obj, x: x + getattr(obj, "b", 2.0), Slotted, np.ones(3))


class WithGetattr:
    def __init__(self) -> None:
        self.a = 1.0

    def __getattr__(self, name):
        return 42.0


def test_getattr_fallback_and_own_attribute(backend):
    _same(backend, lambda obj, x: x + obj.a + obj.anything, WithGetattr, np.ones(2),
          captured=False)


def test_the_same_function_as_the_classs_staticmethod_on_the_object(backend):
    def make():
        obj = Base()
        obj.twice = Base.twice  # (reads the same either way)
        return obj

    _same(backend, lambda obj, x: obj.twice(x) + 1, make, np.ones(2))


class Cached:
    computed = 0

    def __init__(self) -> None:
        self.v = np.arange(3.0)

    @functools.cached_property
    def c(self):
        type(self).computed += 1
        return self.v + 10


@pytest.mark.parametrize("computed_before", [False, True])
def test_a_cached_property_gives_what_plain_python_gives(backend, computed_before):
    def make():
        obj = Cached()
        if computed_before:
            obj.c
        return obj

    Cached.computed = 0
    _same(backend, lambda obj, x: x + obj.c, make, np.ones(3), captured=False)
    assert Cached.computed == 3  # once per fresh object: plain, then two compiled calls


def test_a_method_shadowed_after_compiling_is_seen(backend):
    """A method read through the class is guarded as bound to this very object
    (`UserObjectVariable._guard_bound_here`): an attribute of that name the object gets later
    wins, as in plain Python, also a bound method of another object of the class."""
    obj, other = Base(), Base()
    compiled = _compile(lambda o, x: o.forward(x) * 1, backend)
    compiled(obj, np.ones(4))
    obj.forward = lambda x: x - 100
    np.testing.assert_array_equal(compiled(obj, np.ones(4)), obj.forward(np.ones(4)) * 1)
    other.w = np.arange(4.0) * 10  # (its forward gives other results than obj's)
    obj.forward = other.forward
    np.testing.assert_array_equal(compiled(obj, np.ones(4)), other.forward(np.ones(4)) * 1)
    del obj.forward
    np.testing.assert_array_equal(compiled(obj, np.ones(4)), Base.forward(obj, np.ones(4)) * 1)
