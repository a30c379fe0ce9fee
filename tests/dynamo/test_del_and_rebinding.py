"""`del x` and rebinding `x` when the old value's death runs code (a finalizer, a weakref
callback, a code object's free functions): the object must die where plain Python frees it,
before the reads that follow (CPython's test_code CoExtra.test_free_called). The translator only
simulates the `del`; the graph ends there instead, and the transformed code lets go of the
value. Deleting or rebinding arrays and constants (common NumPy code) does not end the graph.

In: small functions; plain Python is the oracle for what they print / return, `explain()` for
the graphs and breaks.
"""

from __future__ import annotations

import weakref

import numpy as np

import dynamo

EVENTS: list = []


class Finalized:
    def __del__(self):
        EVENTS.append("freed")


class Opaque:
    """Attribute reads are graph breaks (the translator does not run __getattribute__)."""

    def __getattribute__(self, name):
        return object.__getattribute__(self, name)


def _break():
    o = Opaque()
    o.x = 1
    return o


def del_then_read(x):
    obj = Finalized()  # (a call the translator does not trace: a break; obj is then an argument)
    y = np.sin(x)
    del obj
    return y + len(EVENTS)


def rebind_then_read(x):
    obj = Finalized()
    y = np.sin(x)
    obj = 0
    return y + len(EVENTS) + obj


def weakref_callback_then_read(x):
    b = _break()
    holder = [b]
    seen = []
    ref = weakref.ref(b, lambda _: seen.append(1))
    del b
    y = np.cos(x)
    del holder
    return y + len(seen), ref


def run(fn, *args):
    """fn(*args) plainly and compiled, each with fresh EVENTS: both results and event lists."""
    EVENTS.clear()
    plain = fn(*args)
    plain_events = list(EVENTS)
    EVENTS.clear()
    compiled = dynamo.optimize("eager")(fn)(*args)
    compiled_events = list(EVENTS)
    return plain, plain_events, compiled, compiled_events


def test_del_frees_before_the_reads_after_it():
    x = np.arange(3.0)
    for _ in range(2):  # the compiling call and a cache hit
        plain, pe, compiled, ce = run(del_then_read, x)
        np.testing.assert_array_equal(compiled, plain)
        assert ce == pe == ["freed"]
    out = dynamo.explain(del_then_read)(x)
    assert any("del of local 'obj' may free an object" in r for r in out.break_reasons)
    # the NumPy work before and after the del is still captured
    assert out.graph_count == 2


def test_rebinding_frees_before_the_reads_after_it():
    x = np.arange(3.0)
    for _ in range(2):
        plain, pe, compiled, ce = run(rebind_then_read, x)
        np.testing.assert_array_equal(compiled, plain)
        assert ce == pe
    out = dynamo.explain(rebind_then_read)(x)
    assert any("rebinding of local 'obj'" in r for r in out.break_reasons)


def test_weakref_callback_runs_at_the_last_del():
    x = np.arange(3.0)
    for _ in range(2):
        (plain, pref), _, (compiled, cref), _ = run(weakref_callback_then_read, x)
        np.testing.assert_array_equal(compiled, plain)
        assert pref() is None and cref() is None
        np.testing.assert_array_equal(plain, np.cos(x) + 1)


def del_arrays(x, w):
    a = np.sin(x) * w
    b = a + 1.0
    del a
    c = np.exp(b)
    del b
    x = c * 2.0  # rebinding an argument array
    w = None
    del w
    n = 3
    n = n + 1
    return x + n


def test_deleting_arrays_and_constants_keeps_one_graph():
    x, w = np.linspace(0.0, 1.0, 5), np.full(5, 0.5)
    out = dynamo.explain(del_arrays)(x, w)
    assert out.graph_count == 1 and out.graph_break_count == 0, out.break_reasons
    np.testing.assert_array_equal(out.result, del_arrays(x, w))


def loop_over_objects(x, objs):
    for obj in objs:  # rebinding `obj`: each object is still held by the list
        x = x * obj.scale
    del obj
    return x


class Scaled:
    def __init__(self, scale):
        self.scale = scale

    def __del__(self):
        pass


def test_values_held_elsewhere_do_not_end_the_graph():
    x = np.arange(4.0)
    objs = [Scaled(2.0), Scaled(3.0)]
    out = dynamo.explain(loop_over_objects)(x, objs)
    np.testing.assert_array_equal(out.result, loop_over_objects(x, objs))
    assert out.graph_count == 1 and out.graph_break_count == 0, out.break_reasons


G = None


def replace_global(x):
    global G
    y = np.sin(x)
    G = None
    return y + len(EVENTS)


class Holder:
    pass


def replace_attribute(h, x):
    y = np.sin(x)
    h.res = None
    h.n = h.n + 1  # (an int: no break)
    return y + len(EVENTS)


def run_after(setup, fn, *args):
    """Like `run`, with `setup()` before each of the two runs."""
    setup()
    EVENTS.clear()
    plain = fn(*args)
    plain_events = list(EVENTS)
    setup()
    EVENTS.clear()
    compiled = dynamo.optimize("eager")(fn)(*args)
    return plain, plain_events, compiled, list(EVENTS)


def test_replacing_a_global_frees_before_the_reads_after_it():
    def setup():
        global G
        G = Finalized()

    x = np.arange(3.0)
    for _ in range(2):
        plain, pe, compiled, ce = run_after(setup, replace_global, x)
        np.testing.assert_array_equal(compiled, plain)
        assert ce == pe == ["freed"]
    setup()
    out = dynamo.explain(replace_global)(x)
    assert any("replacing global 'G'" in r for r in out.break_reasons), out.break_reasons


def test_replacing_an_attribute_frees_before_the_reads_after_it():
    x = np.arange(3.0)
    h = Holder()
    h.n = 0

    def setup():
        h.res = Finalized()

    for _ in range(2):
        plain, pe, compiled, ce = run_after(setup, replace_attribute, h, x)
        np.testing.assert_array_equal(compiled, plain)
        assert ce == pe == ["freed"]
    assert h.n == 4
    h.res = np.ones(3)  # an array: replaced by the replay after the graph, no break
    out = dynamo.explain(replace_attribute)(h, x)
    assert out.graph_break_count == 0 and out.graph_count == 1, out.break_reasons
