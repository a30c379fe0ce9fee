"""Tests for ``dynamo._C``, the PEP 523 hook (contract: docs/internals.md section 1).

Each test drives the C module directly with small Python callbacks: a callback that records
FrameViews and answers with ``(check_fn, new_code)`` pairs, where ``new_code`` is another
function's code flattened to the layout the contract requires (all argument slots positional).
Build first: ``.venv/bin/python setup.py build_ext --inplace``.
"""

import gc
import inspect
import sys
import threading
import traceback
import tracemalloc
import types
import weakref

import pytest

from dynamo import _C as C


@pytest.fixture(autouse=True)
def _no_callback_leaks():
    """Every test starts and ends with capture off and the hook removed."""
    assert C.get_eval_frame() is None
    yield
    assert C.get_eval_frame() is None, "test left a capture scope entered"
    state = C.hook_state()
    assert state == {"installed": False, "active_scopes": 0, "deep_runs": 0}, state


def flat(fn):
    """fn's code with every argument slot positional (the layout new_code must have)."""
    co = fn.__code__
    varflags = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS
    nslots = (co.co_argcount + co.co_kwonlyargcount
              + bool(co.co_flags & inspect.CO_VARARGS)
              + bool(co.co_flags & inspect.CO_VARKEYWORDS))
    return co.replace(co_argcount=nslots, co_kwonlyargcount=0, co_posonlyargcount=0,
                      co_flags=co.co_flags & ~varflags)


class Recorder:
    """A compile-mode callback: records FrameViews of `code`, answers with `answer(view)`."""

    def __init__(self, code, answer=lambda view: None):
        self.code = code
        self.answer = answer
        self.views = []
        self.callback_inside = []

    def __call__(self, view):
        if view.f_code is not self.code:
            return None
        self.views.append(view)
        self.callback_inside.append(C.get_eval_frame())
        return self.answer(view)


def run_with(callback, fn, *args, **kwargs):
    return C.Capture(callback).run(fn, *args, **kwargs)


# ---- installation and the FrameView -------------------------------------------------------


def test_callback_called_only_while_set():
    def f(a):
        return a + 1

    rec = Recorder(f.__code__)
    assert f(1) == 2 and rec.views == []
    assert run_with(rec, f, 1) == 2
    assert len(rec.views) == 1
    assert f(1) == 2 and len(rec.views) == 1  # off again


def test_capture_scopes_nest_and_validate():
    def cb(view):
        return None

    compile_scope, run_only, off = C.Capture(cb), C.Capture(False), C.Capture(None)
    assert (compile_scope.callback, run_only.callback, off.callback) == (cb, False, None)
    with compile_scope as entered:
        assert entered is compile_scope and C.get_eval_frame() is cb
        assert C.hook_state()["installed"]
        with run_only:
            assert C.get_eval_frame() is False
            with off:
                assert C.get_eval_frame() is None
                assert off.run(C.get_eval_frame) is None
                assert compile_scope.run(C.get_eval_frame) is cb
            assert C.get_eval_frame() is False
        assert C.get_eval_frame() is cb
    assert C.get_eval_frame() is None and not C.hook_state()["installed"]
    with pytest.raises(TypeError, match="None .off., False .run-only. or a callable"):
        C.Capture(3)
    with pytest.raises(TypeError, match="needs fn"):
        compile_scope.run()
    assert compile_scope.run(lambda *a, **k: (a, k), 1, 2, z=3) == ((1, 2), {"z": 3})


def test_same_scope_object_reentered():
    def cb(view):
        return None

    scope = C.Capture(cb)
    with scope:
        with scope:
            assert C.hook_state()["active_scopes"] == 2
        assert C.get_eval_frame() is cb
    assert C.get_eval_frame() is None


def test_frame_view_args_kwonly_varargs_varkw():
    def f(a, b=2, *args, k, m=5, **kw):
        return (a, b, args, k, m, kw)

    rec = Recorder(f.__code__)
    assert run_with(rec, f, 1, 7, 8, 9, k=3, z=4) == (1, 7, (8, 9), 3, 5, {"z": 4})
    (view,) = rec.views
    assert isinstance(view, C.FrameView)
    assert view.f_code is f.__code__
    assert view.f_func is (f if sys.version_info >= (3, 11) else None)  # 3.10 frames have none
    assert view.f_globals is f.__globals__
    assert view.f_builtins is __builtins__ or view.f_builtins is vars(__builtins__)
    assert view.args == (1, 7, 3, 5, (8, 9), {"z": 4})
    assert view.closure is None
    assert view.f_locals == {"a": 1, "b": 7, "k": 3, "m": 5, "args": (8, 9), "kw": {"z": 4}}
    qualname = "test_frame_view_args_kwonly_varargs_varkw.<locals>.f"
    if sys.version_info < (3, 11):
        qualname = "f"  # code objects have no co_qualname before 3.11
    assert repr(view).startswith(f"<FrameView {qualname} at ")


def test_frame_view_closure_and_cells():
    x, y = 10, 20

    def f(a):
        def inner():
            return a + x  # `a` is a cell argument, `x` a free variable
        return inner() + y

    rec = Recorder(f.__code__)
    assert run_with(rec, f, 1) == 31
    (view,) = rec.views
    assert isinstance(view.closure, tuple) and len(view.closure) == 2
    assert [c.cell_contents for c in view.closure] == [10, 20]
    assert view.args == (1,)
    assert view.f_locals == {"a": 1, "x": 10, "y": 20}


def test_frame_view_omits_empty_cells():
    def outer():
        def f(a):
            return later  # noqa: F821 - bound after f is created
        rec = Recorder(f.__code__)
        with pytest.raises(NameError):
            run_with(rec, f, 1)
        later = 5
        assert run_with(rec, f, 1) == 5
        return rec

    rec = outer()
    assert rec.views[0].f_locals == {"a": 1}
    assert rec.views[1].f_locals == {"a": 1, "later": 5}


def test_callback_is_none_inside_callback():
    def f(a):
        return a

    rec = Recorder(f.__code__)
    run_with(rec, f, 1)
    assert rec.callback_inside == [None]


# ---- the cache ----------------------------------------------------------------------------


def test_new_code_runs_and_hits_skip_the_callback():
    def f(a, b):
        return a + b

    def g(a, b):
        return a * b

    seen = []

    def check(a, b, f_globals, closure):
        seen.append((a, b, f_globals, closure, C.get_eval_frame()))
        return a == 3

    new_code = g.__code__.replace()
    rec = Recorder(f.__code__, lambda view: (check, new_code))
    with C.Capture(rec):
        assert f(3, 4) == 12  # miss: compiled, new code runs
        assert f(3, 5) == 15  # hit
        assert f(2, 5) == 10  # guard fails: compiled again (a second entry)
    assert len(rec.views) == 2
    assert seen[0] == (3, 5, f.__globals__, None, None)  # guard sees slots, globals, closure
    assert all(s[4] is None for s in seen)  # callback is off inside guards
    assert C.get_code_state(new_code) == C.SKIP
    assert C.code_stats(f.__code__) == (1, 2)
    assert [e[0] for e in C.get_cache_entries(f.__code__)] == [check, check]


def test_kwonly_and_varargs_are_passed_as_slots():
    def f(a, *args, k, **kw):
        return "original"

    def g(a, *args, k, **kw):
        return ("new", a, args, k, kw)

    rec = Recorder(f.__code__, lambda view: (lambda *slots: True, flat(g)))
    with C.Capture(rec):
        assert f(1, 2, k=3, z=4) == ("new", 1, (2,), 3, {"z": 4})
        assert f(5, k=6) == ("new", 5, (), 6, {})
    assert len(rec.views) == 1


def test_closure_and_cell_arguments_in_new_code():
    x = 100

    def f(a):
        def inner():
            return a + x
        return ("original", inner())

    def g(a):
        def inner():
            return a - x
        return ("new", inner())

    rec = Recorder(f.__code__, lambda view: (lambda a, glb, closure: closure[0].cell_contents
                                              == 100, flat(g)))
    with C.Capture(rec):
        assert f(1) == ("new", -99)
        assert f(2) == ("new", -98)
        x = 7  # the guard reads the closure cell: it fails, the callback runs again
        assert f(2) == ("new", -5)
    assert len(rec.views) == 2


def test_function_reused_only_for_same_closure():
    def make(v):
        def f(a):
            return a + v

        def g(a):
            return a * v
        return f, g

    f1, g1 = make(2)
    f2, _ = make(3)
    new_code = flat(g1)
    rec = Recorder(f1.__code__, lambda view: (lambda *s: True, new_code))
    with C.Capture(rec):
        assert f1(5) == 10
        assert f2(5) == 15  # same code, different closure: same entry, fresh function
        assert f1(5) == 10
    assert len(rec.views) == 1


def test_mru_order():
    def f(a):
        return a

    def guard_for(value):
        def check(a, f_globals, closure):
            return a == value
        check.value = value
        return check

    new_code = flat(f)
    rec = Recorder(f.__code__, lambda view: (guard_for(view.args[0]), new_code))
    with C.Capture(rec):
        for v in (1, 2, 3):
            f(v)
        assert [e[0].value for e in C.get_cache_entries(f.__code__)] == [3, 2, 1]
        f(1)
        assert [e[0].value for e in C.get_cache_entries(f.__code__)] == [1, 3, 2]
        f(2)
        assert [e[0].value for e in C.get_cache_entries(f.__code__)] == [2, 1, 3]
    assert len(rec.views) == 3
    assert C.code_stats(f.__code__) == (2, 3)


def test_raising_guard_is_reported_and_counts_as_miss(monkeypatch):
    def f(a):
        return a + 1

    def g(a):
        return a + 1000

    reports = []
    monkeypatch.setattr(sys, "unraisablehook", reports.append)
    calls = []

    def answer(view):
        calls.append(1)
        if len(calls) == 1:
            return (lambda *s: 1 / 0, flat(g))
        return (lambda *s: True, flat(g))

    rec = Recorder(f.__code__, answer)
    with C.Capture(rec):
        assert f(1) == 1001
        assert f(1) == 1001  # first guard raises -> miss -> compile again
        assert f(1) == 1001  # the new entry hits
    assert len(rec.views) == 2
    assert len(reports) == 1 and reports[0].exc_type is ZeroDivisionError


def test_run_only_uses_cache_never_compiles():
    def f(a):
        return a

    def g(a):
        return -a

    rec = Recorder(f.__code__, lambda view: (lambda a, glb, c: a > 0, flat(g)))
    assert run_with(rec, f, 5) == -5
    assert run_with(False, f, 6) == -6  # hit
    assert run_with(False, f, -1) == -1  # miss: original code, no compile
    assert len(rec.views) == 1 and len(C.get_cache_entries(f.__code__)) == 1


def test_skip_state():
    def f(a):
        return a

    rec = Recorder(f.__code__, lambda view: (lambda *s: True, flat(f)))
    C.set_code_state(f.__code__, C.SKIP)
    assert C.get_code_state(f.__code__) == C.SKIP
    assert run_with(rec, f, 1) == 1
    assert rec.views == []


def test_run_only_state():
    def f(a):
        return a

    def g(a):
        return a * 10

    rec = Recorder(f.__code__, lambda view: (lambda a, glb, c: a == 1, flat(g)))
    assert run_with(rec, f, 1) == 10
    C.set_code_state(f.__code__, C.RUN_ONLY)
    assert run_with(rec, f, 1) == 10  # cache still used
    assert run_with(rec, f, 2) == 2  # miss: never compiled
    assert len(rec.views) == 1


def test_reset_code():
    def f(a):
        return a

    rec = Recorder(f.__code__, lambda view: (lambda *s: True, flat(f)))
    run_with(rec, f, 1)
    run_with(rec, f, 1)
    C.set_code_state(f.__code__, C.RUN_ONLY)
    assert C.code_stats(f.__code__) == (1, 1)
    C.reset_code(f.__code__)
    assert C.get_cache_entries(f.__code__) == []
    assert C.get_code_state(f.__code__) == C.DEFAULT
    assert C.code_stats(f.__code__) == (0, 0)
    run_with(rec, f, 1)
    assert len(rec.views) == 2


def test_callback_exception_propagates_and_callback_restored():
    def f(a):
        return a

    class Boom(Exception):
        pass

    def cb(view):
        if view.f_code is f.__code__:
            raise Boom("no")

    with C.Capture(cb):
        with pytest.raises(Boom):
            f(1)
        assert C.get_eval_frame() is cb


def test_callback_that_sets_a_callback_is_overridden():
    def f(a):
        return a

    def cb(view):
        if view.f_code is f.__code__:
            C.Capture(lambda v: None).__enter__()  # left entered on purpose
        return None

    with C.Capture(cb):
        f(1)
        assert C.get_eval_frame() is cb


@pytest.mark.parametrize("answer", [
    lambda view: 42,
    lambda view: (1, 2),
    lambda view: (lambda *s: True, "not code"),
])
def test_bad_callback_answers_raise_type_error(answer):
    def f(a):
        return a

    with pytest.raises(TypeError, match="callback"):
        run_with(Recorder(f.__code__, answer), f, 1)


def test_new_code_with_wrong_layout_raises():
    def f(a, *args):
        return a

    def g(a, *args):
        return a

    rec = Recorder(f.__code__, lambda view: (lambda *s: True, g.__code__))
    with pytest.raises(ValueError, match="2 argument slots positionally"):
        run_with(rec, f, 1)


def test_new_code_must_not_be_the_original_code():
    def f(a):
        return a

    rec = Recorder(f.__code__, lambda view: (lambda *s: True, f.__code__))
    with pytest.raises(ValueError, match="own code object"):
        run_with(rec, f, 1)
    assert C.get_code_state(f.__code__) == C.DEFAULT


def test_generators_and_coroutines_not_intercepted():
    def gen(a):
        yield a

    async def coro(a):
        return a

    rec_gen, rec_coro = Recorder(gen.__code__), Recorder(coro.__code__)
    assert run_with(rec_gen, lambda: list(gen(1))) == [1]
    c = coro(2)
    with pytest.raises(StopIteration):
        run_with(rec_coro, c.send, None)
    assert rec_gen.views == [] and rec_coro.views == []


def test_nested_frames_of_new_code_are_captured():
    def helper(v):
        return v + 1

    def f(a):
        return a if a else helper(a)  # same free variables as g

    def g(a):
        return helper(a)

    seen = []

    def cb(view):
        seen.append(view.f_code.co_name)
        if view.f_code is f.__code__:
            return (lambda *s: True, flat(g))
        return None

    assert run_with(cb, f, 1) == 2
    assert seen == ["f", "helper"]


def test_reset_code_inside_a_guard_is_a_miss():
    def f(a):
        return a

    def g(a):
        return a + 1

    def resetting_guard(a, f_globals, closure):
        C.reset_code(f.__code__)  # frees this very entry while it is being checked
        return True

    answers = iter([(resetting_guard, flat(g)), (lambda *s: True, flat(g))])
    rec = Recorder(f.__code__, lambda view: next(answers))
    with C.Capture(rec):
        assert f(1) == 2
        assert f(1) == 2  # guard resets the cache -> miss -> second answer
        assert f(1) == 2  # hit on the new entry
    assert len(rec.views) == 2
    assert len(C.get_cache_entries(f.__code__)) == 1


def test_truthiness_of_guard_results(monkeypatch):
    class BadBool:
        def __bool__(self):
            raise RuntimeError("no truth")

    def f(a):
        return "original"

    def g(a):
        return "new"

    reports = []
    monkeypatch.setattr(sys, "unraisablehook", reports.append)
    results = {"one": 1, "empty": [], "bad": BadBool()}
    rec = Recorder(f.__code__, lambda view: (lambda a, glb, c: results[a], flat(g)))
    with C.Capture(rec):
        for key in ("one", "one", "empty", "bad"):
            assert f(key) == "new"
    # "one" compiles then hits; "empty" and "bad" miss every entry and compile again.
    assert len(rec.views) == 3
    assert [r.exc_type for r in reports] == [RuntimeError] * 2


def test_many_arguments_and_recursion():
    def f(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, n):
        return n if n == 0 else f(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13,
                                  a14, a15, a16, a17, n - 1)

    def g(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, n):
        return 100 + a17 if n == 0 else f(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11,
                                          a12, a13, a14, a15, a16, a17, n - 1)

    seen = []

    def check(*args):
        seen.append(len(args))
        return True

    rec = Recorder(f.__code__, lambda view: (check, flat(g)))
    assert run_with(rec, f, *range(18), 5) == 117  # recursion goes through the cache
    assert len(rec.views) == 1 and seen == [21] * 5
    assert C.code_stats(f.__code__) == (5, 1)


def test_entries_die_with_their_code_object():
    ns = {}
    exec("def f(a):\n    return a + 1\n", ns)
    exec("def g(a):\n    return a + 2\n", ns)
    f = ns["f"]

    def check(a, f_globals, closure):
        return True

    rec = Recorder(f.__code__, lambda view: (check, flat(ns["g"])))
    assert run_with(rec, f, 1) == 3
    check_ref = weakref.ref(check)
    code_ref = weakref.ref(C.get_cache_entries(f.__code__)[0][1])
    del check, rec, f, ns["f"]
    gc.collect()
    assert check_ref() is None
    assert code_ref() is None


def test_discarded_exec_namespace_is_freed():
    """No uncollectable cycle globals -> f -> code -> entry -> shadow function -> globals."""

    def compile_in_fresh_namespace():
        ns = {}
        exec("def f(a):\n    return a + 1\ndef g(a):\n    return a + 2\n", ns)
        f = ns["f"]

        def check(a, f_globals, closure):
            return True

        rec = Recorder(f.__code__, lambda view: (check, flat(ns["g"])))
        assert run_with(rec, f, 1) == 3
        assert run_with(rec, f, 1) == 3  # a hit too
        return weakref.ref(check), weakref.ref(f), weakref.ref(rec)

    refs = compile_in_fresh_namespace()
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


def test_closure_contents_not_retained_after_call():
    class Big:
        pass

    def outer(big):
        def f(a):
            return (a, big)

        def g(a):
            return (-a, big)
        rec = Recorder(f.__code__, lambda view: (lambda *s: True, flat(g)))
        assert run_with(rec, f, 1) == (-1, big)
        assert run_with(rec, f, 2) == (-2, big)
        return f.__code__  # rec (whose answer holds g and so `big`) dies here

    big = Big()
    big_ref = weakref.ref(big)
    code = outer(big)
    del big
    gc.collect()
    assert big_ref() is None
    assert len(C.get_cache_entries(code)) == 1  # the cache outlives the closure
    C.reset_code(code)


def kept_functions(code):
    C.gc_release()  # (what a compile keeps is in no collector generation: csrc/gc_quiet.c)
    return [r for r in gc.get_referrers(code) if isinstance(r, types.FunctionType)]


def _module_level_f(a):
    return a


def _module_level_g(a):
    return -a


class _Obj:
    pass


def _resume_del(x):
    ref = weakref.ref(x)
    del x
    return ref() is None


def _resume_del_transformed(x):  # what a compiled resume function would run instead
    ref = weakref.ref(x)
    del x
    return ref() is None


def _tail_to_resume():  # transformed code ending at a graph break: the object only in the call
    return C.tail_call(_Obj(), _resume_del)


@pytest.mark.parametrize("compile_resume", [False, True])
def test_del_in_a_tail_called_frame_frees_the_argument(compile_resume):
    """The TailCall's argument tuple and, when the resume function's frame is intercepted, that
    frame's argument slots give their references up once the new frame has started: `del x`
    frees an object nobody else holds, as plain Python's call hands its arguments over."""
    def f():
        return None

    def cb(view):
        if view.f_code is f.__code__:
            return (lambda *s: True, _tail_to_resume.__code__)
        if compile_resume and view.f_code is _resume_del.__code__:
            return (lambda *s: True, _resume_del_transformed.__code__)
        return None

    try:
        assert run_with(cb, f) is True
        assert run_with(cb, f) is True  # cache hits
        assert len(C.get_cache_entries(_resume_del.__code__)) == int(compile_resume)
    finally:
        for code in (_resume_del.__code__, _tail_to_resume.__code__,
                     _resume_del_transformed.__code__):
            C.reset_code(code)


def test_shadow_frame_holds_the_only_frame_reference_to_its_arguments():
    """The intercepted frame never runs: its argument slots do not keep a second reference
    while the shadow frame runs (sys.getrefcount sees what the unmodified frame sees)."""
    def f(a, *args, **kwargs):
        return sys.getrefcount(a), sys.getrefcount(args), sys.getrefcount(kwargs)

    def g(a, args, kwargs):
        return sys.getrefcount(a), sys.getrefcount(args), sys.getrefcount(kwargs)

    def cb(view):  # (keeps no FrameView: a view holds the argument values)
        return (lambda *s: True, flat(g)) if view.f_code is f.__code__ else None

    obj = _Obj()
    plain = run_with(False, f, obj, 1, k=2)  # hook installed, nothing cached: f runs as is
    assert run_with(cb, f, obj, 1, k=2) == plain  # compiles
    assert run_with(cb, f, obj, 1, k=2) == plain  # cache hit
    assert len(C.get_cache_entries(f.__code__)) == 1


def test_shadow_function_kept_only_for_module_globals():
    code = _module_level_f.__code__
    new_code = flat(_module_level_g)
    rec = Recorder(code, lambda view: (lambda *s: True, new_code))
    try:
        assert run_with(rec, _module_level_f, 1) == -1
        assert run_with(rec, _module_level_f, 2) == -2
        assert vars(sys.modules[__name__]) is globals()  # pytest registers the module
        assert len(kept_functions(new_code)) == 1
    finally:
        C.reset_code(code)
    assert kept_functions(new_code) == []

    ns = {}
    exec("def f(a):\n    return a\n", ns)
    rec = Recorder(ns["f"].__code__, lambda view: (lambda *s: True, new_code))
    assert run_with(rec, ns["f"], 3) == -3
    assert kept_functions(new_code) == []


def test_argument_validation():
    with pytest.raises(TypeError, match="code object"):
        C.set_code_state(len, C.SKIP)
    with pytest.raises(ValueError, match="DEFAULT .0., SKIP .1. or RUN_ONLY .2."):
        C.set_code_state(test_argument_validation.__code__, 7)
    for fn in (C.get_code_state, C.get_cache_entries, C.reset_code, C.code_stats):
        with pytest.raises(TypeError, match="code object"):
            fn("nope")
    assert (C.DEFAULT, C.SKIP, C.RUN_ONLY) == (0, 1, 2)
    with pytest.raises(TypeError):
        C.FrameView()


# ---- threads and resources ----------------------------------------------------------------


def test_four_threads():
    """Threads share one cache; guards run while other threads reorder and extend it."""

    def f(a):
        return a + 1

    def g(a):
        return a * 2

    def guard_for(parity):
        def check(a, f_globals, closure):
            sum(range(50))  # a little Python work, so threads switch inside guards
            return a % 2 == parity
        return check

    errors, results = [], {}
    barrier = threading.Barrier(4)

    def worker(i):
        try:
            rec = Recorder(f.__code__, lambda view: (guard_for(view.args[0] % 2), flat(g)))
            barrier.wait()
            with C.Capture(rec):
                results[i] = [f(n) for n in range(3000)]
            assert C.get_eval_frame() is None
        except BaseException as exc:  # reported in the main thread
            errors.append(exc)

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old_interval)
    assert errors == []
    assert all(results[i] == [2 * n for n in range(3000)] for i in range(4))
    entries = C.get_cache_entries(f.__code__)
    assert 2 <= len(entries) <= 40  # spurious misses under contention are allowed, not growth
    hits, misses = C.code_stats(f.__code__)
    assert hits + misses == 4 * 3000


def test_other_threads_are_not_intercepted():
    def f(a):
        return a

    rec = Recorder(f.__code__)
    out = []
    with C.Capture(rec):
        t = threading.Thread(target=lambda: out.append((C.get_eval_frame(), f(1))))
        t.start()
        t.join()
    assert out == [(None, 1)] and rec.views == []


def test_no_memory_growth_over_100k_calls():
    def f(a, b):
        return a + b

    def g(a, b):
        return a - b

    def check(a, b, f_globals, closure):
        return a < 1_000_000_000

    rec = Recorder(f.__code__, lambda view: (check, flat(g)))

    def loop(n):
        for i in range(n):
            f(i, 1)

    with C.Capture(rec):
        loop(1000)  # warm up
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        loop(100_000)
        growth = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
    assert growth < 20_000, growth
    assert C.code_stats(f.__code__) == (100_999, 1)


# ---- entries belong to the callback that compiled them --------------------------------------


def test_entries_are_used_only_by_the_callback_that_compiled_them():
    def f(a):
        return a + 1

    def plus_two(a):
        return a + 2

    def plus_three(a):
        return a + 3

    def always(*args):
        return True

    first = Recorder(f.__code__, lambda view: (always, flat(plus_two)))
    second = Recorder(f.__code__, lambda view: (always, flat(plus_three)))
    try:
        assert run_with(first, f, 1) == 3
        assert run_with(second, f, 1) == 4  # first's entry is not used: second compiles
        assert run_with(first, f, 1) == 3 and run_with(second, f, 1) == 4  # both hit now
        assert len(first.views) == 1 and len(second.views) == 1
        assert len(C.get_cache_entries(f.__code__)) == 2
        assert [code.co_name for _, code in C.get_cache_entries(f.__code__, first)] == ["plus_two"]
        second_entries = C.get_cache_entries(f.__code__, second)
        assert [code.co_name for _, code in second_entries] == ["plus_three"]
        assert run_with(False, f, 1) == 4  # run-only mode uses any entry (most recent first)
    finally:
        C.reset_code(f.__code__)


# ---- issue 8: interrupts, hidden frames, dropping a callback's entries, the wrapper ----------


def test_keyboard_interrupt_in_guard_propagates_other_errors_do_not(monkeypatch):
    def f(a):
        return "original"

    def g(a):
        return "new"

    outcome = {"raise": None}

    def check(a, f_globals, closure):
        if outcome["raise"] is not None:
            raise outcome["raise"]
        return True

    reports = []
    monkeypatch.setattr(sys, "unraisablehook", reports.append)
    rec = Recorder(f.__code__, lambda view: (check, flat(g)))
    assert run_with(rec, f, 1) == "new"
    outcome["raise"] = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        run_with(rec, f, 1)
    assert reports == [] and len(rec.views) == 1
    outcome["raise"] = ValueError("bad guard")
    assert run_with(rec, f, 1) == "new"  # a failed guard: compiled again
    assert [r.exc_type for r in reports] == [ValueError] and len(rec.views) == 2


def _helper(a):
    return [][a]  # IndexError


def _hidden_runner(a):
    return _helper(a)


def test_hidden_frames_are_removed_from_tracebacks():
    def f(a):
        return a

    def g(a):
        return _hidden_runner(a)

    rec = Recorder(f.__code__, lambda view: (lambda *s: True, flat(g)))

    def names():
        try:
            run_with(rec, f, 1)
        except IndexError as exc:
            return [fr.name for fr in traceback.extract_tb(exc.__traceback__)]

    assert names()[-3:] == ["g", "_hidden_runner", "_helper"]
    C.set_code_hidden(_hidden_runner.__code__, True)
    try:
        assert C.get_code_hidden(_hidden_runner.__code__)
        assert names()[-2:] == ["g", "_helper"]
    finally:
        C.set_code_hidden(_hidden_runner.__code__, False)
        C.reset_code(f.__code__)


def test_drop_entries_of_one_callback():
    def f(a):
        return a

    def g(a):
        return -a

    first = Recorder(f.__code__, lambda view: (lambda *s: True, flat(g)))
    second = Recorder(f.__code__, lambda view: (lambda *s: True, flat(g)))
    run_with(first, f, 1)
    run_with(second, f, 1)
    assert len(C.get_cache_entries(f.__code__)) == 2
    C.drop_entries_of(f.__code__, id(first))
    assert C.get_cache_entries(f.__code__, first) == []
    assert len(C.get_cache_entries(f.__code__, second)) == 1
    C.reset_code(f.__code__)


def test_drop_owner_drops_one_callbacks_entries_of_every_code():
    def f(a):
        return a

    def h(a):
        return a

    def g(a):
        return -a

    class Owner:
        def __call__(self, view):
            return (lambda *s: True, flat(g)) if view.f_code in codes else None

    codes = (f.__code__, h.__code__)
    first, second = Owner(), Owner()
    for owner in (first, second):
        run_with(owner, f, 1)
        run_with(owner, h, 1)
    assert len(C.get_cache_entries(f.__code__)) == len(C.get_cache_entries(h.__code__)) == 2
    try:
        # (as a weakref callback calls it: the dead reference as a second argument)
        assert C.drop_owner(id(first), None) is None
        for code in codes:
            assert C.get_cache_entries(code, first) == []
            assert len(C.get_cache_entries(code, second)) == 1
        with pytest.raises(TypeError):
            C.drop_owner()
    finally:
        C.reset_code(f.__code__)
        C.reset_code(h.__code__)


def test_call_ignoring_ref_calls_without_the_last_argument():
    got = []
    assert C.call_ignoring_ref(got.append, 1, "the reference") is None
    assert C.call_ignoring_ref(got.extend, [2, 3], None) is None
    assert got == [1, 2, 3]
    assert C.call_ignoring_ref(int, "not a number", None) is None  # (an Exception: discarded)

    def interrupted():
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):  # (not an Exception: raised)
        C.call_ignoring_ref(interrupted, None)
    with pytest.raises(TypeError):
        C.call_ignoring_ref(got.append)


def test_compile_lock_is_held_until_the_entry_is_cached():
    def f(a):
        return a

    def g(a):
        return -a

    class Lock:
        def __init__(self):
            self.held = 0
            self.log = []

        def acquire(self):
            self.held += 1
            return True

        def release(self):
            self.log.append(("release", len(C.get_cache_entries(f.__code__))))
            self.held -= 1

    lock = Lock()
    previous = C.set_compile_lock(lock)
    try:
        def answer(view):
            lock.log.append(("callback", lock.held))
            return (lambda *s: True, flat(g))
        assert run_with(Recorder(f.__code__, answer), f, 1) == -1
    finally:
        assert C.set_compile_lock(previous) is lock
        C.reset_code(f.__code__)
    assert lock.log == [("callback", 1), ("release", 1)] and lock.held == 0
    with pytest.raises(TypeError, match="lock"):
        C.set_compile_lock(3)


def test_wrap_binds_like_a_function_and_restores_state():
    def cb(view):
        C.set_code_state(view.f_code, C.SKIP)

    class A:
        def method(self, a, *, k=0):
            return (self, a, k, C.get_eval_frame())

    scope = C.Capture(cb)
    A.wrapped = scope.wrap(A.method)
    obj = A()
    assert obj.wrapped(1, k=2) == (obj, 1, 2, cb)
    assert A.wrapped(obj, 1) == (obj, 1, 0, cb)
    with pytest.raises(ZeroDivisionError):
        scope.wrap(lambda: 1 / 0)()
    assert C.get_eval_frame() is None
    ref = weakref.ref(A.wrapped)
    del A.wrapped
    gc.collect()
    assert ref() is None
