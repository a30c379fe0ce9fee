"""Functions that start a tracer from a callee, and the events a tracer records for a frame.

In: CPython's test_sys_settrace shapes (``settrace_and_raise``: a callee starts tracing and
sets its caller's ``f_trace``, then raises into a ``try``). Out: `line_events` runs one of them
and returns ``(line - co_firstlineno, event)`` for the frames of one code, as CPython's test
compares them. Used by tests/dynamo/test_observed_frames.py and test_try_speculation.py.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Callable

__all__ = ["settrace_and_raise", "line_events"]


def _settrace_and_raise(tracefunc):
    sys.settrace(tracefunc)
    sys._getframe().f_back.f_trace = tracefunc
    raise RuntimeError


def settrace_and_raise(tracefunc, x):
    try:
        _settrace_and_raise(tracefunc)
    except RuntimeError:
        pass
    return x


def line_events(fn: Callable, x: Any, code: types.CodeType) -> list[tuple[int, str]]:
    """The events a tracer started by `fn(tracer, x)` sees in frames of `code`."""
    events = []

    def tracer(frame, event, arg):
        if frame.f_code.co_name == code.co_name and frame.f_code.co_filename == code.co_filename:
            events.append((frame.f_lineno - code.co_firstlineno, event))
        return tracer

    old = sys.gettrace()
    try:
        fn(tracer, x)
    finally:
        sys.settrace(old)
    return events
