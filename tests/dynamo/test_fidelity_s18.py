"""What the compiled code rebuilds at a graph break is what Python had (found by running more
of CPython's test suite under capture: test_dict, test_enumerate, test_list).

- Attribute writes replayed after a graph run in the order they were made: an object's
  ``__dict__`` lists them as in Python (they were replayed last-first: ``['y', 'x']``).
- An iterator made while tracing (``reversed(list)``, ``reversed(range(n))``) is rebuilt with
  its own type (it was rebuilt as a tuple iterator: ``type(reversed(x))`` changed); one that
  cannot be rebuilt with its type makes the frame fall back rather than change it.
Oracle: the same function in plain Python.
"""

from __future__ import annotations

import numpy as np

import dynamo


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y


def _break():
    print(end="")


def attribute_order_after_a_break():
    p = Point(1, 2)
    _break()
    return list(p.__dict__), list(reversed(p.__dict__))


def attributes_set_on_an_argument(p):
    p.b = 1
    p.a = 2
    _break()
    return list(p.__dict__)


def reversed_list_iterator():
    it = reversed([1, 2, 3])
    _break()
    return type(it), list(it)


def range_iterator_after_a_step():
    it = reversed(range(5))
    next(it)
    _break()
    return type(it), list(it)


def iter_of_a_range():
    it = iter(range(2, 11, 3))
    _break()
    return type(it), list(it)


def reversed_dict_keys():
    it = reversed({"a": 1, "b": 2})
    _break()
    return type(it), list(it)


def loop_over_reversed_range(x):
    for i in reversed(range(3)):
        x = x + i
        _break()
    return x


def _same(fn, *args):
    make = (lambda: [Point(0, 0)]) if fn is attributes_set_on_an_argument else (lambda: args)
    plain = fn(*make())
    compiled = dynamo.compile(fn, backend="eager")(*make())
    return plain, compiled


def test_attribute_writes_are_replayed_in_the_order_they_were_made():
    plain, compiled = _same(attribute_order_after_a_break)
    assert plain == compiled == (["x", "y"], ["y", "x"])
    plain, compiled = _same(attributes_set_on_an_argument)
    assert plain == compiled == ["x", "y", "b", "a"]


def test_an_iterator_keeps_its_type_across_a_break():
    for fn in (reversed_list_iterator, range_iterator_after_a_step, iter_of_a_range,
               reversed_dict_keys):
        plain, compiled = _same(fn)
        assert plain == compiled, fn.__name__


def test_a_loop_over_reversed_range_still_compiles_around_its_breaks():
    x = np.ones(3)
    explained = dynamo.explain(loop_over_reversed_range)(x)
    assert explained.graph_count >= 1
    np.testing.assert_array_equal(dynamo.compile(loop_over_reversed_range)(x),
                                  loop_over_reversed_range(x))


def test_a_builtin_the_program_replaced_does_not_break_the_compiler():
    import builtins
    import warnings

    real_len = builtins.len

    def picky_len(obj):  # (test_functools: ``builtins.len = lru_cache(4)(len)``)
        if isinstance(obj, list):
            raise TypeError("unhashable type: 'list'")
        return real_len(obj)

    x = np.arange(4.0)
    compiled = dynamo.compile(loop_over_reversed_range)
    builtins.len = picky_len
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (npdynamo's internal-error warning)
            got = compiled(x)
    finally:
        builtins.len = real_len
    np.testing.assert_array_equal(got, loop_over_reversed_range(x))


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


def rebinds_a_lambda_with_defaults(x):
    g = lambda v, k=2, *, m=3: v * k + m  # noqa: E731
    x = g(x)
    g = None  # (dropping it looks at its defaults: trackers, not Python tuples)
    return x


def test_dropping_a_function_with_defaults_compiles():
    x = np.arange(3.0)
    with dynamo.config.patch(suppress_errors=False):
        out = dynamo.explain(rebinds_a_lambda_with_defaults)(x)
    np.testing.assert_array_equal(out.result, rebinds_a_lambda_with_defaults(x))
    assert out.graph_count == 1 and out.graph_break_count == 0


HELD: list = []


def keep_fn(*args):
    pass


def pops_a_module_function_from_an_outside_list(x, fn):
    HELD.append(fn)
    y = np.sin(x) * 2
    HELD.pop()  # (dropping a function the module also holds: nothing runs when it goes)
    return y


def test_popping_a_user_function_from_an_outside_list_is_not_an_internal_error():
    # (the drop check read `.value` of a UserFunctionVariable, which keeps `.fn`: an internal
    # error, found in CPython's test_generators test_handle_frame_object_in_creation)
    x = np.arange(3.0)
    HELD.clear()
    with dynamo.config.patch(suppress_errors=False):
        out = dynamo.explain(pops_a_module_function_from_an_outside_list)(x, keep_fn)
    np.testing.assert_array_equal(out.result, np.sin(x) * 2)
    assert HELD == []
    assert out.graph_count >= 1
