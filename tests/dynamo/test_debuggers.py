"""A breakpoint in a compiled function must hit, and tracers see the plain program (issue 8,
the debugger item).

While a trace function is set, npdynamo runs the original bytecode: a `bdb` breakpoint on a line
of a function that is compiled and cached stops there, and ``pdb`` started inside a compiled
function (``breakpoint()``, or ``Pdb.set_trace`` on the caller's frame after the first graph ran:
the rest of the frame continues in the same frame, `_C.stay_in_frame`) stops at the next line
and sees the locals the graph computed. Once tracing stops, the compiled version runs again.
``sys.settrace``, ``sys.setprofile`` and a C tracer (``_testcapi``) record the events of the plain
program, and a trace function's exception propagates as in plain Python.
Oracle: the same function in plain Python; a backend counts the compiles and the graph runs.
"""

from __future__ import annotations

import bdb
import inspect
import io
import pdb
import sys

import numpy as np
import pytest

import dynamo
from dynamo import _C
from support.hooked import GraphRuns
from support.subprocesses import run_python


@pytest.fixture(autouse=True)
def _no_tracer_left_behind():
    assert sys.gettrace() is None and _C.get_eval_frame() is None
    yield
    sys.settrace(None)
    assert _C.get_eval_frame() is None, "a capture scope leaked"
    assert _C.hook_state()["active_scopes"] == 0


def line_of(fn, text: str) -> int:
    """The line number of the line of `fn` whose code is `text`."""
    lines, first = inspect.getsourcelines(fn)
    (offset,) = [i for i, line in enumerate(lines) if line.strip() == text]
    return first + offset


# ---- bdb: a breakpoint set on a line of a cached compiled function ----------------------------


def five_lines(x, y):
    a = np.sin(x) * y
    b = a + 1
    c = np.exp(b)
    return c - x


class LineRecorder(bdb.Bdb):
    """Records ``(function, line)`` at every stop and continues (to the next breakpoint)."""

    def __init__(self) -> None:
        super().__init__()
        self.stops: list[tuple[str, int]] = []

    def user_line(self, frame):
        self.stops.append((frame.f_code.co_name, frame.f_lineno))
        self.set_continue()


def test_a_bdb_breakpoint_in_a_compiled_cached_function_hits():
    x, y = np.linspace(0, 1, 5), np.full(5, 2.0)
    backend = GraphRuns()
    compiled = dynamo.compile(five_lines, backend=backend)
    compiled(x, y)
    compiled(x, y)
    assert backend.counts == (1, 2) and len(_C.get_cache_entries(five_lines.__code__)) == 1
    line = line_of(five_lines, "c = np.exp(b)")
    debugger = LineRecorder()
    debugger.set_break(__file__, line)
    try:
        result = debugger.runcall(compiled, x, y)
        (breakpoint_,) = debugger.get_breaks(__file__, line)
        assert breakpoint_.hits == 1
    finally:
        sys.settrace(None)
        debugger.clear_all_breaks()
    # (runcall's first stop is the function's first line; set_continue then runs to the break)
    assert debugger.stops == [("five_lines", line - 2), ("five_lines", line)]
    assert np.array_equal(result, five_lines(x, y))
    assert backend.counts == (1, 2), "the graph ran while the debugger traced the function"
    # Tracing stopped: the cached version runs again, nothing is compiled.
    assert np.array_equal(compiled(x, y), five_lines(x, y))
    assert backend.counts == (1, 3) and len(_C.get_cache_entries(five_lines.__code__)) == 1


# ---- pdb started inside a compiled function ---------------------------------------------------

#: The debugger the next `debug_point()` or ``breakpoint()`` starts (none: the call runs on).
DEBUGGERS: list[pdb.Pdb] = []


def _pdb_session(fn, *args, commands: str):
    """(result, what pdb printed) of ``fn(*args)``, a pdb that reads `commands` waiting for
    the function to start it."""
    out = io.StringIO()
    DEBUGGERS.append(pdb.Pdb(stdin=io.StringIO(commands), stdout=out, nosigint=True,
                             readrc=False))
    try:
        result = fn(*args)
    finally:
        sys.settrace(None)
        DEBUGGERS.clear()
    return result, out.getvalue()


def stop_if(x, stop):
    a = np.sin(x) * 2
    if stop:
        breakpoint()
    b = a + 1
    return np.cos(b) * 3


def test_breakpoint_in_a_compiled_function_stops_and_shows_its_locals(monkeypatch):
    """``breakpoint()`` in a branch the compiled version did not take: with it taken, pdb
    prints exactly what it prints in plain Python (a local, a step to the next line, the
    next local); the compiled version still runs for the other branch."""
    monkeypatch.setattr(sys, "breakpointhook", lambda: DEBUGGERS.pop().set_trace(
        sys._getframe(1)))
    x = np.arange(3.0)
    commands = "p a.tolist()\nn\np b.tolist()\nc\n"
    plain_result, plain_text = _pdb_session(stop_if, x, True, commands=commands)
    backend = GraphRuns()
    compiled = dynamo.compile(stop_if, backend=backend)
    expected = stop_if(x, False)
    for _ in range(2):
        assert np.array_equal(compiled(x, False), expected)
    assert backend.counts == (1, 2)
    result, text = _pdb_session(compiled, x, True, commands=commands)
    assert text == plain_text
    # (3.13+ stops at the breakpoint() line, older versions at the next one)
    assert "stop_if()" in text and str((np.sin(x) * 2).tolist()) in text
    assert np.array_equal(result, plain_result)
    compiles, runs = backend.counts
    assert np.array_equal(compiled(x, False), expected)
    assert backend.counts == (compiles, runs + 1)  # the compiled version, after the debugger


def debug_point():
    # (sys._getframe cannot be traced: the caller has a graph break here, after its first graph)
    caller = sys._getframe(1)
    if DEBUGGERS:
        DEBUGGERS.pop().set_trace(caller)


def two_graphs(x):
    a = np.sin(x) * 2
    debug_point()
    b = a + 1
    return np.cos(b) * 3


@pytest.mark.parametrize("first", [True, False], ids=["compiling_call", "cached_call"])
def test_pdb_started_after_the_first_graph_sees_the_rest_of_the_frame(first):
    """pdb started on the compiled function's frame after its first graph: it prints exactly
    what it prints in plain Python (the value the graph computed, then a step to the next
    line: the rest of the frame runs in the same frame, traced, `_C.stay_in_frame`), and the
    call returns the plain result. Afterwards both graphs run again."""
    x = np.arange(3.0)
    commands = "p a.tolist()\nn\np b.tolist()\nc\n"
    plain_result, plain_text = _pdb_session(two_graphs, x, commands=commands)
    backend = GraphRuns()
    compiled = dynamo.compile(two_graphs, backend=backend)
    if not first:
        assert np.array_equal(compiled(x), plain_result)
        assert backend.counts == (2, 2)  # the graph before the break, and the resume function's
    result, text = _pdb_session(compiled, x, commands=commands)
    assert text == plain_text
    # (3.13+ stops at the debug_point() line and steps to the next, older versions stop at
    # the next line and step to the return)
    assert f"({line_of(two_graphs, 'b = a + 1')})two_graphs()" in text
    assert str((np.sin(x) * 2).tolist()) in text
    assert np.array_equal(result, plain_result)
    # The first graph ran; the rest of the frame ran as written (no second graph).
    assert backend.counts == ((1, 1) if first else (2, 3))
    for _ in range(2):
        assert np.array_equal(compiled(x), plain_result)
    assert backend.counts == (2, (1 if first else 3) + 2 * 2)  # both graphs, on both calls
    assert len(_C.get_cache_entries(two_graphs.__code__)) == 1


# Tracers and profilers see the plain program ----------------------------------------------------


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
