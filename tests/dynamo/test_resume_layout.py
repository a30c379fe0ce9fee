"""Resume functions of code whose compiler lays handlers out of order assemble and run.

In: a function shaped like CPython 3.13's test_contextlib test_contextmanager_traceback: a graph
break (a call of code npdynamo does not trace), then ``try: with cm(): raise ...`` statements
in a row. 3.13 puts the first handler's cleanup (``e = None; del e``) after the next statement
and jumps back to it, so a resume function starting there enters the copied code between a
``raise`` and the TryEnd that closes its range. Out: the same result and traceback as plain
Python, with no internal error (the resume function's label was put before that TryEnd, the
assembler then computed a negative stack size: "Failed to compute stacksize").
"""

from __future__ import annotations

import traceback
from contextlib import contextmanager

import dynamo


@dynamo.disable
def opaque(fn):
    return contextmanager(fn)


class Sub(RuntimeError):
    pass


def handlers_in_a_row():
    @opaque
    def cm():
        yield

    try:
        with cm():
            1 / 0
    except ZeroDivisionError as e:
        first = traceback.extract_tb(e.__traceback__)[-1].line

    try:
        with cm():
            raise Sub(42)
    except Sub as e:
        second = traceback.extract_tb(e.__traceback__)[-1].line

    lines = []
    for stop in (StopIteration("spam"), Sub("eggs")):
        try:
            with cm():
                raise stop
        except type(stop) as e:
            lines.append(traceback.extract_tb(e.__traceback__)[-1].line)
        else:
            lines.append("suppressed")
    return first, second, lines


def test_a_resume_function_entering_between_a_raise_and_its_try_end_assembles():
    expected = handlers_in_a_row()
    with dynamo.config.patch(suppress_errors=False):
        with dynamo.optimize("eager"):
            got = handlers_in_a_row()
    assert got == expected
