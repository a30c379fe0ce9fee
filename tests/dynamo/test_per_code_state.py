"""npdynamo's decisions about code objects: no co_extra array, one decision per live code
object (issue 8, the C-hook items).

In: code objects that npdynamo skips, runs only, hides or compiles, with another co_extra user
registered through ctypes (in a subprocess: a wrong free call would crash), code objects that
die and are replaced at the same address, threads creating and dropping code. Out: another
co_extra user's free function is called only for its own slots; a new code object starts
undecided; ``dynamo.reset()`` forgets decisions. Oracle: the same code without npdynamo.
"""

from __future__ import annotations

import gc
import threading

import dynamo
from dynamo import _C
from support.hooked import no_capture_leak  # noqa: F401 (an autouse fixture)
from support.subprocesses import run_python


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
