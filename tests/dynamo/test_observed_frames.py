"""A frame that is observable at a graph break runs the rest of its function itself.

Normally the rest of a function after a graph break runs in a resume function, a frame of its
own that takes the first frame's place. That is invisible unless something holds the first
frame's object: a frame taken with ``sys._getframe()`` or from a traceback, a callee frame's
``f_back``, or a tracer started at the break. Then, at the break, the transformed code asks
``_C.stay_in_frame()`` and continues in an inline copy of the rest of the original bytecode,
in the same frame, as plain Python does (dynamo/codegen.py `_stay`, `_emit_rest`;
resume.rest_of_code). Plain Python is the oracle throughout.
"""

from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import pytest

import dynamo
from dynamo import _C
from support.tracing import line_events, settrace_and_raise


def compiled(fn):
    return dynamo.compile(fn, backend="eager")


def graphs(fn, *args) -> int:
    return dynamo.explain(fn)(*args).graph_count


def assert_split(fn, *args) -> None:
    """`fn` is captured with a graph break (a function that names its own frame's attributes,
    ``frame.f_lineno``, is never split: these tests read them through helpers)."""
    out = dynamo.explain(fn)(*args)
    assert out.graph_break_count >= 1, out
    dynamo.reset()


def _escape():
    """The caller's frame object (held from outside it from now on)."""
    return sys._getframe(1)


def _line(frame, fn):
    return frame.f_lineno - fn.__code__.co_firstlineno


def _names(frame):
    return sorted(frame.f_locals)


# --- _C.stay_in_frame itself -------------------------------------------------------------------


def test_stay_in_frame_says_whether_the_frame_object_is_held_from_outside():
    def probe():
        out = [_C.stay_in_frame()]
        frame = sys._getframe()
        out.append(_C.stay_in_frame())
        del frame
        out.append(_C.stay_in_frame())
        try:
            1 / 0
        except ZeroDivisionError as exc:
            out.append(_C.stay_in_frame())  # (the traceback holds the frame)
            del exc
        out.append(_C.stay_in_frame())
        return out

    assert probe() == [False, True, False, True, False]


def test_stay_in_frame_is_true_while_a_tracer_is_set():
    def probe():
        return _C.stay_in_frame()

    old = sys.gettrace()
    sys.settrace(lambda *a: None)
    try:
        traced = probe()
    finally:
        sys.settrace(old)
    assert traced and not probe()


# --- the frame's own object --------------------------------------------------------------------


def keeps_its_frame(x):
    y = x + 1
    frame = _escape()
    first = _line(frame, keeps_its_frame)
    z = y * 2
    print(end="")
    return first, _line(frame, keeps_its_frame), frame is _escape(), z, _names(frame)


def test_a_frame_taken_with_getframe_runs_the_rest_of_the_function():
    x = np.arange(3.0)
    assert_split(keeps_its_frame, x)
    expected = keeps_its_frame(x)
    fn = compiled(keeps_its_frame)
    for _ in range(2):  # (the compiling call and a cache hit)
        got = fn(x)
        assert got[:3] == expected[:3]
        np.testing.assert_array_equal(got[3], expected[3])
        assert got[4] == expected[4], "f_locals shows the user's names only"


def _leaves_a_frame_cycle():
    frame = sys._getframe()  # noqa: F841 (a frame holding itself: garbage after the return)


def counts_the_cycle(x):
    y = x * 2
    gc.collect()
    _leaves_a_frame_cycle()
    return gc.collect(), y + 1


def test_a_callee_frame_cycle_does_not_take_the_callers_frame_with_it():
    """CPython's test_gc test_frame: the callee's frame keeps its caller's frame object as
    f_back. In plain Python that caller is still running, so the collector frees one object;
    a caller frame that had handed the rest of the function to a resume function was dead and
    garbage too (2)."""
    x = np.ones(3)
    assert_split(counts_the_cycle, x)
    expected, _ = counts_the_cycle(x)
    fn = compiled(counts_the_cycle)
    for _ in range(2):
        got, y = fn(x)
        assert got == expected == 1
        np.testing.assert_array_equal(y, x * 2 + 1)


def outer_raises():
    def inner():
        1 / 0
    return inner()


def traceback_frames(x):
    y = x + 1
    try:
        outer_raises()
    except ZeroDivisionError as e:
        tb = e.__traceback__
        frames = []
        while tb:
            frames.append(tb.tb_frame)
            tb = tb.tb_next
    this = frames[0]
    z = y * 3
    return _line(this, traceback_frames), this is _escape(), z


def test_a_frame_taken_from_a_traceback_shows_the_line_running_now():
    """CPython's test_frame ReprTest: the frame object of a traceback entry of this function
    is the frame running the rest of it (f_lineno moves on)."""
    x = np.arange(2.0)
    assert_split(traceback_frames, x)
    expected = traceback_frames(x)
    fn = compiled(traceback_frames)
    for _ in range(2):
        got = fn(x)
        assert got[:2] == expected[:2]
        np.testing.assert_array_equal(got[2], expected[2])


# --- the continuation's stack, branches, cells, super() and loops ---------------------------------


def stack_under_the_break(x):
    x = x * 1.0  # (a graph before the break)
    frame = _escape()
    # (the call's result meets values already on the stack: `x * 2 + <call> * 3`)
    out = x * 2 + len(str(_line(frame, stack_under_the_break))) * np.ones_like(x) * 3
    return out, _line(frame, stack_under_the_break)


def branches_on_data(x):
    x = x * 1.0  # (a graph before the break)
    frame = _escape()
    if x.sum() > 0:  # (a data-dependent branch: each way continues in the frame)
        y = x * 2
    else:
        y = x - 1
    return y, _line(frame, branches_on_data)


def with_cells(x):
    x = x * 1.0  # (a graph before the break)
    frame = _escape()
    scale = 3.0

    def mul(v):
        return v * scale
    print(end="")
    scale = 4.0
    return mul(x), _line(frame, with_cells)


class Base:
    def run(self, x):
        return x + 1


class Child(Base):
    def run(self, x):
        frame = _escape()
        print(end="")
        return super().run(x) * 2, _line(frame, Child.run)


def loops_with_a_break_in_the_body(x):
    x = x * 1.0  # (a graph before the break)
    frame = _escape()
    total = np.zeros_like(x)
    for k in range(3):
        total = total + x * k
        print(end="")
    return total, _line(frame, loops_with_a_break_in_the_body)


@pytest.mark.parametrize("fn", [stack_under_the_break, branches_on_data, with_cells,
                                loops_with_a_break_in_the_body])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_the_rest_of_an_observed_frame_gives_plain_pythons_results(fn, sign):
    x = sign * np.arange(1.0, 4.0)
    assert_split(fn, x)
    expected = fn(x)
    cfn = compiled(fn)
    for _ in range(2):
        got = cfn(x)
        np.testing.assert_array_equal(got[0], expected[0])
        assert got[1] == expected[1]


def test_super_works_in_the_rest_of_an_observed_method():
    x = np.arange(3.0)
    assert_split(Child.run, Child(), x)
    expected = Child().run(x)
    run = compiled(Child.run)
    got = run(Child(), x)
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1] == expected[1]


def test_an_unobserved_frame_still_runs_the_rest_compiled():
    def plain_break(x):
        y = x + 1
        print(end="")
        return y * 2

    assert graphs(plain_break, np.ones(3)) == 2


def test_an_observed_frame_runs_the_rest_uncompiled_and_correct():
    def observed(x):
        y = x + 1
        frame = _escape()  # noqa: F841
        print(end="")
        return y * 2

    # (the graph before the first break; the rest runs in the frame, in plain Python)
    assert graphs(observed, np.ones(3)) == 1
    np.testing.assert_array_equal(compiled(observed)(np.ones(3)), np.full(3, 4.0))


# --- tracers started at a break ----------------------------------------------------------------


def _settrace_and_return(tracefunc):
    sys.settrace(tracefunc)
    sys._getframe().f_back.f_trace = tracefunc


def settrace_and_return(tracefunc, x):
    y = x + 1
    _settrace_and_return(tracefunc)
    z = y * 2
    return z




def test_a_tracer_a_callee_starts_sees_the_rest_of_the_frame():
    """CPython's test_sys_settrace settrace_and_return: line events of the rest of the function
    in the same frame, and its return; no call event of a resume function."""
    x = np.ones(2)
    assert_split(settrace_and_return, lambda *a: None, x)
    sys.settrace(None)
    code = settrace_and_return.__code__
    expected = line_events(settrace_and_return, x, code)
    assert expected == [(3, "line"), (4, "line"), (4, "return")]
    fn = compiled(settrace_and_return)
    for _ in range(2):
        assert line_events(fn, x, code) == expected


def test_a_tracer_started_in_a_try_statement_sees_its_lines(monkeypatch):
    """The try statement runs in plain Python inside the transformed code, its instructions
    with the original's lines (a handler's first instruction has none: no extra line event),
    and the rest of the function in the same frame."""
    monkeypatch.setattr(dynamo.config, "capture_try_bodies", False)
    x = np.ones(2)
    code = settrace_and_raise.__code__
    expected = line_events(settrace_and_raise, x, code)
    assert expected == [(2, "exception"), (3, "line"), (4, "line"), (5, "line"), (5, "return")]
    fn = compiled(settrace_and_raise)
    for _ in range(2):
        assert line_events(fn, x, code) == expected


# --- a failed compile leaves no garbage holding the user's frame -------------------------------


def _comprehension_that_breaks(x):
    return [print(end="") or v * 2 for v in (x, x + 1)]


def frame_referrers_after_a_failed_compile(x):
    ys = _comprehension_that_breaks(x)
    frame = sys._getframe()
    return [type(r).__name__ for r in gc.get_referrers(frame)], ys


def test_a_failed_compile_leaves_no_cycle_holding_the_users_frame():
    """A compile that ends in Unsupported left the exception, its traceback and the
    compiler's frames in a reference cycle; the outermost compiler frame's f_back is the
    user's frame, which then looked held from outside (and was garbage after the call)."""
    x = np.arange(3.0)
    fn = compiled(frame_referrers_after_a_failed_compile)
    referrers, _ = fn(x)
    assert referrers == []
    gc.collect()
    before = gc.collect()
    dynamo.reset()
    fn = compiled(_comprehension_that_breaks)
    gc.collect()
    fn(x)
    assert gc.collect() == before == 0


def test_the_observed_frames_locals_are_freed_with_it():
    class Big:
        pass

    def user(x):
        big = Big()
        ref = weakref.ref(big)
        frame = _escape()
        print(end="")
        del big
        return ref, x + 1, _names(frame)

    expected = user(np.ones(2))[2]
    fn = compiled(user)
    ref, _, names = fn(np.ones(2))
    assert ref() is None, "del in the rest of the frame frees the object, as in plain Python"
    # (the frame held from outside is the one that ran the del: its locals show it gone)
    assert names == expected and "big" not in names


def _raise_it(exc):
    raise exc


def exit_stack_traceback():
    import contextlib
    import traceback

    try:
        with contextlib.ExitStack() as stack:
            stack.callback(_raise_it, ValueError)
            1 / 0
    except ValueError as e:
        exc = e
    return [f.name for f in traceback.extract_tb(exc.__context__.__traceback__)]


def test_the_exception_the_user_is_handling_keeps_its_traceback():
    """A compile that starts while the program handles an exception (a frame called from an
    ``__exit__``: here ``_raise_it``, which the translator cannot capture) raises its own
    exceptions with the user's as their context: dropping their tracebacks must leave the
    user's alone (CPython's test_contextlib test_exit_exception_traceback)."""
    expected = exit_stack_traceback()
    assert expected == ["exit_stack_traceback"]
    with dynamo.optimize("eager"):
        for _ in range(2):
            assert exit_stack_traceback() == expected
