"""npdynamo must never crash and never change the program (issue 8, the C-hook items).

Each test runs a program in plain Python and under capture and asserts that nothing beside
npdynamo can tell the difference: other co_extra users, deep recursion, threads compiling at
once, debuggers/profilers/coverage (sys.settrace, sys.setprofile, C tracers), tracebacks,
KeyboardInterrupt, threads and asyncio tasks sharing capture scopes, and the lifetime of user
backends. Crashes are tested in a subprocess. Oracle: the same code without npdynamo.
"""

from __future__ import annotations

import asyncio
import gc
import operator
import subprocess
import sys
import textwrap
import threading
import traceback
import warnings

import numpy as np
import pytest

import dynamo
from dynamo import _C, convert_frame, eval_frame
from support.hooked import no_capture_leak  # noqa: F401 (an autouse fixture)


def run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout)


def three_ops(x, y):
    return np.sin(x) * y + 1


# ---- other co_extra users ------------------------------------------------------------------


def test_another_co_extra_user_does_not_crash():
    """Another extension's co_extra slot on a code object dies with it undisturbed (npdynamo
    once kept its own state in co_extra; CPython then called our free function with NULL)."""
    proc = run_python("""
        import ctypes, gc
        import dynamo
        api = ctypes.pythonapi
        try:
            REQ, SET = api.PyUnstable_Eval_RequestCodeExtraIndex, api.PyUnstable_Code_SetExtra
        except AttributeError:  # CPython < 3.12: the same functions under their old names
            REQ, SET = api._PyEval_RequestCodeExtraIndex, api._PyCode_SetExtra
        REQ.argtypes = [ctypes.c_void_p]
        REQ.restype = ctypes.c_ssize_t
        SET.argtypes = [ctypes.py_object, ctypes.c_ssize_t, ctypes.c_void_p]
        index = REQ(None)
        ns = {}
        exec("f = lambda: 0", ns)
        f = ns.pop("f")
        assert SET(f.__code__, index, 1234) == 0
        del f, ns
        gc.collect()
        print("survived")
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "survived"


# Another co_extra user (as CPython's test_code is one), registered through ctypes before
# anything is captured: its free function records every pointer it is called with.  CPython
# calls it for every dying code object that has a co_extra array at all (with NULL when the
# array exists for someone else's slot), so a NULL call means npdynamo gave that code object an
# array (npdynamo keeps its per-code state in a table of its own, csrc/cache.h).
_OTHER_CO_EXTRA_USER = """
    import ctypes, gc
    import numpy as np
    import dynamo
    from dynamo import _C
    freed = []
    freefunc = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    FREE = freefunc(freed.append)
    api = ctypes.pythonapi
    try:
        REQ, SET = api.PyUnstable_Eval_RequestCodeExtraIndex, api.PyUnstable_Code_SetExtra
    except AttributeError:  # CPython < 3.12: the same functions under their old names
        REQ, SET = api._PyEval_RequestCodeExtraIndex, api._PyCode_SetExtra
    REQ.argtypes = [freefunc]
    REQ.restype = ctypes.c_ssize_t
    SET.argtypes = [ctypes.py_object, ctypes.c_ssize_t, ctypes.c_void_p]
    index = REQ(FREE)

    def fresh(source):
        ns = {"np": np}
        exec(source, ns)
        return ns["f"]
"""


def test_npdynamo_gives_no_code_object_a_co_extra_array():
    """Neither code npdynamo only decides about (skipped: nothing to compile; run-only; hidden)
    nor code with compiled entries gets a co_extra array from npdynamo, so another co_extra
    user's free function is only ever called for the slots it set itself.  Control: a code
    object whose array exists for a third user's slot does call it with NULL."""
    proc = run_python(_OTHER_CO_EXTRA_USER + """
    plain = fresh("def f(a):\\n    return a + 1\\n")
    with dynamo.optimize("eager"):
        for i in range(3):
            plain(i)
    assert _C.get_code_state(plain.__code__) == _C.SKIP
    assert _C.code_stats(plain.__code__) == (0, 1)
    marked = [fresh("def f():\\n    return %d\\n" % i) for i in range(3)]
    _C.set_code_state(marked[0].__code__, _C.RUN_ONLY)
    _C.set_code_hidden(marked[1].__code__, True)
    _C.set_code_state(marked[2].__code__, _C.SKIP)
    assert [_C.get_code_state(m.__code__) for m in marked] == [_C.RUN_ONLY, 0, _C.SKIP]
    assert _C.get_code_hidden(marked[1].__code__)
    own = fresh("def f(a):\\n    return a - 1\\n")
    assert SET(own.__code__, index, 77) == 0
    with dynamo.optimize("eager"):
        own(1)
    del plain, marked, own
    gc.collect()
    print("skipped", freed)
    compiled = fresh("def f(a):\\n    return np.sin(a) * 2\\n")
    with dynamo.optimize("eager"):
        for i in range(3):
            compiled(np.ones(3))
    assert len(dynamo.cache_entries(compiled)) == 1
    assert _C.code_stats(compiled.__code__) == (2, 1)
    del compiled
    gc.collect()
    print("compiled", freed)
    THIRD_FREE = freefunc(lambda p: None)
    third = REQ(THIRD_FREE)
    other = fresh("def f():\\n    return 0\\n")
    assert SET(other.__code__, third, 5) == 0
    del other
    gc.collect()
    print("control", freed)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["skipped [77]", "compiled [77]", "control [77, None]"], \
        proc.stderr


def test_free_function_of_another_co_extra_user_seen_by_npdynamo_exits_cleanly():
    """CPython's test_code: a co_extra free function written in Python (a ctypes thunk) whose
    own code runs under capture.  Its code dies at interpreter teardown after the thunk is
    half freed; had npdynamo given it a co_extra array, CPython would call the thunk then."""
    proc = run_python(_OTHER_CO_EXTRA_USER + """
    def myfree(ptr):
        pass
    MYFREE = freefunc(myfree)
    REQ(MYFREE)
    with dynamo.optimize("eager"):
        myfree(None)
        fresh("def f(a):\\n    return a\\n")(1)
    print("done")
    """)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "done"


def test_a_new_code_object_at_a_dead_ones_address_starts_undecided():
    """Decisions about code without a co_extra array are kept by address: one about a dead
    code object must not apply to a new code object the allocator puts at the same address."""
    base = compile("def f(a):\n    return a + 1\n", "<reuse>", "exec").co_consts[0]
    reused = 0
    for i in range(200):
        code = base.replace(co_name=f"f{i % 7}")
        address = id(code)
        assert _C.get_code_state(code) == _C.DEFAULT, "inherited a dead code's decision"
        assert _C.code_stats(code) == (0, 0) and not _C.get_code_hidden(code)
        _C.set_code_state(code, (_C.SKIP, _C.RUN_ONLY)[i % 2])
        _C.set_code_hidden(code, True)
        del code
        probe = base.replace(co_name="probe")
        reused += id(probe) == address
        assert _C.get_code_state(probe) == _C.DEFAULT, "inherited a dead code's decision"
        del probe
    assert reused > 0, "the allocator never reused an address: the test proves nothing"


def test_decisions_of_many_threads_creating_and_dropping_code():
    """The table of decisions is shared by all threads and shrinks as code objects die (from
    any thread, also inside the cycle collector): decisions stay per code object."""
    errors = []

    def work(seed):
        try:
            for i in range(300):
                ns = {}
                exec(f"def f(a):\n    return a + {seed * 1000 + i}\n", ns)
                f = ns["f"]
                if _C.get_code_state(f.__code__) != _C.DEFAULT:
                    errors.append((seed, i, "inherited a dead code's decision"))
                with dynamo.optimize("eager"):
                    assert f(1) == 1 + seed * 1000 + i
                if _C.get_code_state(f.__code__) != _C.SKIP:
                    errors.append((seed, i, _C.get_code_state(f.__code__)))
                cycle = [f]
                cycle.append(cycle)
                del f, ns, cycle
                if i % 50 == 0:
                    gc.collect()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_reset_forgets_decisions_about_code_without_entries():
    ns = {}
    exec("def f(a):\n    return a + 1\n", ns)
    f = ns["f"]
    with dynamo.optimize("eager"):
        f(1)
    assert _C.get_code_state(f.__code__) == _C.SKIP
    assert _C.code_stats(f.__code__) == (0, 1)
    dynamo.reset()
    assert _C.get_code_state(f.__code__) == _C.DEFAULT
    assert _C.code_stats(f.__code__) == (0, 0)


# ---- recursion -----------------------------------------------------------------------------


def test_deep_recursion_under_capture_returns_like_plain_python():
    """With the hook installed CPython 3.11 cannot inline Python calls, so each level costs C
    stack; near the end of the C stack the hook steps out of the way (deep mode)."""
    proc = run_python("""
        import sys, threading
        import numpy as np
        import dynamo
        sys.setrecursionlimit(100000)
        # CPython 3.10 never inlines Python calls: plain Python itself overflows an 8 MiB C
        # stack near 20000 levels there; under capture 3.10 reaches about 18,400 levels
        # (docs/python_versions.md).
        N, N_NP = (25000, 20000) if sys.version_info >= (3, 11) else (17000, 15000)

        def r(n):
            return 0 if n == 0 else 1 + r(n - 1)

        def r_np(x, n):
            return x if n == 0 else r_np(x, n - 1) + 1

        assert r(N) == N
        assert int(r_np(np.zeros(2), N_NP)[0]) == N_NP
        with dynamo.optimize("eager"):
            print(r(N) == N)
            print(int(r_np(np.zeros(2), N_NP)[0]) == N_NP)
        # A thread that never asked for capture, while another thread keeps the hook installed.
        inside, done = threading.Event(), threading.Event()
        def hold():
            with dynamo.optimize("eager"):
                inside.set()
                done.wait(60)
        t = threading.Thread(target=hold)
        t.start()
        inside.wait(60)
        print(r(N) == N)
        done.set()
        t.join()
        print(dynamo._C.hook_state())
    """)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.split("\n")
    assert lines[:3] == ["True", "True", "True"]
    assert lines[3] == "{'installed': False, 'active_scopes': 0, 'deep_runs': 0}"


def _outcome_at_depth(fn, depth, *args):
    """Call fn(*args) with `depth` extra frames on the stack: its value or the exception type."""
    def down(k):
        return fn(*args) if k == 0 else down(k - 1)
    try:
        return down(depth)
    except RecursionError:
        return RecursionError


def _depth_limit(fn, *args):
    """The smallest stack depth at which fn(*args) raises RecursionError in plain Python."""
    lo, hi = 0, sys.getrecursionlimit()
    while lo < hi:
        mid = (lo + hi) // 2
        if _outcome_at_depth(fn, mid, *args) is RecursionError:
            hi = mid
        else:
            lo = mid + 1
    return lo


def test_compiled_calls_need_no_more_recursion_headroom_than_plain_ones():
    x = np.ones(3)
    limit = _depth_limit(three_ops, x, x)
    compiled = dynamo.compile(three_ops)
    compiled(x, x)  # compiled and cached at a shallow depth
    for depth in (limit - 3, limit - 1):
        assert np.array_equal(_outcome_at_depth(compiled, depth, x, x), three_ops(x, x))
    assert _outcome_at_depth(compiled, limit + 2, x, x) is RecursionError
    assert len(_C.get_cache_entries(three_ops.__code__)) == 1


def test_no_compile_without_headroom_and_no_permanent_decision():
    def f(x):
        return np.cos(x) + 2

    x = np.ones(3)
    compiled = dynamo.compile(f)
    # Deep in the stack: runs plainly, not compiled, not marked.
    assert np.array_equal(_outcome_at_depth(compiled, sys.getrecursionlimit() - 120, x), f(x))
    assert _C.get_cache_entries(f.__code__) == []
    assert _C.get_code_state(f.__code__) == _C.DEFAULT
    with _no_warnings():
        assert np.array_equal(compiled(x), f(x))  # with room: compiled now
    assert len(_C.get_cache_entries(f.__code__)) == 1


class _no_warnings:
    def __enter__(self):
        import warnings
        self._cm = warnings.catch_warnings(record=True)
        self.caught = self._cm.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self._cm.__exit__(*exc)
        assert [str(w.message) for w in self.caught] == []


def test_recursion_error_while_compiling_is_not_permanent(monkeypatch):
    def f(x):
        return np.tan(x) - 1

    calls = []

    def deep_backend(gm, example_inputs):
        calls.append(1)
        if len(calls) == 1:
            raise RecursionError("maximum recursion depth exceeded (simulated)")
        return gm.forward

    x = np.ones(3)
    compiled = dynamo.compile(f, backend=deep_backend)
    with _no_warnings():
        assert np.array_equal(compiled(x), f(x))  # compile failed: ran plainly, no warning
    assert _C.get_code_state(f.__code__) == _C.DEFAULT
    assert np.array_equal(compiled(x), f(x))  # tried again, compiled
    assert len(calls) == 2 and len(_C.get_cache_entries(f.__code__)) == 1


# ---- threads compiling the same function ------------------------------------------------------


def test_two_threads_compiling_one_version_keep_one_entry():
    """The C hook holds the compile lock from before the callback until the new entry is in the
    cache, and the callback re-checks the cache under that lock: a thread that missed the cache
    while another compiled the same version finds it and compiles nothing. The interleaving is
    forced: thread B's cache lookup misses while thread A's backend runs (A holds the lock), and
    A's backend returns only once B has asked the hook's lock (a spy installed with
    `_C.set_compile_lock`), so B's callback runs after A's entry is cached."""
    real_lock = convert_frame.compile_lock
    a_compiling, b_at_the_lock = threading.Event(), threading.Event()
    thread_a = threading.current_thread()

    class SpyLock:
        def acquire(self, *args):
            if threading.current_thread().name == "B":
                b_at_the_lock.set()
            return real_lock.acquire(*args)

        def release(self):
            real_lock.release()

    compiles, waited = [], []

    def backend(gm, example_inputs):
        compiles.append(threading.current_thread().name)
        if threading.current_thread() is thread_a:
            a_compiling.set()
            waited.append(b_at_the_lock.wait(30))
        return gm.forward

    def f(x):
        return np.sqrt(x) * 3

    compiled = dynamo.compile(f, backend=backend)
    x = np.ones(4)
    results = []

    def thread_b():
        if a_compiling.wait(30):
            results.append(compiled(x))

    b = threading.Thread(target=thread_b, name="B")
    previous = _C.set_compile_lock(SpyLock())
    try:
        b.start()
        results.append(compiled(x))
        b.join(60)
    finally:
        _C.set_compile_lock(previous)
    assert previous is real_lock and not b.is_alive()
    assert waited == [True], "thread B never reached the compile lock while A compiled"
    assert len(results) == 2 and all(np.array_equal(r, f(x)) for r in results)
    assert (compiles, len(_C.get_cache_entries(f.__code__))) == ([thread_a.name], 1)
    assert np.array_equal(compiled(x), f(x)) and compiles == [thread_a.name]  # a cache hit


# ---- tracers and profilers -----------------------------------------------------------------


def _traced(fn, *args, kind="trace"):
    events = []

    def tracer(frame, event, arg):
        events.append((event, frame.f_code.co_name, frame.f_lineno))
        return tracer

    setter = sys.settrace if kind == "trace" else sys.setprofile
    setter(tracer)
    try:
        result = fn(*args)
    finally:
        setter(None)
    return result, [e for e in events if e[1] not in ("_traced",)]


def five_lines(x, y):
    a = np.sin(x) * y
    b = a + 1
    c = np.exp(b)
    return c - x


@pytest.mark.parametrize("kind", ["trace", "profile"])
def test_tracers_see_the_plain_program(kind):
    x, y = np.ones(4), np.full(4, 2.0)
    plain_result, plain_events = _traced(five_lines, x, y, kind=kind)
    compiled = dynamo.compile(five_lines)
    # First call under the tracer (would compile), then a call after a compile (would hit).
    for _ in range(2):
        result, events = _traced(compiled, x, y, kind=kind)
        assert np.array_equal(result, plain_result)
        assert [e for e in events if e[0] != "c_call" and e[0] != "c_return"] == \
            [e for e in plain_events if e[0] != "c_call" and e[0] != "c_return"]
        assert events == plain_events
        compiled(x, y)
    assert len(_C.get_cache_entries(five_lines.__code__)) == 1  # compiled when not traced


def test_trace_function_exceptions_propagate_like_plain_python():
    def tracer(frame, event, arg):
        if event == "line" and frame.f_code is five_lines.__code__ and frame.f_lineno == \
                five_lines.__code__.co_firstlineno + 2:
            raise ValueError("from the tracer")
        return tracer

    compiled = dynamo.compile(five_lines)
    for fn in (five_lines, compiled):
        sys.settrace(tracer)
        try:
            with pytest.raises(ValueError, match="from the tracer"):
                fn(np.ones(2), np.ones(2))
        finally:
            sys.settrace(None)


def test_c_tracer_does_not_crash():
    _testcapi = pytest.importorskip("_testcapi")
    if not hasattr(_testcapi, "settrace_to_record"):
        pytest.skip("_testcapi.settrace_to_record is new in CPython 3.11")
    proc = run_python("""
        import _testcapi, sys
        import numpy as np
        import dynamo

        def f(x, y):
            a = np.sin(x) * y
            return a + 1

        def record(fn):
            events = []
            _testcapi.settrace_to_record(events)
            fn(np.ones(3), np.ones(3))
            sys.settrace(None)
            return [(what, line) for what, line, arg in events]

        plain = record(f)
        compiled = dynamo.compile(f)
        print(record(compiled) == plain)
        compiled(np.ones(3), np.ones(3))
        print(record(compiled) == plain)
    """)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["True", "True"]


# ---- object lifetime ---------------------------------------------------------------------------

_LIFETIME_PROGRAM = """
    import sys, weakref
    import numpy as np
    import dynamo

    class Obj:
        pass

    class Breaker:  # reading an attribute of one is a graph break
        def __getattribute__(self, name):
            return object.__getattribute__(self, name)

    B = Breaker()
    B.x = 1

    def across_a_break(x):
        y = np.sin(x)
        obj = Obj()
        ref = weakref.ref(obj)
        B.x
        del obj
        return ref() is None, float(y.sum())

    def across_two_breaks(x):
        obj = Obj()
        obj.v = 5
        ref = weakref.ref(obj)
        y = np.cos(x)
        B.x
        z = y + obj.v
        B.x
        v = obj.v
        del obj
        return ref() is None, v, float(z.sum())

    def cell_across_a_break(x):
        obj = Obj()
        ref = weakref.ref(obj)
        def get():
            return obj
        y = np.sin(x)
        B.x
        seen = get() is not None
        del obj
        return ref() is None, seen, float(y.sum())

    def still_held(x):
        obj = Obj()
        keep = [obj]
        ref = weakref.ref(obj)
        y = np.sin(x)
        B.x
        del obj
        return ref() is keep[0], float(y.sum())

    def argument_deleted(x, obj):
        y = np.sin(x)
        B.x
        del obj
        return float(y.sum())

    def run(compile):
        out = []
        for fn in (across_a_break, across_two_breaks, cell_across_a_break, still_held):
            f = dynamo.compile(fn) if compile else fn
            out += [f(np.ones(3)), f(np.ones(3))]  # compiles, then hits
        f = dynamo.compile(argument_deleted) if compile else argument_deleted
        out.append(f(np.ones(3), Obj()))
        return out

    plain, compiled = run(False), run(True)
    print(plain == compiled, all(r[0] is True for r in plain[:8]))
    print(compiled)
"""


def test_del_after_a_graph_break_frees_the_object():
    """`del obj` after a graph break frees obj when nothing else holds it, as in plain Python:
    neither the tail call's arguments nor the intercepted frames' argument slots nor the
    transformed frame's slot of the deleted variable keep it alive (issue 8)."""
    proc = run_python(_LIFETIME_PROGRAM)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[0] == "True True", proc.stdout


# ---- tracebacks ------------------------------------------------------------------------------


def singular(x):
    a = x * 0.0
    b = a + 1.0
    return np.linalg.inv(b * 0.0)


def out_of_bounds(x, i):
    y = x + 1.0
    return y[i] * 2  # i is an index array: out of bounds is found when the graph runs


def _frames(fn, *args):
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - comparing whatever plain Python raises
        return type(exc), [(f.name, f.filename, f.lineno)
                           for f in traceback.extract_tb(exc.__traceback__)[1:]]
    raise AssertionError("no exception")


def _c_backend():
    from dynamo.backends.c import make_backend
    return make_backend(min_size=0, calibrate=False)


@pytest.mark.parametrize("backend", ["eager", "c"])
@pytest.mark.parametrize("fn, args", [(singular, (np.ones((2, 2)),)),
                                      (out_of_bounds, (np.ones(3), np.array([0, 7])))])
def test_tracebacks_show_the_users_frames(backend, fn, args):
    expected = _frames(fn, *args)
    compiled = dynamo.compile(fn, backend=_c_backend() if backend == "c" else backend)
    assert _frames(compiled, *args) == expected  # compiles
    assert _frames(compiled, *args) == expected  # cache hit
    assert _C.get_cache_entries(fn.__code__)


# ---- KeyboardInterrupt -------------------------------------------------------------------------


def test_keyboard_interrupt_at_any_point_leaves_no_capture_behind():
    """Raise KeyboardInterrupt at the n-th trace event of a compiled call and of a `with`
    block, for every n: the interrupt reaches the caller and capture is off afterwards."""
    compiled = dynamo.compile(three_ops)
    x = np.ones(3)
    compiled(x, x)

    def interrupting(n):
        count = [0]

        def tracer(frame, event, arg):
            # Only at calls and returns, where a signal handler can run too (CPython also
            # skips __exit__ when a *line* event between a with body and its exit raises).
            if event in ("call", "return"):
                count[0] += 1
                if count[0] == n:
                    raise KeyboardInterrupt
            return tracer
        return tracer

    def with_block():
        with dynamo.optimize("eager"):
            three_ops(x, x)

    gc.collect()
    gc.disable()  # no finalizer may run (and be interrupted) under the tracer
    try:
        _interrupt_each_event(interrupting, (lambda: compiled(x, x), with_block))
    finally:
        gc.enable()


def _interrupt_each_event(interrupting, programs):
    for program in programs:
        for n in range(1, 40):
            sys.settrace(interrupting(n))
            try:
                program()
            except KeyboardInterrupt:
                pass
            finally:
                sys.settrace(None)
            assert _C.get_eval_frame() is None, n
            assert _C.hook_state()["active_scopes"] == 0, n


def test_keyboard_interrupt_in_a_guard_reaches_the_user(monkeypatch):
    """The guard reads ``___globals['np']``; with a dict subclass as globals that read runs
    user code, here raising KeyboardInterrupt once. It must reach the caller, not be printed as
    "Exception ignored" and treated as a failed guard."""

    class ArmedGlobals(dict):
        armed = False

        def __getitem__(self, key):
            if ArmedGlobals.armed:
                ArmedGlobals.armed = False
                raise KeyboardInterrupt
            return dict.__getitem__(self, key)

    namespace = ArmedGlobals(np=np)
    exec("def f(x):\n    return np.sin(x) * 2\n", namespace)
    f = namespace["f"]
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    compiled = dynamo.compile(f)
    x = np.ones(3)
    assert np.array_equal(compiled(x), np.sin(x) * 2)
    assert len(_C.get_cache_entries(f.__code__)) == 1
    ArmedGlobals.armed = True
    with pytest.raises(KeyboardInterrupt):
        compiled(x)
    assert unraisable == []
    assert np.array_equal(compiled(x), np.sin(x) * 2)


# ---- capture state per thread and per task ------------------------------------------------------


def test_one_optimize_object_entered_by_two_threads():
    context = dynamo.optimize("eager")
    callback = context.callback
    steps = [threading.Event() for _ in range(4)]
    seen = {}

    def first():
        with dynamo.run():  # this thread's state before entering `context`: run-only (False)
            with context:
                steps[0].set()
                steps[1].wait(30)
                seen["first inside"] = _C.get_eval_frame()
            seen["first after"] = _C.get_eval_frame()
            steps[2].set()

    def second():
        steps[0].wait(30)
        with context:
            steps[1].set()
            steps[2].wait(30)  # the first thread has left its block meanwhile
            seen["second inside"] = _C.get_eval_frame()
        seen["second after"] = _C.get_eval_frame()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"first inside": callback, "first after": False,
                    "second inside": callback, "second after": None}
    assert _C.hook_state() == {"installed": False, "active_scopes": 0, "deep_runs": 0}


def test_interleaved_asyncio_tasks_keep_their_own_capture_state():
    context = dynamo.optimize("eager")
    seen = []

    async def captured():
        with context:
            seen.append(("captured", _C.get_eval_frame() is context.callback))
            await asyncio.sleep(0)
            seen.append(("captured", _C.get_eval_frame() is context.callback))
            await asyncio.sleep(0)
        seen.append(("captured after", _C.get_eval_frame() is None))

    async def disabled():
        with dynamo.disable():
            seen.append(("disabled", _C.get_eval_frame() is None))
            await asyncio.sleep(0)
            seen.append(("disabled", _C.get_eval_frame() is None))
        seen.append(("disabled after", _C.get_eval_frame() is None))

    async def main():
        await asyncio.gather(captured(), disabled())

    asyncio.run(main())
    assert all(ok for _, ok in seen) and len(seen) == 6
    assert _C.get_eval_frame() is None
    assert _C.hook_state() == {"installed": False, "active_scopes": 0, "deep_runs": 0}


def test_task_created_outside_a_scope_is_not_captured():
    context = dynamo.optimize("eager")
    seen = []

    async def worker():
        seen.append(_C.get_eval_frame())

    async def main():
        with context:
            pass
        task = asyncio.ensure_future(worker())
        with context:
            await task  # the worker runs now, in its own context
        with context:
            inner = asyncio.ensure_future(worker())
        await inner  # created inside: starts with the scope's callback (contextvars)

    asyncio.run(main())
    assert seen == [None, context.callback]


# ---- backend lifetime ------------------------------------------------------------------------


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


# ---- the wrapper is a C callable: it still behaves like the function it wraps -------------------


@dynamo.compile
def compiled_at_module_level(x, scale=2.0):
    """Doc of the wrapped function."""
    return np.sin(x) * scale


class _Holder:
    @dynamo.compile
    def method(self, x):
        return np.cos(x) + 1


def test_wrapper_pickles_binds_and_describes_like_the_function():
    import copy
    import inspect
    import pickle

    x = np.ones(3)
    assert pickle.loads(pickle.dumps(compiled_at_module_level)) is compiled_at_module_level
    assert copy.deepcopy(compiled_at_module_level) is compiled_at_module_level
    assert compiled_at_module_level.__name__ == "compiled_at_module_level"
    assert compiled_at_module_level.__doc__ == "Doc of the wrapped function."
    assert str(inspect.signature(compiled_at_module_level)) == "(x, scale=2.0)"
    assert np.array_equal(compiled_at_module_level(x, scale=3.0), np.sin(x) * 3.0)
    assert np.array_equal(_Holder().method(x), np.cos(x) + 1)
    assert np.array_equal(_Holder.method(_Holder(), x), np.cos(x) + 1)


# ---- compiling touches no process-wide state other threads depend on -----------------------


def _constant_graph():
    from fx import Graph

    g = Graph()
    x = g.placeholder("x")
    nodes = {
        "sqrt": g.call_function(np.sqrt, (np.float64(4.0),)),
        "mul": g.call_function(operator.mul, (np.float32(1.5), 2)),
        "log0": g.call_function(np.log, (np.float64(0.0),)),           # divide-by-zero warning
        "overflow": g.call_function(operator.mul, (np.float64(1e308), 10)),  # overflow warning
        "mean": g.call_function(np.mean, ([],)),                      # "Mean of empty slice"
        "pyfunc": g.call_function(np.frompyfunc(lambda a: a, 1, 1), (1.0,)),  # runs Python
    }
    total = x
    for node in nodes.values():
        total = g.call_function(np.add, (total, node))
    g.output(total)
    return g, nodes


def test_constant_folding_uses_no_process_wide_warning_state():
    """`warnings.catch_warnings` swaps the module-global warning filters: another thread that
    warns meanwhile would see its warning raised or lost.  Folding must learn whether a constant
    warns without it (NumPy's floating-point error state is per thread)."""
    from fx.passes.constant_fold import fold_constants

    g, nodes = _constant_graph()
    warnings_calls = []

    def profiler(frame, event, arg):
        if event == "call" and frame.f_code.co_filename == warnings.__file__:
            warnings_calls.append(frame.f_code.co_name)

    filters = list(warnings.filters)
    errstate = np.geterr()
    with warnings.catch_warnings(record=True) as seen, np.errstate(all="ignore"):
        warnings.simplefilter("always")
        sys.setprofile(profiler)
        try:
            folded = fold_constants(g)
        finally:
            sys.setprofile(None)
    assert warnings_calls == []
    assert seen == []  # nothing warned at compile time
    assert warnings.filters == filters and np.geterr() == errstate
    # Folded: the two that cannot warn (even though the caller ignores floating-point errors,
    # a node that would warn is kept so it warns at run time as in eager).
    assert folded == 2
    remaining = {n for n in g.nodes}
    assert [k for k, n in nodes.items() if n in remaining] == ["log0", "overflow", "mean",
                                                                "pyfunc"]


def _inverse(a):
    return np.linalg.inv(a)


def inverts_after_ops(x):
    y = x * 2.0
    z = y + 1.0
    w = _inverse(z - 1.0) * 3.0
    return w + z


def divides_under_raise(x):
    y = x - 1.0
    with np.errstate(divide="raise"):
        z = 1.0 / y
    return z


@pytest.mark.parametrize("fn, make", [
    (inverts_after_ops, lambda: np.ones((2, 2))),  # LinAlgError from numpy.linalg.inv
    (divides_under_raise, lambda: np.array([1.0, 2.0])),  # FloatingPointError
], ids=["linalg_error", "errstate_raise"])
@pytest.mark.parametrize("backend", ["eager", "c"])
def test_an_exception_inside_a_graph_shows_the_line_that_raised(fn, make, backend):
    # The frame's traceback entry had the line where tracing ended (the return), not the
    # statement whose NumPy call raised inside the graph.
    def entries(f):
        with pytest.raises(Exception) as info:
            f(make())
        return [(e.name, e.line) for e in traceback.extract_tb(info.value.__traceback__)
                if e.name == fn.__name__]

    expected = entries(fn)
    assert entries(dynamo.compile(fn, backend=backend)) == expected
