"""Code that made the compiler fail with an internal error compiles, or falls back quietly.

In: small functions built after what CPython's own tests do (found by running the
`EXTRA_MODULES` of tests/cpython under capture with internal errors counted): very long ints,
weakref proxies whose referent died, ``enumerate`` called by keyword, a metaclass that defines
``__dict__``, builtins the program removed or replaced, attribute writes of an object with
``__slots__``. Out: with
``dynamo.config.suppress_errors = False`` and warnings turned into errors, each runs compiled
(or in plain Python where npdynamo cannot help) with plain Python's result or exception; none
is an `InternalError` or an "internal error" warning.
"""

from __future__ import annotations

import builtins
import sys
import warnings
import weakref

import numpy as np
import pytest

import dynamo


def strict():
    """suppress_errors=False (an internal error raises) and warnings as errors."""
    class Strict:
        def __enter__(self):
            self.patch = dynamo.config.patch(suppress_errors=False)
            self.patch.__enter__()
            self.warnings = warnings.catch_warnings()
            self.warnings.__enter__()
            warnings.simplefilter("error")

        def __exit__(self, *exc):
            self.warnings.__exit__(*exc)
            self.patch.__exit__(*exc)

    return Strict()


@dynamo.disable
def opaque(value):
    return value


def adds_one(x, n):
    return x * 2, n + 1


@pytest.mark.skipif(not hasattr(sys, "set_int_max_str_digits"), reason="3.11+ digit limit")
def test_a_very_long_int_argument_is_compared_by_value_not_by_its_repr():
    # (CPython's test_int IntStrDigitLimitsTests: repr() of such an int raises ValueError)
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        big = 10 ** 2000
        compiled = dynamo.compile(adds_one)
        with strict():
            for n in (big, big + 1, 5, big + 2):
                y, m = compiled(np.ones(2), n)
                assert m == n + 1
    finally:
        sys.set_int_max_str_digits(old)


class Referent:
    pass


def keeps_a_proxy(x, p):
    y = x * 2
    opaque(y)  # (a graph break: p is passed to the resume function)
    return y + 1, p


def drops_a_proxy(x, p):
    y = x * 2
    opaque(y)
    p = None  # (dropping it: the compiler asks whether that may run code)
    return y + 1, p


@pytest.mark.parametrize("fn", [keeps_a_proxy, drops_a_proxy])
def test_a_dead_weakref_proxy_is_passed_along_untouched(fn):
    # (CPython's test_weakref test_proxy_ref, test_set test_weakref: reading anything of a
    # proxy whose referent died raises ReferenceError, inside the compiler too)
    obj = Referent()
    p = weakref.proxy(obj)
    del obj
    compiled = dynamo.compile(fn)
    with strict():
        y, q = compiled(np.ones(2), p)
    np.testing.assert_array_equal(y, np.full(2, 3.0))
    assert type(q) is type(fn(np.ones(2), p)[1])


def enumerates(x, mode):
    if mode == 0:
        pairs = list(enumerate(iterable=[1, 2], start=5))
    elif mode == 1:
        pairs = list(enumerate([1, 2], start=-1))
    elif mode == 2:
        pairs = list(enumerate())
    else:
        pairs = list(enumerate([1], begin=3))
    return x * len(pairs), pairs


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_enumerate_by_keyword_or_with_bad_arguments_is_not_an_internal_error(mode):
    # (CPython's test_enumerate test_kwargs: args[0] of no positional arguments)
    x = np.ones(2)
    try:
        expected = ("ok", enumerates(x, mode))
    except TypeError as exc:
        expected = ("raised", str(exc))
    compiled = dynamo.compile(enumerates)
    with strict():
        try:
            got = ("ok", compiled(x, mode))
        except TypeError as exc:
            got = ("raised", str(exc))
    assert got[0] == expected[0]
    if got[0] == "ok":
        np.testing.assert_array_equal(got[1][0], expected[1][0])
        assert got[1][1] == expected[1][1]
    else:
        assert got == expected


class DictIsAProperty(type):
    __dict__ = property(lambda cls: None)  # (CPython's test_inspect test_metaclass_dict_...)


class Thing(metaclass=DictIsAProperty):
    def __init__(self, x):
        self.x = x * 2


def makes_a_thing(x):
    return Thing(x).x + 1


def test_an_attribute_write_of_a_class_whose_metaclass_defines_dict_compiles():
    x = np.arange(3.0)
    compiled = dynamo.compile(makes_a_thing)
    with strict():
        np.testing.assert_array_equal(compiled(x), makes_a_thing(x))


def while_changed(monkeypatch, change, call):
    """`call()` under `strict` while `change` is applied to the builtins; the builtins are back
    before anything is reported (pytest's own reporting needs them)."""
    change()
    try:
        with strict():
            return ("ok", call())
    except BaseException as exc:  # noqa: BLE001 (reported once the builtins are back)
        failure = f"{type(exc).__name__}: {exc}"
    finally:
        monkeypatch.undo()
    raise AssertionError(failure)


def iterates(x, items):
    total = x
    for v in items:
        opaque(v)
        total = total + v
    return total


def test_a_compile_while_the_program_removed_a_builtin_falls_back_quietly(monkeypatch):
    # (CPython's test_iter test_reduce_mutating_builtins_iter deletes builtins.iter; the
    # compiler's own code and the bytecode package call iter())
    x = np.ones(2)
    expected = iterates(x, [1.0, 2.0])
    compiled = dynamo.compile(iterates)
    got = while_changed(monkeypatch, lambda: monkeypatch.delattr(builtins, "iter"),
                        lambda: compiled(x, [1.0, 2.0]))
    np.testing.assert_array_equal(got[1], expected)
    np.testing.assert_array_equal(compiled(x, [1.0, 2.0]), expected)  # (compiles now)
    assert dynamo.cache_entries(iterates)


def test_a_compile_while_the_program_replaced_a_builtin_falls_back_quietly(monkeypatch):
    # (CPython's test_functools: builtins.len = lru_cache(...)(len), unhashable lists)
    real_len = builtins.len

    def picky_len(obj):
        if type(obj) is list:
            raise TypeError("unhashable type: 'list'")
        return real_len(obj)

    x = np.ones(2)
    expected = iterates(x, (1.0, 2.0))
    compiled = dynamo.compile(iterates)
    got = while_changed(monkeypatch, lambda: monkeypatch.setattr(builtins, "len", picky_len),
                        lambda: compiled(x, (1.0, 2.0)))
    np.testing.assert_array_equal(got[1], expected)


# An object with __slots__ ---------------------------------------------------------------------


def _break():
    print(end="")


class Slotted:
    __slots__ = ["a", "b"]

    def __init__(self):
        self.a = 1
        self.b = 2
        _break()


def makes_a_slotted_object():
    s = Slotted()
    return s.a, s.b


def test_writing_attributes_of_an_object_with_slots_compiles():
    # (the check for a finalizer of the attribute's old value read ``__dict__``, which an
    # object with __slots__ has not: an internal error, CPython's test_descr test_slots)
    with dynamo.config.patch(suppress_errors=False):
        with dynamo.optimize("eager"):
            assert makes_a_slotted_object() == (1, 2)
