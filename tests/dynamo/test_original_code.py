"""A frame with nothing to capture runs its own code, also when it has a graph break.

In: pure-Python functions whose first unsupported instruction (a ``print``, ``1 / 0`` in a
``try``) is a graph break with no graph before it and nothing after it that can reach NumPy
(only literals, builtins and what they make), and functions that look alike but can (an array
argument is live, NumPy is named, a helper is called). Out: the first kind runs its original
bytecode (no transformed code, no resume function): a traceback's ``tb_frame.f_code`` is the
function's own code and ``dis.distb()`` shows it, as without capture; the second kind is still
compiled (its graph after the break is captured). Results and printed output equal plain
Python's either way.

Found by CPython's test_dis (TestDisTraceback, test_from_traceback_dis: ``dis.distb()`` of a
traceback through a try/except with ``1 / 0`` disassembled npdynamo's transformed code).
"""

from __future__ import annotations

import contextlib
import dis
import io

import numpy as np

import dynamo
from dynamo.debug import cache_entries


def error_traceback():
    try:
        1 / 0  # noqa: B018
    except Exception as e:
        tb = e.__traceback__
    return tb


def prints_then_raises():
    print("hi")
    return 1 // 0


def prints_then_counts():
    print("hi")
    return len("abc") + 2


def prints_then_uses_numpy():
    print("hi")
    return np.arange(4.0) * 2.0


def prints_then_uses_argument(x):
    print("hi")
    return x * 2.0 + 1.0


def helper(x):
    return x + 1.0


def calls_helper_after_print(x):
    print("hi")
    return helper(np.ones(3)) * 2.0


def _last_frame(tb):
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame


def _distb(tb) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        dis.distb(tb)
    return out.getvalue()


def _compiled_codes(fn) -> list:
    return cache_entries(fn)


def test_traceback_through_a_try_shows_the_original_code():
    plain = error_traceback()
    with dynamo.optimize("eager"):
        captured = error_traceback()
    assert _last_frame(captured).f_code is error_traceback.__code__
    assert _distb(captured) == _distb(plain)
    assert (dis.Bytecode.from_traceback(captured).dis()
            == dis.Bytecode.from_traceback(plain).dis())
    assert not _compiled_codes(error_traceback)


def test_print_then_raise_runs_the_original_code(capsys):
    compiled = dynamo.compile(prints_then_raises, backend="eager")
    for _ in range(2):
        try:
            compiled()
        except ZeroDivisionError as e:
            frame = _last_frame(e.__traceback__)
        else:
            raise AssertionError("no ZeroDivisionError")
        assert frame.f_code is prints_then_raises.__code__
    assert capsys.readouterr().out == "hi\nhi\n"
    assert not _compiled_codes(prints_then_raises)


def test_print_then_builtins_runs_the_original_code(capsys):
    assert dynamo.compile(prints_then_counts, backend="eager")() == 5
    assert capsys.readouterr().out == "hi\n"
    assert not _compiled_codes(prints_then_counts)


def test_numpy_after_the_break_is_still_captured(capsys):
    out = dynamo.explain(prints_then_uses_numpy)()
    np.testing.assert_array_equal(out.result, np.arange(4.0) * 2.0)
    assert out.graph_count == 1 and out.graph_break_count == 1


def test_a_live_argument_is_still_captured(capsys):
    x = np.linspace(0.0, 1.0, 5)
    out = dynamo.explain(prints_then_uses_argument)(x)
    np.testing.assert_array_equal(out.result, x * 2.0 + 1.0)
    assert out.graph_count == 1 and out.graph_break_count == 1
    # (called with a float first, the frame is not given up for good: the rule looks at no
    # argument value)
    dynamo.reset()
    compiled = dynamo.compile(prints_then_uses_argument, backend="eager")
    assert compiled(2.0) == 5.0
    np.testing.assert_array_equal(compiled(x), x * 2.0 + 1.0)
    assert _compiled_codes(prints_then_uses_argument)


def test_a_global_helper_after_the_break_is_still_captured(capsys):
    out = dynamo.explain(calls_helper_after_print)(None)
    np.testing.assert_array_equal(out.result, (np.ones(3) + 1.0) * 2.0)
    assert out.graph_count >= 1 and out.graph_break_count == 1
