"""Guards evaluated in C (`_C.GuardSet`, csrc/guards.c, built by dynamo/guards.py).

Comes in: guard lists built by hand (unit level: the C program against the Python text it was
made from, on many tricky values) and compiled functions (end to end: a change that must
recompile does, one that must not doesn't). Goes out: assertions that the C evaluation equals
the Python text exactly, that the self-check mode catches a disagreement, and that guards are
thread-safe, leak nothing and die with their function.
"""

from __future__ import annotations

import gc
import math
import re
import sys
import types
import weakref

import numpy as np
import pytest
from support.threads import run_in_threads

import dynamo
from dynamo import _C, config
from dynamo import guards as guards_mod
from dynamo.guards import Guard, build_check_fn
from dynamo.source import (
    AttrSource,
    ClosureSource,
    GetItemSource,
    GlobalSource,
    LocalSource,
)

X = LocalSource("x")


class Weird:
    """A value whose comparisons and attributes do unusual things."""

    def __init__(self, eq=None, attr=None):
        self._eq, self._attr = eq, attr

    def __eq__(self, other):
        if isinstance(self._eq, BaseException) or (isinstance(self._eq, type)
                                                   and issubclass(self._eq, BaseException)):
            raise self._eq
        return self._eq

    __hash__ = object.__hash__

    def __getattr__(self, name):
        if self._attr is not None:
            raise self._attr
        raise AttributeError(name)


class FloatSub(float):
    pass


class ArraySub(np.ndarray):
    pass


def _values() -> list:
    base = np.arange(6.0).reshape(2, 3)
    return [
        0, 1, 3, -3, True, False, 2**70, 3.0, 0.0, -0.0, float("nan"), -float("nan"),
        float("inf"), -float("inf"), complex(0, 0), complex(-0.0, 0), complex(0, -0.0),
        complex(float("nan"), 1), 1j, FloatSub(3.0), np.float64(3.0), np.float64(0.0), "a",
        b"a", None, (), (1, 2), [1, 2], [1, 2, 3], {"a": 1}, {"a": 1, "b": 2}, {"b": 2, "a": 1},
        {1: 1}, {2: 3, "a": 1}, {1.0: 1},
        {"a": 1, 2: 3}, base, base.T, base[:, :2], base.astype(np.float32), base.reshape(6),
        np.ones((2, 1)), np.ones((2, 5)), np.ones((0, 3)), base.view(ArraySub), np.float32(1),
        Weird(eq=True), Weird(eq=False), Weird(eq=ValueError("x")), Weird(eq=np.array([1, 2])),
        Weird(attr=ValueError("attr")), np, math, len, abs, lambda: 0, slice(1, 2), ...,
        range(3), np.dtype("float64"), np.dtype("float32"), 2, -5, 10**30, -10**30, True,
        _LOCAL_CLASS, _LOCAL_FN, _LOCAL_OBJ, _LOCAL_CLASS(), _flagged(), Flagged(), Dynamic(),
        Slotted(),
    ]


class Flagged:
    flag = "class"


class Dynamic:
    def __getattr__(self, name):
        return 1


class Slotted:
    __slots__ = ("flag",)


def _flagged():
    obj = _LOCAL_CLASS()
    obj.flag = True
    return obj


def _made_by_a_call():
    class Local:
        pass

    def local_fn():
        return 0

    return Local, local_fn, Local()


_LOCAL_CLASS, _LOCAL_FN, _LOCAL_OBJ = _made_by_a_call()


def _guards() -> list[Guard]:
    f64 = np.dtype("float64")
    fn = lambda: 0  # noqa: E731
    out = [
        Guard(X, "TYPE_MATCH", int), Guard(X, "TYPE_MATCH", np.ndarray),
        Guard(X, "ID_MATCH", Guard.identity(np)), Guard(X, "ID_MATCH", Guard.identity(None)),
        Guard(X, "FUNCTION_MATCH", (Guard.identity(fn.__code__), Guard.identity(fn.__globals__))),
        Guard(X, "SEQUENCE_LENGTH", (list, 2)), Guard(X, "SEQUENCE_LENGTH", (tuple, 0)),
        Guard(X, "DICT_KEYS", (dict, ("a", "b"))),
        Guard(X, "DICT_KEYS", (dict, ("b", "a"))),
        Guard(X, "DICT_KEYS", (dict, ("a", 2))),
        Guard(X, "NOT_IN_DICT", "a"),
        Guard(X, "NDARRAY_MATCH", (f64, (2, 3), False)),
        Guard(X, "NDARRAY_MATCH", (f64, (2, 3), True)),
        Guard(X, "NDARRAY_MATCH", (f64, (None, 3), False)),
        Guard(X, "NDARRAY_MATCH", (f64, (2, None), True)),
        Guard(X, "NDARRAY_MATCH", (np.dtype("float32"), (2, 3), False)),
        Guard(GlobalSource("G"), "NDARRAY_MATCH", (f64, (6,), False)),
        Guard(GlobalSource("G"), "NOT_IN_GLOBALS", "len"),
        Guard(GlobalSource("missing"), "TYPE_MATCH", int),
        Guard(AttrSource(X, "real"), "CONSTANT_MATCH", (float, 3.0)),
        Guard(GetItemSource(X, 0), "CONSTANT_MATCH", (int, 1)),
        Guard(GetItemSource(X, "a"), "CONSTANT_MATCH", (int, 1)),
        Guard(ClosureSource("c", 0), "CONSTANT_MATCH", (int, 3)),
        Guard(ClosureSource("c", 1), "CONSTANT_MATCH", (int, 3)),
        # (two paths: ``x.real is x`` holds for ints and floats, not for complex numbers)
        Guard(AttrSource(X, "real"), "SAME_OBJECT", X),
        Guard(GetItemSource(X, 0), "SAME_OBJECT", ClosureSource("c", 0)),
        Guard(X, "SAME_OBJECT", GlobalSource("G")),
        Guard(X, "INT_AT_LEAST", 2),  # (an int argument kept symbolic)
        # (hasattr() was False: an own attribute, a class attribute, __getattr__, slots)
        Guard(X, "NO_ATTRIBUTE", "flag"), Guard(X, "NO_ATTRIBUTE", "real"),
        Guard(X, "NO_ATTRIBUTE", "__class__"),
        # (held weakly: a class and a function made by a call, an object of a Python class)
        Guard(X, "TYPE_MATCH", _LOCAL_CLASS), Guard(X, "ID_MATCH", Guard.identity(_LOCAL_FN)),
        Guard(X, "ID_MATCH", Guard.identity(_LOCAL_OBJ)),
    ]
    for v in (None, 0, 3, True, 3.0, 0.0, -0.0, float("nan"), float("inf"), complex(0, -0.0),
              complex(float("nan"), 1), "a", b"a", slice(1, 2), ..., range(3), np.dtype("float64")):
        out.append(Guard(X, "CONSTANT_MATCH", (type(v), v)))
    return out


def _guard_id(guard) -> str:
    # (no memory addresses or object ids: a test's id must be the same on every run, so that it
    # can be selected and run again)
    text = f"{guard.source.name()}-{guard.kind}-{guard.expected!r}"
    return re.sub(r"0x[0-9a-fA-F]+|\d{7,}", "ADDR", text)[:60]


@pytest.mark.parametrize("guard", _guards(), ids=_guard_id)
def test_c_program_equals_python_text_on_tricky_values(guard):
    check_fn = build_check_fn([guard], ["x"], "f")
    assert type(check_fn) is _C.GuardSet
    assert check_fn.lowered == [True], "every kind in this list is lowered to C"
    closure = (types.CellType(3),)
    for value in _values():
        for globals_ in ({"G": np.arange(6.0)}, {"G": np.arange(6.0), "len": len}, {}):
            args = (value, globals_, closure)
            expected = bool(check_fn.python_fn(*args))
            assert check_fn(*args) is expected, (guard, value, globals_)
            assert (check_fn.first_failing_check(*args) == -1) is expected


def test_base_exceptions_propagate_and_exceptions_fail():
    # (the type check first passes; then reading x.w raises)
    check_fn = build_check_fn([Guard(X, "TYPE_MATCH", Weird),
                               Guard(AttrSource(X, "w"), "TYPE_MATCH", int)], ["x"], "f")
    assert check_fn(Weird(attr=ValueError("no")), {}, None) is False
    with pytest.raises(KeyboardInterrupt):
        check_fn(Weird(attr=KeyboardInterrupt()), {}, None)
    with pytest.raises(KeyboardInterrupt):
        check_fn.python_fn(Weird(attr=KeyboardInterrupt()), {}, None)


def test_unknown_kind_falls_back_to_its_python_text(monkeypatch):
    monkeypatch.setattr(guards_mod.GuardBuilder, "EVEN",
                        lambda self, e, expected: [f"{e} % 2 == 0"], raising=False)
    check_fn = build_check_fn([Guard(X, "TYPE_MATCH", int), Guard(X, "EVEN", None)], ["x"], "f")
    assert check_fn.lowered == [True, False]
    assert check_fn(4, {}, None) is True and check_fn(3, {}, None) is False
    assert check_fn("a", {}, None) is False  # the type check comes first
    assert "x % 2 == 0" in check_fn.source


def test_guards_still_print_as_python():
    f64 = np.dtype("float64")
    check_fn = build_check_fn([Guard(X, "NDARRAY_MATCH", (f64, (8,), False))], ["x"], "f")
    assert "x.shape == (8,)" in check_fn.source and "x.shape == (8,)" in check_fn.guards[0]
    dyn = build_check_fn([Guard(X, "NDARRAY_MATCH", (f64, (None, 3), False))], ["x"], "f")
    assert "x.shape[0] >= 2" in dyn.source and dyn.lowered == [True]


def test_dynamic_dimension_matches_sizes_from_two():
    check_fn = build_check_fn([Guard(X, "NDARRAY_MATCH", (np.dtype("float64"), (None, 3), False))],
                              ["x"], "f")
    for n, ok in ((0, False), (1, False), (2, True), (7, True)):
        assert check_fn(np.ones((n, 3)), {}, None) is ok
        assert bool(check_fn.python_fn(np.ones((n, 3)), {}, None)) is ok
    assert check_fn(np.ones((5, 4)), {}, None) is False


# End to end: what must recompile does, what must not doesn't ------------------------------------


def _count(backend, fn, calls):
    compiled = dynamo.compile(fn, backend=backend, dynamic=False)
    for args in calls:
        expected = fn(*args)
        got = compiled(*args)
        np.testing.assert_array_equal(got, expected, strict=True)
    return backend.count


def test_ndarray_guards_recompile_on_dtype_shape_ndim_only(backend):
    f = lambda x: np.sin(x) + 1  # noqa: E731
    a = np.ones(4)
    assert _count(backend, f, [(a,), (a + 1,), (np.ones(4),)]) == 1  # values do not matter
    assert _count(backend, f, [(a.astype(np.float32),), (np.ones(5),), (np.ones((4, 1)),)]) == 4


def test_constant_guards(backend):
    f = lambda x, k: x * k  # noqa: E731
    a = np.ones(3)
    # (k is a Python scalar: whether a new value recompiles is the lead's scalar policy; the
    # type must always be guarded)
    n = _count(backend, f, [(a, 2), (a, 2)])
    assert n == 1
    assert _count(backend, f, [(a, 2.0)]) == n + 1
    nan = float("nan")
    g = lambda x, k: np.sin(x) if k is None else x + 1  # noqa: E731
    before = backend.count
    assert _count(backend, g, [(a, None), (a, None)]) == before + 1
    assert _count(backend, g, [(a, 0)]) == before + 2
    h = lambda x, s: x * s  # noqa: E731
    before = backend.count
    _count(backend, h, [(a, nan), (a, nan)])
    _count(backend, h, [(a, -0.0), (a, 0.0)])
    assert backend.count - before <= 3


def test_sequence_dict_closure_attribute_and_global_guards(backend):
    a = np.ones(3)
    f = lambda xs: xs[0] + xs[-1]  # noqa: E731
    assert _count(backend, f, [([a, a],), ([a, a],)]) == 1
    assert _count(backend, f, [([a, a, a],)]) == 2
    assert _count(backend, f, [((a, a),)]) == 3

    d = lambda m: m["a"] * 2  # noqa: E731
    before = backend.count
    _count(backend, d, [({"a": a},), ({"a": a + 1},)])
    _count(backend, d, [({"a": a, "b": a},)])
    assert backend.count == before + 2

    w = np.ones(3)

    def c(x):
        return x + w

    before = backend.count
    _count(backend, c, [(a,), (a,)])
    w = np.ones(4)
    _count(backend, c, [(np.ones(4),)])
    assert backend.count == before + 2

    class Model:
        def __init__(self, n):
            self.w = np.ones(n)

        def __call__(self, x):
            return x * self.w

    before = backend.count
    compiled = dynamo.compile(Model.__call__, backend=backend, dynamic=False)
    for n in (3, 3, 5):
        np.testing.assert_array_equal(compiled(Model(n), np.ones(n)), np.ones(n))
    assert backend.count == before + 2


def test_builtin_shadowed_by_a_global_recompiles(backend):
    namespace = {"np": np}
    exec("def f(x):\n    return x * len(x)\n", namespace)
    f = namespace["f"]
    compiled = dynamo.compile(f, backend=backend, dynamic=False)
    a = np.ones(3)
    np.testing.assert_array_equal(compiled(a), a * 3)
    namespace["len"] = lambda x: 10
    np.testing.assert_array_equal(compiled(a), a * 10)


# Self-check mode ---------------------------------------------------------------------------------


def test_self_check_mode_reports_a_disagreement(monkeypatch):
    def wrong(self, p, expected):  # C checks a shape one longer than the Python text
        dtype, shape, contiguous = expected
        return [(guards_mod._TYPE_IS, p, np.ndarray, None, 0),
                (guards_mod._DTYPE, p, dtype, None, 0),
                (guards_mod._SHAPE, p, tuple(s + 1 for s in shape), None, 0)]

    monkeypatch.setattr(guards_mod.GuardLowering, "NDARRAY_MATCH", wrong)
    compiled = dynamo.compile(lambda x: np.cos(x) + 1, dynamic=False)
    a = np.ones(3)
    with config.patch(guard_self_check=True):
        compiled(a)  # compiles; the first call does not evaluate guards
        with pytest.raises(AssertionError, match=r"guard self-check.*L\['x'\]: NDARRAY_MATCH"):
            compiled(a)
    with config.patch(guard_self_check=False):
        np.testing.assert_array_equal(compiled(a), np.cos(a) + 1)  # C alone: a (wrong) miss


def test_the_test_suite_runs_with_the_self_check():
    # tests/conftest.py turns it on (DYNAMO_GUARD_SELF_CHECK=1) unless the environment says no
    import os

    if os.environ.get("DYNAMO_GUARD_SELF_CHECK") == "1":
        assert config.guard_self_check is True


def test_self_check_option_validates_and_defaults_off(tmp_path):
    import subprocess

    code = "import dynamo; print(dynamo.config.guard_self_check)"
    env = {k: v for k, v in __import__("os").environ.items() if k != "DYNAMO_GUARD_SELF_CHECK"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.stdout.strip() == "False", out.stderr
    with pytest.raises(TypeError, match="guard_self_check"):
        config.guard_self_check = 1


# Threads, memory, lifetime ------------------------------------------------------------------------


def test_threads_mixed_shapes_and_dtypes_all_correct():
    def f(x, y):
        return np.sin(x) * y + 1

    compiled = dynamo.compile(f)
    inputs = [(np.arange(n, dtype=dt), np.full(n, 2, dtype=dt))
              for n in (1, 3, 4, 9) for dt in (np.float64, np.float32, np.int64)]
    expected = [f(x, y) for x, y in inputs]

    def worker(seed):
        for i in range(10_000):
            k = (i * 7 + seed) % len(inputs)
            got = compiled(*inputs[k])
            assert got.dtype == expected[k].dtype and np.array_equal(got, expected[k]), (k, got)

    errors = run_in_threads(worker, 8)
    assert not errors, errors[:3]


def _rss_kib() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_a_million_cache_hits_leak_nothing():
    def f(x, y):
        return x + y

    compiled = dynamo.compile(f)
    x, y = np.ones(1), np.ones(1)
    for _ in range(50_000):
        compiled(x, y)
    refs = [sys.getrefcount(o) for o in (x, y, x.dtype, np.ndarray, f.__globals__)]
    rss = _rss_kib()
    for _ in range(1_000_000):
        compiled(x, y)
    assert [sys.getrefcount(o) for o in (x, y, x.dtype, np.ndarray, f.__globals__)] == refs
    assert _rss_kib() - rss < 4096, "memory grew by more than 4 MiB over 1,000,000 cache hits"
    assert _C.code_stats(f.__code__)[0] >= 1_000_000


def test_deleting_a_compiled_function_frees_its_entries():
    namespace = {"np": np}
    exec("def f(x):\n    return np.sin(x) + 1\n", namespace)
    compiled = dynamo.compile(namespace["f"])
    compiled(np.ones(3))
    ((check_fn, code),) = _C.get_cache_entries(namespace["f"].__code__)
    ref = weakref.ref(check_fn)
    graph_ref = weakref.ref(check_fn.graph_module) if check_fn.graph_module is not None else None
    del check_fn, code, compiled
    namespace.clear()
    gc.collect()
    assert ref() is None
    assert graph_ref is None or graph_ref() is None
