"""``hasattr()`` / ``getattr(obj, name, default)`` answer for the object as it is on each call.

In: compiled functions asking an object of a user's class, or a module, for an attribute it
lacks on the first call and has on a later one (and the other way round). Out: every call
answers as plain Python does. The translator used to bake "missing" into the compiled code with
only a guard on the object's type, so an attribute added later was never seen (hasattr False
for ever).

Found by CPython's test_inspect (``test_signature_from_functionlike_object``: a mock of
``inspect.ismethoddescriptor`` asks ``hasattr(obj, '_builtinmock')`` before and after setting it).
"""

from __future__ import annotations

import inspect
import types

import numpy as np

import dynamo


class Thing:
    def __init__(self):
        self.value = 1.0


def has_flag(obj, x):
    return np.sin(x), hasattr(obj, "flag")


def flag_or_default(obj, x):
    return np.cos(x), getattr(obj, "flag", "default")


def asks_twice():
    """The shape of CPython's test: a class and a mock made in the function, the mock asked
    before and after the store."""
    class FunctionLike:
        def __init__(self, func):
            self.func = func

    original = inspect.ismethoddescriptor

    def is_marked(obj):
        if hasattr(obj, "_mock"):
            return True
        return original(obj)  # (not traced: this frame is compiled on its own, with a break)

    out = []
    thing = FunctionLike(len)
    out.append(is_marked(thing))
    thing._mock = True
    out.append(is_marked(thing))
    return out


def test_an_attribute_added_later_is_seen_by_hasattr():
    x = np.linspace(0.0, 1.0, 3)
    compiled = dynamo.compile(has_flag, backend="eager")
    thing = Thing()
    assert compiled(thing, x)[1] is False
    thing.flag = True
    assert compiled(thing, x)[1] is True
    assert compiled(Thing(), x)[1] is False
    del thing.flag
    assert compiled(thing, x)[1] is False


def test_an_attribute_added_later_is_seen_by_getattr_with_a_default():
    x = np.linspace(0.0, 1.0, 3)
    compiled = dynamo.compile(flag_or_default, backend="eager")
    thing = Thing()
    assert compiled(thing, x)[1] == "default"
    thing.flag = "set"
    assert compiled(thing, x)[1] == "set"
    del thing.flag
    assert compiled(thing, x)[1] == "default"


def test_a_module_attribute_added_later_is_seen():
    x = np.linspace(0.0, 1.0, 3)
    module = types.ModuleType("settings")
    compiled = dynamo.compile(has_flag, backend="eager")
    assert compiled(module, x)[1] is False
    module.flag = 1
    assert compiled(module, x)[1] is True


def test_a_nested_function_asked_before_and_after_a_store():
    plain = asks_twice()
    assert plain == [False, True]
    with dynamo.optimize("eager"):
        for _ in range(3):
            assert asks_twice() == plain


class Slotted:
    __slots__ = ("flag",)


class Later:
    pass


def test_an_empty_slot_filled_later_and_a_class_attribute_added_later():
    x = np.linspace(0.0, 1.0, 3)
    compiled = dynamo.compile(has_flag, backend="eager")
    slotted = Slotted()
    assert compiled(slotted, x)[1] is False
    assert compiled(slotted, x)[1] is False
    assert len(dynamo.debug.cache_entries(has_flag)) == 1  # (the empty slot's guard holds)
    slotted.flag = 0
    assert compiled(slotted, x)[1] is True
    later = Later()
    assert compiled(later, x)[1] is False
    Later.flag = "on the class"
    try:
        assert compiled(later, x)[1] is True
        assert compiled(Later(), x)[1] is True
    finally:
        del Later.flag
    assert compiled(later, x)[1] is False


def test_the_absence_guard_keeps_one_version():
    x = np.linspace(0.0, 1.0, 3)
    compiled = dynamo.compile(has_flag, backend="eager")
    for _ in range(5):
        assert compiled(Thing(), x)[1] is False
    (entry,) = dynamo.debug.cache_entries(has_flag)
    assert "NO_ATTRIBUTE" in entry.guards and "___lacks_attribute(obj, 'flag')" in entry.guards
