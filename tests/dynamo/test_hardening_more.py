"""Issue 8 leftovers: npdynamo must not change what the rest of the program can observe.

In: small user functions compiled through the public API (and hand-built fx graphs for CSE).
Out: plain Python / NumPy is the oracle: no cyclic garbage left by a compile (gc.collect()
returns what it returns without npdynamo), warnings of other threads untouched while a compile
runs, CSE never merges constants that differ in type or bits, generated graph source readable
through linecache (and gone with its graph) while the user's linecache stays as the user left it,
``fullgraph=True`` raising in ``with`` blocks as in the decorator form, and the shared oracle.
"""

from __future__ import annotations

import gc
import inspect
import linecache
import operator
import threading
import traceback
import warnings

import numpy as np
import pytest

import dynamo
import fx
from fx import op_rules
from fx.meta import ArrayMeta
from fx.op_rules._core import Call
from fx.passes.cse import _key, eliminate_common_subexpressions
from fx.passes.shape_prop import propagate_shapes
from support.oracle import assert_same as oracle_assert_same


def _fresh(src: str, name: str = "f", glb: dict | None = None, filename: str = __file__):
    """A new function object (and code object) per call, so compile state never carries over."""
    namespace = dict(glb if glb is not None else {"np": np})
    exec(compile(src, filename, "exec"), namespace)
    return namespace[name]


# 1. No cyclic garbage --------------------------------------------------------------------------


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
    f = _fresh(_LOOPY)
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
        f = _fresh("def f(x):\n    return np.cos(x) * 2\n")
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
    plain = _fresh(_CYCLIC_MODELS, name)
    want = _garbage_after(lambda: plain(x))
    f = _fresh(_CYCLIC_MODELS, name)

    def run():
        with dynamo.optimize("eager"):
            f(x)

    got = _garbage_after(run)
    # (the graph need not build a list nothing reads: no more garbage than Python's)
    assert set(got) <= set(want) and len(got) <= len(want), (got, want)
    np.testing.assert_array_equal(dynamo.compile(f)(x), plain(x))


# 5. fullgraph=True in a with block --------------------------------------------------------------

_UNCAPTURABLE = """
def f(x):
    return eval("np.sin(x) + 1")   # reads its locals by name: never split, never captured
"""


@pytest.mark.parametrize("order", ["loose_first", "strict_scope_made_first"])
def test_fullgraph_with_block_raises_for_code_an_earlier_compile_marked_skip(order):
    f = _fresh(_UNCAPTURABLE)
    x = np.ones(3)
    strict = dynamo.optimize("eager", fullgraph=True) if order != "loose_first" else None
    with dynamo.optimize("eager"):
        np.testing.assert_array_equal(f(x), np.sin(x) + 1)  # not capturable: runs plainly
    strict = strict or dynamo.optimize("eager", fullgraph=True)
    for _ in range(2):
        with pytest.raises(dynamo.FullGraphError, match="could not be captured as one graph"):
            with strict:
                f(x)
        with dynamo.optimize("eager"):  # the loose scope still runs it unmodified
            np.testing.assert_array_equal(f(x), np.sin(x) + 1)


# 6. One oracle ---------------------------------------------------------------------------------


class _Obj:
    def __init__(self, v):
        self.v = v


def test_dynamo_assert_same_compares_user_objects_by_identity(check):
    a, b = _Obj(1), _Obj(1)
    check.assert_same(a, a)
    with pytest.raises(AssertionError):
        check.assert_same(a, b)  # equal attributes, but another object
    oracle_assert_same(a, b)  # the whole-program oracle compares state
    with pytest.raises(AssertionError):
        oracle_assert_same(a, _Obj(2))
    with pytest.raises(ValueError, match="objects="):
        oracle_assert_same(a, a, objects="equal")


def test_dynamo_assert_same_is_bit_exact_and_layout_exact(check):
    check.assert_same(np.float64(0.0), np.float64(0.0))
    with pytest.raises(AssertionError):
        check.assert_same(np.array([0.0]), np.array([-0.0]))
    with pytest.raises(AssertionError):
        check.assert_same(np.ones((2, 2)), np.asfortranarray(np.ones((2, 2))))
    with pytest.raises(AssertionError):
        check.assert_same([np.ones(2)], (np.ones(2),))


# 3. CSE keys are type- and bit-exact ----------------------------------------------------------


def test_cse_keys_tell_signed_zeros_nan_payloads_and_types_apart():
    quiet_nan = float("nan")
    other_nan = np.frombuffer(np.array([0x7FF8000000000001], np.uint64).tobytes(), np.float64)[0]
    different = [
        (0.0, -0.0), (np.float64(0.0), np.float64(-0.0)), (np.float32(0.0), np.float64(0.0)),
        (complex(0.0, 0.0), complex(0.0, -0.0)), (quiet_nan, float(other_nan)),
        (1, 1.0), (1, True), ((0.0, 1), (-0.0, 1)), (slice(0.0, 1), slice(-0.0, 1)),
        ({"a": 0.0}, {"a": -0.0}), (np.float64(1.0), 1.0),
    ]
    for a, b in different:
        assert _key(a) != _key(b), (a, b)
    for a, b in [(0.0, 0.0), (quiet_nan, float("nan")), ((1, "x"), (1, "x")),
                 (np.float64(-0.0), np.float64(-0.0)), (None, None)]:
        assert _key(a) == _key(b), (a, b)


def test_cse_does_not_merge_multiplications_by_zero_and_negative_zero(monkeypatch):
    # x * 0.0 cannot warn for finite x; `may_raise_or_warn` is conservative for float
    # multiplications, so it is patched here to let the key alone decide what merges.
    import fx.passes.cse as cse

    monkeypatch.setattr(cse, "_may_raise_or_warn", lambda node: False)
    g = fx.Graph()
    x = g.placeholder("x")
    pos = g.call_function(operator.mul, (x, 0.0))
    neg = g.call_function(operator.mul, (x, -0.0))
    sign_pos = g.call_function(np.copysign, (1.0, pos))
    sign_neg = g.call_function(np.copysign, (1.0, neg))
    ten_neg = g.call_function(operator.mul, (sign_neg, 10.0))
    g.output(g.call_function(operator.add, (sign_pos, ten_neg)))
    xs = np.array([1.0, 2.0])
    propagate_shapes(fx.GraphModule(g), [xs])
    want = fx.GraphModule(g).forward(xs)
    np.testing.assert_array_equal(want, [-9.0, -9.0])
    eliminate_common_subexpressions(g)
    oracle_assert_same(want, fx.GraphModule(g).forward(xs))


# 4. linecache: generated source readable, the user's linecache untouched -------------------------


def test_compiling_adds_no_linecache_entry_for_user_files(tmp_path):
    user_file = tmp_path / "user_module.py"
    user_file.write_text("def f(x):\n    return np.sin(x) + 1\n")
    f = _fresh(user_file.read_text(), filename=str(user_file))
    linecache.clearcache()
    x = np.ones(3)
    gms = []
    compiled = dynamo.compile(f, backend=lambda gm, inputs: gms.append(gm) or gm.forward)
    np.testing.assert_array_equal(compiled(x), np.sin(x) + 1)
    assert len(gms) == 1
    assert str(user_file) not in linecache.cache  # the user's source was read without it
    assert "return np.sin(x) + 1" in gms[0].code  # ...and still shows in the generated code


def test_graph_source_shows_in_tracebacks_and_getsource_and_dies_with_the_graph():
    g = fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(operator.getitem, (x, 5)))
    gm = fx.GraphModule(g, name="Hardening")
    assert "x[5]" in inspect.getsource(gm.forward)
    with pytest.raises(IndexError) as info:
        gm(np.ones(3))
    text = "".join(traceback.format_exception(info.value))
    assert gm.filename in text and "x[5]" in text
    filename = gm.filename
    del gm, info, text
    assert filename not in linecache.cache  # freed by reference counting, no gc.collect()


def test_compiled_graph_source_is_dropped_with_the_compiled_function():
    f = _fresh("def f(x):\n    return np.cos(x) * 2\n")
    names = []

    def backend(gm, inputs):
        names.append(gm.filename)  # keeps only the name, not the graph module
        return gm.forward

    dynamo.compile(f, backend=backend)(np.ones(3))
    assert len(names) == 1 and names[0] in linecache.cache
    del f
    dynamo.reset()
    gc.collect()  # (see test_a_dropped_compiled_function_leaves_no_garbage)
    assert names[0] not in linecache.cache


# 2. Stand-in runs leave other threads' warnings alone ---------------------------------------------


class _ThreadWarning(UserWarning):
    pass


def test_a_standin_run_leaves_another_threads_warnings_and_errstate_alone():
    inside, done = threading.Event(), threading.Event()
    seen_by_thread: list = []

    def standin(x):  # the stand-in run: stays inside Call.run until the other thread is done
        inside.set()
        assert done.wait(10)
        return np.negative(x)

    def other_thread():
        assert inside.wait(10)
        try:
            warnings.warn("from the other thread", _ThreadWarning)
            seen_by_thread.append(np.float64(1.0) / np.float64(0.0))  # default errstate: warns
        finally:
            done.set()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        worker = threading.Thread(target=other_thread)
        worker.start()
        Call(np.negative, (ArrayMeta(np.dtype(np.float64), (3,)),), {}).run(fn=standin)
        worker.join(10)
    assert seen_by_thread == [np.inf]
    assert [(w.category, str(w.message)) for w in caught] == [
        (_ThreadWarning, "from the other thread"),
        (RuntimeWarning, "divide by zero encountered in scalar divide")]


@pytest.mark.parametrize("target, shape, kwargs", [
    (np.var, (5,), {"ddof": 1}), (np.std, (4, 3), {"ddof": 2, "axis": 0}),
    (np.mean, (0,), {}), (np.nanvar, (6,), {"ddof": 1}), (np.var, (0, 3), {"axis": 1}),
])
def test_rules_of_statistics_emit_no_warning_while_tracing(target, shape, kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        meta = op_rules.infer_call(target, [ArrayMeta(np.dtype(np.float64), shape)], kwargs)
    assert caught == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        real = target(np.ones(shape), **kwargs)
    assert meta.dtype == real.dtype and meta.shape == np.shape(real)


_COMPLEX_CAST = """
def f(c):
    y = c * 2
    r = y.astype(np.float32)
    return r + 1
"""


def test_complex_to_real_cast_warns_at_the_users_line_as_in_numpy(tmp_path):
    user_file = tmp_path / "cast_module.py"
    user_file.write_text(_COMPLEX_CAST)
    f = _fresh(_COMPLEX_CAST, filename=str(user_file))
    c = np.array([1 + 2j, 3 - 1j])

    def run(fn):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fn(c)
        return result, [(w.category, str(w.message), w.filename, w.lineno) for w in caught]

    want, eager_warnings = run(f)
    assert [w[0] for w in eager_warnings] == [np.exceptions.ComplexWarning]
    compiled = dynamo.compile(f)
    for _ in range(2):
        got, compiled_warnings = run(compiled)
        oracle_assert_same(want, got)
        assert compiled_warnings == eager_warnings
