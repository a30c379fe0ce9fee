"""Side effects on objects from outside the frame (attributes, globals, lists, ``nonlocal``
cells): recorded while tracing, seen by later reads in the same trace, and replayed after the
graph, so the frame stays one graph. NumPy and plain Python are the oracle.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import dynamo


@dataclasses.dataclass
class State:
    scale: float = 2.0
    history: list = dataclasses.field(default_factory=list)
    last: object = None

    def __eq__(self, other):  # compared after the call by the oracle
        return (type(other) is State and self.scale == other.scale
                and repr(self.history) == repr(other.history) and repr(self.last) == repr(other.last))


def updates_an_object(x, state):
    state.scale = state.scale * 3
    y = x * state.scale  # reads the new value
    state.last = y
    state.history.append(y.sum())
    return y + 1


def test_attribute_writes_and_list_appends_are_replayed_without_a_break(check):
    check(updates_an_object, np.arange(3.0), State(), graphs=1)
    out = dynamo.explain(updates_an_object)(np.arange(3.0), State())
    assert out.graph_break_count == 0


COUNTER = 0
LAST = None


def writes_globals(x):
    global COUNTER, LAST
    COUNTER = COUNTER + 1
    LAST = x * COUNTER
    return LAST - 1


def test_global_writes_are_replayed_and_read_back(check):
    global COUNTER, LAST
    COUNTER, LAST = 0, None
    expected = writes_globals(np.arange(3.0))
    state = (COUNTER, LAST)
    COUNTER, LAST = 0, None
    actual = dynamo.compile(writes_globals)(np.arange(3.0))
    np.testing.assert_array_equal(actual, expected)
    assert COUNTER == state[0] and np.array_equal(LAST, state[1])


def fills(x, out):
    out.append(x)
    out.extend([x * 2, x * 3])
    out[0] = x - 1
    return len(out)


def test_a_list_from_outside_gets_its_new_items(check):
    check(fills, np.arange(3.0), [np.zeros(1)], graphs=1)


def make_counter():
    count = 0

    def step(x):
        nonlocal count
        count = count + 1
        return x * count

    return step


def test_nonlocal_writes_are_replayed():
    eager, compiled = make_counter(), dynamo.compile(make_counter())
    x = np.arange(3.0)
    for _ in range(3):
        np.testing.assert_array_equal(compiled(x), eager(x))


def write_then_break(x, state):
    state.scale = 5.0
    dynamo.graph_break()  # the write is replayed before the break runs
    return x * state.scale


def test_writes_are_replayed_before_a_graph_break(check):
    # nothing to compute before the break (no graph there): the replay alone, then `x * 5.0`
    check(write_then_break, np.arange(3.0), State(), graphs=1)


class Guarded:
    def __init__(self):
        object.__setattr__(self, "log", [])

    def __setattr__(self, name, value):
        self.log.append(name)
        object.__setattr__(self, name, value)

    def __eq__(self, other):
        return type(other) is Guarded and self.log == other.log


def sets_with_custom_setattr(x, obj):
    y = x * 2
    obj.value = 1
    return y


def test_an_object_with_its_own_setattr_breaks_at_the_write(check):
    check(sets_with_custom_setattr, np.arange(3.0), Guarded(), graphs=1)
    out = dynamo.explain(sets_with_custom_setattr)(np.arange(3.0), Guarded())
    assert "__setattr__" in out.break_reasons[0]


def test_side_effects_with_the_c_backend(check):
    from dynamo.backends import lookup_backend

    c_backend = lookup_backend("c")

    class CountingC(check.CountingBackend):
        def __call__(self, gm, example_inputs):
            super().__call__(gm, example_inputs)
            return c_backend(gm, example_inputs)

    check.run_check(CountingC(), updates_an_object, np.arange(3.0), State(), graphs=1)


def appends_then_rebinds(x, y, lst):
    for i in range(2):
        lst.append(y)
        y = x  # the appended value is y's old one
        if y.max() > 2.0:  # a break in the loop body
            pass
    return lst


def test_a_replayed_append_keeps_the_value_from_before_a_rebinding(check):
    # (found by the control-flow fuzzer)
    check(appends_then_rebinds, np.arange(3), np.ones(3), [], graphs=None)
