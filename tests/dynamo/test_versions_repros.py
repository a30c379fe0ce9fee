"""Regressions that CPython's own test suite found under capture on 3.12 and 3.13 (issue 9).

In:  small functions compiled with ``dynamo.compile(fn, backend="eager")``, each shaped like the
     CPython test that found the bug (see tests/cpython/test_cpython_suite.py), with a graph
     break (``print``) where the bug needs one.
Out: the compiled function returns, prints and raises exactly what the plain function does, on
     whichever interpreter runs the suite (most cases only had a bug on one version).
"""

from __future__ import annotations

import contextlib
import io

import pytest

import dynamo


@pytest.fixture(autouse=True)
def _reset():
    dynamo.reset()
    yield
    dynamo.reset()


def _outcome(fn, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            result = ("return", fn(*args))
        except Exception as exc:  # the oracle: compare the exception, not crash on it
            result = ("raise", type(exc), str(exc))
    return result, out.getvalue()


def same_as_plain(fn, *args):
    expected = _outcome(fn, *args)
    compiled = dynamo.compile(fn, backend="eager")
    assert _outcome(compiled, *args) == expected
    assert _outcome(compiled, *args) == expected  # (the cached version too)


def _raise_type_error():
    raise TypeError(2)


# 3.12+ RETURN_CONST in body functions ----------------------------------------------------------
# On 3.12 an except clause's tail jumps back to code shared with the try's `else` path, so the
# resume function after a graph break in the handler is a loop to the translator, and the code
# after it (ending in `return None`, a RETURN_CONST) became a loop body function. That body
# returned the plain None instead of its (RETURN, value) tuple: "'NoneType' object is not
# subscriptable" at the user's line (test_exceptions' test_no_hang_on_context_chain_cycle1,
# test_generator_leaking3; test_contextlib's test_exit_exception_chaining).


def test_except_handler_tail_after_graph_break():
    def fn():
        try:
            _raise_type_error()
        except Exception as e:
            exc = e
        print(type(exc).__name__)

    same_as_plain(fn)

