"""Resume functions: the rest of a frame after a graph break, compiled as a frame of its own.

In: functions with a graph break (`dynamo.graph_break()`, a print, an attribute read that is
not traced) with locals, cells, globals and closures live across it, and resume code made by
hand (`dynamo.resume`). Out: NumPy's results through the oracle (`check`); what the resume
function gets (live values only, no guards on values merely passed on, cells shared with
closures, deleted and unbound locals as in Python), its tracebacks and ``f_locals``, and the
registries that tell resume code and loop bodies apart. Graph counts from the counting backend
and `explain()`.
"""

from __future__ import annotations

import dis
import re
import weakref

import numpy as np
import pytest

import dynamo
from dynamo import _C, compat, graph_break
from dynamo.bytecode_analysis import code_info
from dynamo.resume import display_name, is_resume_code, resume_code, resume_function
from support.subprocesses import run_isolated


# What travels to the resume function ------------------------------------------------------------


def dead_and_live(x, y):
    big = x * 1000  # dead after the break
    keep = x + y
    graph_break()
    return keep * 2


def test_dead_graph_values_are_not_passed_to_the_resume_function(check):
    check(dead_and_live, np.arange(3.0), np.ones(3), graphs=2)
    resumes = [c for c in _resumed_codes(dead_and_live)]
    assert resumes, "no resume function was made"
    for code in resumes:
        names = code.co_varnames[:code.co_argcount]
        # `big` would be one more graph output; the unread arguments cost nothing to pass and
        # stay alive until the function returns, as in plain Python (no guard on them).
        assert "keep" in names and "big" not in names and "x" in names and "y" in names
    for check_fn, _ in _C.get_cache_entries(resumes[0]):
        body = check_fn.source.split("return", 1)[1]
        assert "keep" in body and not re.search(r"\b[xy]\b", body), check_fn.source


class _Tracked:
    pass


def drops_an_object_early(x):
    obj = _Tracked()
    ref = weakref.ref(obj)
    graph_break()                       # `obj` is never read again
    alive = ref() is not None
    return np.sin(x), alive


def test_unread_locals_live_until_the_function_returns_as_in_plain_python():
    x = np.arange(3.0)
    expected = drops_an_object_early(x)
    got = dynamo.compile(drops_an_object_early, backend="eager")(x)
    assert expected[1] and got[1], "the object died at the graph break"
    np.testing.assert_array_equal(got[0], expected[0])


def _resumed_codes(fn):
    """The resume code objects that `fn`'s transformed code calls."""
    found = []
    for _, new_code in _C.get_cache_entries(fn.__code__):
        for const in new_code.co_consts:
            if hasattr(const, "co_code") and is_resume_code(const):
                found.append(const)
    return found


def deletes_a_local(x):
    y = x + 1
    del x
    graph_break()
    return y * 2


def test_deleted_local_stays_deleted(check):
    check(deletes_a_local, np.arange(3.0), graphs=2)


def maybe_unbound(x):
    if x.shape[0] > 10:
        w = 1
    graph_break()
    return w


def test_unbound_local_raises_after_a_break(check):
    check(maybe_unbound, np.arange(3.0), graphs=None)  # UnboundLocalError, same message


SCALE = 3.0


def reads_a_global_after(x):
    y = x + 1
    graph_break()
    return y * SCALE


def test_globals_read_after_a_break(check):
    check(reads_a_global_after, np.arange(3.0), graphs=2)


def closure_after_break(x):
    y = np.sin(x)
    graph_break()
    g = lambda: y + 1  # noqa: E731  (y is a cell: the resume function gets the cell itself)
    return g()


def test_cells_are_shared_with_closures_made_after_the_break(check):
    check(closure_after_break, np.arange(3.0), graphs=2)  # sin, and the lambda's own frame


def closure_returned(x):
    a = 1
    def g():
        return a
    a = np.sin(x)  # written after the closure was made: g must see it
    return g, a * 2


def closure_returned_after_break(x):
    a = 1
    def g():
        return a
    y = np.sin(x)
    graph_break()
    a = y * 3  # a cell of the original frame, written in the resume function
    return g, y + a


@pytest.mark.parametrize("fn", [closure_returned, closure_returned_after_break])
def test_cell_written_in_the_frame_is_seen_by_a_returned_closure(fn):
    x = np.arange(3.0)
    g_plain, out_plain = fn(x)
    g, out = dynamo.compile(fn, backend="eager")(x)
    np.testing.assert_array_equal(out, out_plain)
    np.testing.assert_array_equal(g(), g_plain())
    assert dynamo.explain(fn)(x).graph_count >= 1


def reads_emptied_cell(x):
    a = np.sin(x)
    def g():
        return a  # noqa: F821  (deleted below)
    y = a + 1
    graph_break()
    del a
    try:
        return a  # noqa: F821  (reading an emptied cell of the frame)
    except UnboundLocalError as e:
        return y, str(e), g.__closure__[0] is not None


def reads_cell_before_assignment(x):
    def g():
        return a
    y = np.sin(x)
    graph_break()
    try:
        a  # noqa: B018, F821  (not assigned yet: UnboundLocalError, not NameError)
    except UnboundLocalError as e:
        a = y * 2
        return y, type(e).__name__, g()


@pytest.mark.parametrize("fn", [reads_emptied_cell, reads_cell_before_assignment])
def test_empty_cell_after_a_break_is_an_unbound_local(check, fn):
    check(fn, np.arange(3.0), graphs=None)
    assert dynamo.explain(fn)(np.arange(3.0)).graph_count >= 1


def reads_emptied_cell_in_a_loop_body(x, n):
    a = np.sin(x)
    def g():
        return a
    out = []
    for i in range(n):
        out.append(a + i)  # noqa: F821
        graph_break()  # (the loop's body becomes a body function of its own)
        if i == 1:
            del a
            out.append(a)  # noqa: F821  (UnboundLocalError, as in the frame itself)
    return out, g


def test_empty_cell_in_a_loop_body_is_an_unbound_local(check):
    # (loop body functions got the frame's cells in their closure, as free variables: reading
    # an emptied one raised NameError; they now get them as arguments, as resume functions do)
    check(reads_emptied_cell_in_a_loop_body, np.arange(3.0), 3, graphs=None)
    reasons = dynamo.explain(reads_emptied_cell_in_a_loop_body)(np.arange(3.0), 1).break_reasons
    assert any("<loop body" in r for r in reasons), reasons


def cell_in_traceback(x):
    a = x + 1
    def g():
        return a
    graph_break()
    raise ValueError(g)


def test_a_traceback_through_a_resume_function_shows_cell_contents():
    def last_frame_locals(fn):
        try:
            fn(np.arange(3.0))
        except ValueError as e:
            tb = e.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            return (is_resume_code(tb.tb_frame.f_code),
                    {k: type(v).__name__ for k, v in tb.tb_frame.f_locals.items()})
    plain = last_frame_locals(cell_in_traceback)
    assert plain == (False, {"x": "ndarray", "g": "function", "a": "ndarray"})
    compiled = last_frame_locals(dynamo.compile(cell_in_traceback, backend="eager"))
    assert compiled == (True, plain[1])


def function_made_before_a_break(x):
    def fn(v):
        return v + 1
    keep = [fn]
    out = {"f": fn}
    y = fn(np.sin(x))
    seen = []
    seen.append(id(fn))  # (a list of ids: the call below gets fn itself too)
    print("fn", fn is keep[0], fn is out["f"])  # graph break: fn is an argument of the call
    return y, keep[0] is fn, out["f"] is fn, keep[0] is out["f"], fn(y)


def test_function_made_in_the_frame_keeps_its_identity_at_a_break(check, capsys):
    check(function_made_before_a_break, np.arange(3.0), graphs=2)
    assert set(capsys.readouterr().out.splitlines()) == {"fn True True"}


def shape_changes(x):
    y = x * 2
    graph_break()
    return y.sum(axis=0)


def test_resume_function_recompiles_for_new_shapes(check):
    check(shape_changes, np.ones((2, 3)), graphs=2)
    check(shape_changes, np.ones((4, 5)), graphs=2)


def prints_a_value(x):
    y = x + 1
    print("value:", float(y.sum()))
    return y


def test_values_only_passed_through_get_no_guards(check, capsys):
    # print's arguments reach the second resume function, which only hands them to print: a
    # new value printed must not recompile it
    check(prints_a_value, np.arange(3.0), graphs=1)
    check(prints_a_value, np.arange(3.0) + 5, graphs=0)
    for code in _resumed_codes(prints_a_value):
        for check_fn, _ in _C.get_cache_entries(code):
            assert "value:" not in "".join(check_fn.guards)


def prints_a_formatted_value(x):
    y = x + 1
    print(f"mean={float(y.mean()):.3f}")
    return y


def test_a_formatted_value_from_array_data_does_not_recompile(check, capsys):
    check(prints_a_formatted_value, np.arange(3.0), graphs=1)  # x + 1 and the mean
    check(prints_a_formatted_value, np.arange(3.0) + 5, graphs=0)  # same versions, new text
    assert capsys.readouterr().out.splitlines()[-1] == "mean=7.000"


def _many_locals_and_a_cell(x):
    a0, a1, a2, a3, a4, a5, a6, a7 = (x + k for k in range(8))
    b0, b1, b2, b3, b4, b5, b6, b7 = (x * k for k in range(8))
    get = lambda: a0  # noqa: E731 (a0 is a cell variable)
    print("break")
    s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7
    t = b0 + b1 + b2 + b3 + b4 + b5 + b6 + b7
    return s * t + get()


def test_a_resume_function_with_a_cell_and_many_locals_is_captured(capsys):
    x = np.arange(3.0)
    out = dynamo.explain(_many_locals_and_a_cell)(x)
    assert out.graph_count == 2, out.break_reasons


# An argument that is also a cell (a closure reads it), rebound after a graph break: the
# rebinding dropped a reference the cell never owned, so the caller's array was freed (garbage
# contents, or a crash). Fixed in 52df865; a subprocess, since a regression would crash.
def test_rebinding_a_cell_argument_after_a_break_keeps_the_callers_array(tmp_path):
    out = run_isolated("""
        def f(x):
            a = x + 1
            dynamo.graph_break()
            x = 1
            def g():
                return x
            return a

        x = np.array([1.0, 2.0])
        for _ in range(3):
            print(dynamo.compile(f, backend="eager")(x).tolist(), x.tolist())
    """, tmp_path)
    assert out.splitlines() == ["[2.0, 3.0] [1.0, 2.0]"] * 3, out


# Resume functions on their own ------------------------------------------------------------------


def branchy(x, y):
    a = x + 1
    b = y * 2
    if a > b:
        c = a - b
    else:
        c = b - a
    print("c", c)
    return c + a


def test_liveness_at_each_instruction():
    info = code_info(branchy.__code__)
    at_print = next(i for i, ins in enumerate(info.instructions)
                    if ins.name == "LOAD_GLOBAL" and compat.global_name(ins) == "print")
    assert info.live_locals(at_print) == {"a", "c"}
    assert info.live_locals(0) == {"x", "y"}
    assert not info.in_loop(at_print) and not info.in_exception_block(at_print)


def test_resume_function_continues_the_original_code(capsys):
    info = code_info(branchy.__code__)
    at_print = next(i for i, ins in enumerate(info.instructions)
                    if ins.name == "LOAD_GLOBAL" and compat.global_name(ins) == "print")
    resume = resume_code(branchy.__code__, at_print, (), ("a", "c"))
    assert resume is resume_code(branchy.__code__, at_print, (), ("a", "c"))  # cached
    fn = resume_function(resume, globals(), ())
    assert fn(3, 3) == branchy(2, 3) == 6  # a = 3, c = 3 at the print
    assert capsys.readouterr().out == "c 3\nc 3\n"
    listing = dis.Bytecode(resume.code).dis()
    assert "JUMP_FORWARD" in listing
    # Named like the user's function (tracebacks, profiles); explain() shows which part it is.
    assert (resume.code.co_name, compat.qualname(resume.code)) == ("branchy", "branchy")
    assert display_name(resume.code).startswith("branchy.<resume at line ")


class Opaque:
    def __getattribute__(self, name):  # reading an attribute is not traced: a break
        return object.__getattribute__(self, name)


def nested_breaks(a, box):
    s = box[0].x
    return "%r[%s]" % (a, s.__class__.__name__)


def test_a_break_inside_a_resume_function_keeps_the_stack(check):
    box = [Opaque()]
    box[0].x = Opaque()
    assert dynamo.compile(nested_breaks)(6, box) == nested_breaks(6, box) == "6[Opaque]"


def _frames_of_outer():
    def outer():
        x = 5
        y = 6

        def inner():
            z = x + 2  # noqa: F841
            1 / 0

        return inner()

    try:
        outer()
    except ZeroDivisionError as e:
        tb = e.__traceback__
        frames = []
        while tb:
            frames.append(tb.tb_frame)
            tb = tb.tb_next
    return frames


def test_a_function_made_in_the_frame_stays_in_f_locals_after_a_break():
    # (CPython's test_frame FrameAttrsTest.test_locals: the compiled frame passed on only the
    # locals read later, so `inner` was missing from the traceback frame's f_locals)
    plain = sorted(_frames_of_outer()[1].f_locals)
    with dynamo.optimize("eager"):
        captured = sorted(_frames_of_outer()[1].f_locals)
    assert captured == plain == ["inner", "x", "y"]


# A code object without a line table (issue 6, item 4), and registries of code -------------------


def divides_by_zero_here(x):
    1 / 0  # noqa: B018
    return x  # (live after the break: a frame with nothing to capture after it runs as it is)


def divides_by_zero_after_a_break(x):
    y = np.sin(x)
    graph_break()
    return y * 0 + 1 // 0  # (not y / 0: it warns, an error under -W error before the raise)


def _no_line_table(code):
    """A line table of `code` that gives no instruction a line."""
    if compat.PY310:  # (byte count, line delta) pairs; a line delta of -128: no line
        n = len(code.co_code)
        return bytes([254, 0x80]) * (n // 254) + bytes([n % 254, 0x80])
    units = len(code.co_code) // 2  # "no location" entries of 8 code units, then the rest
    return b"\xff" * (units // 8) + (bytes([0xf8 | (units % 8 - 1)]) if units % 8 else b"")


@pytest.mark.parametrize("fn, args", [(divides_by_zero_here, (np.ones(2),)),
                                      (divides_by_zero_after_a_break, (np.ones(2),))])
def test_a_code_without_line_numbers_keeps_none_as_its_line(fn, args):
    def raising_line(f):
        try:
            f(*args)
        except ZeroDivisionError as e:
            tb = e.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            return tb.tb_frame.f_lineno, tb.tb_frame.f_code is fn.__code__
    saved = fn.__code__
    # (compiled first with its lines: on 3.10 the code without them compares equal to it, and
    # the translator's per-code cache kept by equality gave it the lines of the first)
    assert raising_line(dynamo.compile(fn, backend="eager"))[0] is not None
    try:
        fn.__code__ = saved.replace(co_linetable=_no_line_table(saved))
        assert {line for _, _, line in fn.__code__.co_lines()} == {None}
        assert raising_line(fn) == (None, True)
        line, original = raising_line(dynamo.compile(fn, backend="eager"))
        assert line is None
        assert not original  # (transformed code, and for the second one its resume function)
    finally:
        fn.__code__ = saved


def test_passed_cells_are_read_from_the_code_not_a_registry():
    # Code objects compare equal by value: a weak registry keyed by them loses the entry of a
    # live resume code when an equal one dies (the fuzzer hit it: a cell passed as an argument
    # was then taken for the value, and wrapped in a second cell).
    import gc

    from dynamo.resume import passed_cells

    ns = {}
    exec("def f(x):\n    a = x\n    def g():\n        return a\n    return g\n", ns)  # noqa: S102
    code = ns["f"].__code__
    last = len(code_info(code).instructions) - 1
    resume = resume_code(code, last, (False,), ())
    copy = resume.code.replace()  # an equal, distinct code object
    assert copy == resume.code and copy is not resume.code
    assert passed_cells(resume.code) == {"a"}
    del ns, code, resume
    gc.collect()
    assert passed_cells(copy) == {"a"}


def test_code_registries_keep_a_code_when_an_equal_one_dies():
    # (the fuzzer: a loop body stopped counting as one, flakily, when an equal code object of
    # an earlier program was collected, and its version limit warned like a user function's)
    import gc

    from dynamo.resume import in_loop_body, mark_loop_body, mark_plain_loop, plain_loop_reason

    def make():
        ns = {}
        exec("def f(x):\n    return x + 1\n", ns)  # noqa: S102
        return ns["f"].__code__

    first, second = make(), make()
    assert first == second and first is not second
    for code in (first, second):
        mark_loop_body(code)
        mark_plain_loop(code, "why")
    del first, code
    gc.collect()
    assert in_loop_body(second) and plain_loop_reason(second) == "why"
    assert not in_loop_body(make())  # (an equal code never marked is not taken for one)
