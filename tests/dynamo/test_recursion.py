"""Deep recursion under capture behaves as in plain Python (issue 8, the C-hook items).

In: recursive functions run plainly and under capture (in a subprocess where a crash is
possible), compiled functions called deep in the stack, a backend that raises RecursionError.
Out: the same results and the same RecursionError as plain Python, at the same depth: with the
hook installed CPython 3.11 cannot inline Python calls, so each level costs C stack, and near
the end of it the hook steps out of the way (deep mode); a compile without headroom, or one
that ran out of it, is no permanent decision. Oracle: the same code without npdynamo.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dynamo
from dynamo import _C
from support.hooked import no_capture_leak  # noqa: F401 (an autouse fixture)
from support.subprocesses import run_python


def three_ops(x, y):
    return np.sin(x) * y + 1


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


# A recursion through C ------------------------------------------------------------------------


# A recursion through C (map) under a raised recursion limit: plain Python stops it with
# RecursionError when the C recursion budget runs out (3.12+); 3.10/3.11 plain die of SIGSEGV.
_C_RECURSION = """
import sys
import numpy as np
import dynamo
sys.setrecursionlimit(100000)

def f(x, n):
    return list(map(lambda v: f(v, n + 1), [x]))

try:
    if sys.argv[1:] == ["compiled"]:
        with dynamo.optimize("eager"):
            f(np.arange(3.0), 0)
    else:
        f(np.arange(3.0), 0)
except RecursionError:
    print("RecursionError")
"""


def _run(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(_C_RECURSION), mode],
                          capture_output=True, text=True, timeout=120)


def test_a_recursion_through_c_raises_recursion_error_as_plain_python():
    plain = _run("plain")
    if plain.returncode != 0:
        pytest.skip("plain Python itself overflows the C stack here (no C recursion budget)")
    assert "RecursionError" in plain.stdout
    compiled = _run("compiled")
    assert compiled.returncode == 0, compiled.stderr[-2000:]
    assert "RecursionError" in compiled.stdout
