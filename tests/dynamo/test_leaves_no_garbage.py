"""A compile leaves no cyclic garbage and keeps no backend alive (issue 8).

In: functions compiled through the public API (with loops in resume functions, building
cyclic structures of their own, compiled and dropped, with a backend that always fails) and
backends defined in a loop. Out: ``gc.collect()`` finds what it finds after the same code in
plain Python (the garbage of the user's own cycles, nothing of npdynamo's), and the compile
callbacks of dropped backends die with them. See also test_policy.py
(test_compiling_leaves_no_reference_cycles, with the collector off).
"""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest

import dynamo
from dynamo import _C, config, convert_frame
from support.hooked import no_capture_leak  # noqa: F401 (an autouse fixture)
from support.sources import fresh_function


def _garbage_after(run) -> list[str]:
    """The types of the objects only the cyclic collector frees after `run()`."""
    gc.collect()
    old = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run()
        gc.collect()
        return sorted(type(o).__name__ for o in gc.garbage)
    finally:
        gc.set_debug(old)
        gc.garbage.clear()


_LOOPY = """
class Breaker:
    def __getattribute__(self, name):   # reading an attribute breaks the graph
        return object.__getattribute__(self, name)

def f(x, n):
    y = np.sin(x)
    Breaker().__class__     # the rest runs in a resume function...
    for k in range(n):      # ...whose bytecode has a backward jump
        y = y + k
    return y
"""


@pytest.mark.parametrize("backend", ["eager", "c"])
def test_compiling_a_function_with_loops_leaves_no_garbage(backend):
    f = fresh_function(_LOOPY, __file__)
    x = np.ones(4)
    if backend == "c":
        # The first kernel build of a process imports cffi, and pycparser's import leaves two
        # dead classes (its @dataclass(slots=True) replaces them): not the compile's garbage.
        with dynamo.optimize("c"):
            (lambda a: np.tan(a) * 0.25)(x)

    def run():
        with dynamo.optimize(backend):
            f(x, 3)
            f(x.reshape(2, 2), 3)

    assert _garbage_after(run) == []
    np.testing.assert_array_equal(dynamo.compile(f)(x, 3), f(x, 3))


def test_a_dropped_compiled_function_leaves_no_garbage():
    # (compared with the same run in plain Python: a function made by exec and its globals
    # dict are a cycle of their own, ['dict', 'function'])
    def run(compile):
        f = fresh_function("def f(x):\n    return np.cos(x) * 2\n", __file__)
        (dynamo.compile(f) if compile else f)(np.ones(3))
        del f
        dynamo.reset()

    assert _garbage_after(lambda: run(True)) == _garbage_after(lambda: run(False))


def test_a_capture_scope_is_not_a_reference_cycle():
    def run():
        with dynamo.optimize("eager"):
            pass
        dynamo.disable(len)
        dynamo.run()

    assert _garbage_after(run) == []


# The translator's models of what the user's code builds: a list that contains itself is a cycle
# of trackers, a function made in the frame holds the translator that holds it in its locals
# (test_gc GCTests.test_saveall, test_list, ...). The compile must leave exactly the garbage
# plain Python leaves.
_CYCLIC_MODELS = """
class Breaker:
    def __getattribute__(self, name):
        return object.__getattribute__(self, name)

def self_list(x):
    L = []
    L.append(L)
    return np.sin(x)

def self_dict(x):
    d = {"x": x}
    d["d"] = d
    return np.sin(x)

def list_and_tuple(x):
    a = [x]
    t = (a,)
    a.append(t)
    return np.sin(x)

def nested_function(x):
    def g(y):
        return y + 1
    return g(np.sin(x))

def closure_and_break(x):
    k = 3.0
    g = lambda: k
    Breaker().__class__          # graph break: the rest runs in a resume function
    return x * g()

def generator_in_its_list(x):
    L = [1]
    g = (y for y in L)
    L.append(g)
    next(g)
    return np.sin(x)
"""


@pytest.mark.parametrize("name", ["self_list", "self_dict", "list_and_tuple", "nested_function",
                                  "closure_and_break", "generator_in_its_list"])
def test_compiling_code_that_builds_cycles_leaves_the_garbage_of_plain_python(name):
    x = np.ones(3)
    plain = fresh_function(_CYCLIC_MODELS, __file__, name)
    want = _garbage_after(lambda: plain(x))
    f = fresh_function(_CYCLIC_MODELS, __file__, name)

    def run():
        with dynamo.optimize("eager"):
            f(x)

    got = _garbage_after(run)
    # (the graph need not build a list nothing reads: no more garbage than Python's)
    assert set(got) <= set(want) and len(got) <= len(want), (got, want)
    np.testing.assert_array_equal(dynamo.compile(f)(x), plain(x))


def _add_one(x):
    return x + 1


def test_a_dead_callback_with_a_failed_code_leaves_no_garbage():
    def backend(gm, example_inputs):
        raise RuntimeError("this backend always fails")

    with config.patch(suppress_errors=True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = dynamo.compile(_add_one, backend=backend)
        compiled(np.arange(3.0))
        compiled(np.arange(3.0))
    gc.collect()  # (whatever the compile itself left)
    del compiled, backend  # the callback (ConvertFrame) dies with its backend
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        found = gc.collect()
        kinds = sorted({type(o).__name__ for o in gc.garbage})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert found == 0, kinds


def _live_callbacks():
    gc.collect()
    return sum(isinstance(o, convert_frame.ConvertFrame) for o in gc.get_objects())


def test_backends_defined_in_a_loop_do_not_accumulate():
    def f(x):
        return np.cos(x) * 2

    x = np.ones(3)
    before = _live_callbacks()
    for _ in range(20):
        def backend(gm, example_inputs):
            return gm.forward
        compiled = dynamo.compile(f, backend=backend)
        assert np.array_equal(compiled(x), f(x))
        del compiled, backend
    assert _live_callbacks() <= before + 1
    gc.collect()
    assert len(_C.get_cache_entries(f.__code__)) <= 1  # entries of dead callbacks are dropped
