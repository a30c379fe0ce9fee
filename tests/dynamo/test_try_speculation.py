"""A ``try`` body becomes a function of its own only when it captures something first.

In: functions with a ``try`` statement, compiled with the default configuration (try bodies
captured). Out: a body that would break at once (its first statement calls code that is not
inlined, or raises) runs in place in the user's frame (`compile_frame.speculate_try_body`),
so what a callee sees of its caller is plain Python's (``sys._getframe(1)``, a tracer set on
``f_back``: CPython's test_sys_settrace settrace_and_raise); a body that records operations
before its first break still runs as a compiled body function. Oracle: the same function run
plainly.
"""

from __future__ import annotations

import sys

import numpy as np

import dynamo
from support.tracing import line_events, settrace_and_raise


def test_a_tracer_a_callee_starts_in_a_try_body_sees_the_users_frame():
    # (test_observed_frames.py checks the same with capture_try_bodies=False)
    x = np.ones(2)
    code = settrace_and_raise.__code__
    expected = line_events(settrace_and_raise, x, code)
    assert expected == [(2, "exception"), (3, "line"), (4, "line"), (5, "line"), (5, "return")]
    compiled = dynamo.compile(settrace_and_raise)
    for _ in range(2):
        assert line_events(compiled, x, code) == expected


@dynamo.disable
def callers_view():
    caller = sys._getframe(1)
    return caller.f_code.co_name, sorted(k for k in caller.f_locals if not k.startswith("_"))


def asks_for_its_caller(x):
    y = x * 2
    try:
        seen = callers_view()
    except ValueError:
        seen = None
    return y + 1, seen


def test_a_callee_of_a_try_body_finds_the_users_frame_as_its_caller():
    x = np.arange(3.0)
    expected = asks_for_its_caller(x)
    assert expected[1] == ("asks_for_its_caller", ["x", "y"])
    got = dynamo.compile(asks_for_its_caller)(x)
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1] == expected[1]


def raises_at_once(x):
    try:
        1 / 0
    except ZeroDivisionError as e:
        tb = e.__traceback__
    return x + 1, tb.tb_frame.f_code.co_name, tb.tb_lineno - raises_at_once.__code__.co_firstlineno


def test_a_try_body_that_raises_at_once_runs_in_place():
    x = np.ones(2)
    expected = raises_at_once(x)
    got = dynamo.compile(raises_at_once)(x)
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1:] == expected[1:]
    explained = dynamo.explain(raises_at_once)(x)
    assert not any("its body as a function" in r for r in explained.break_reasons)


@dynamo.disable
def note(*args):
    pass


def captures_then_breaks(x):
    try:
        y = np.sin(x) * 2
        note(y)
        z = y + 1
    except ValueError:
        z = None
    return z


def test_a_try_body_that_captures_before_its_break_is_still_a_function():
    x = np.linspace(0.0, 1.0, 4)
    explained = dynamo.explain(captures_then_breaks)(x)
    np.testing.assert_array_equal(explained.result, captures_then_breaks(x))
    assert any("its body as a function of its own" in r for r in explained.break_reasons)
    assert explained.graph_count >= 2  # (the body's graph before the break, and after it)
