"""Cached guards do not keep the program's classes, functions and objects alive.

In: compiled functions whose guards name a class made by a call (``class C`` in a function
body), a method of one, or a callable object. Out: once the program drops them, they die as in
plain Python (their weak references die, their callbacks run) although the compiled versions
stay cached: a guard on such an object holds it weakly (`guards._mortal`, `_Weak`, the C checks
``OP_TYPE_IS_WEAK`` / ``OP_IS_WEAK``) and fails once it died, so a later call with a new class
compiles again instead of matching a dead one. Module-level classes and functions are held as
before. Found by CPython's test_weakref (WeakMethodTestCase.test_method_dead: the method of a
class made by the test stayed alive).
"""

from __future__ import annotations

import gc
import weakref

import numpy as np

import dynamo
from dynamo import guards


def make_class():
    class C:
        def __init__(self, scale):
            self.scale = scale

        def some_method(self):
            return 6

    return C


def scaled(obj, x):
    return x * obj.scale + 1


def test_a_class_made_by_a_call_dies_although_a_guard_named_it():
    x = np.arange(3.0)
    compiled = dynamo.compile(scaled)
    C = make_class()
    np.testing.assert_array_equal(compiled(C(2.0), x), scaled(C(2.0), x))
    assert "___type(obj) is ___C_ref()" in dynamo.cache_entries(scaled)[0].guards
    alive = weakref.ref(C)
    del C
    gc.collect()
    assert alive() is None
    assert dynamo.cache_entries(scaled)  # (the version is still cached)
    # A new class of the same name: the dead one's version does not match it.
    D = make_class()
    np.testing.assert_array_equal(compiled(D(3.0), x), scaled(D(3.0), x))
    assert len(dynamo.cache_entries(scaled)) == 2


def method_dead():
    C = make_class()
    o = C(1)
    r = weakref.WeakMethod(o.some_method)
    del C.some_method
    gc.collect()
    return r()


def test_a_weak_method_of_a_class_made_by_a_call_dies():
    # (CPython's test_weakref WeakMethodTestCase.test_method_dead)
    assert method_dead() is None
    with dynamo.optimize("eager"):
        assert method_dead() is None
        assert method_dead() is None  # (its versions are cached now)


class Scale:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return x * self.k


def applies(fn, x):
    return fn(x) + 1


def test_a_callable_object_is_held_weakly_and_a_module_level_class_strongly():
    assert guards._mortal(Scale(2.0)) and guards._mortal(make_class())
    assert not guards._mortal(Scale) and not guards._mortal(scaled) and not guards._mortal(np)
    assert not guards._mortal(int) and not guards._mortal(np.sin)
    x = np.arange(3.0)
    compiled = dynamo.compile(applies)
    fn = Scale(2.0)
    np.testing.assert_array_equal(compiled(fn, x), applies(fn, x))
    alive = weakref.ref(fn)
    del fn
    gc.collect()
    assert alive() is None
    np.testing.assert_array_equal(compiled(Scale(5.0), x), applies(Scale(5.0), x))


def test_a_dead_guard_says_so_in_the_failure_text():
    C = make_class()
    check_fn = guards.build_check_fn([guards.Guard(guards.LocalSource("x"), "TYPE_MATCH", C)],
                                     ["x"], "f")
    instance = C(1)
    assert check_fn(instance, {}, None)
    del C, instance
    gc.collect()
    assert not check_fn(make_class()(1), {}, None)
    assert "is gone" in check_fn.first_failure(1, {}, None)
