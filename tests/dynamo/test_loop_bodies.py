"""Loops that are not unrolled run in the transformed code, their body a function of its own.

In: ``for`` and ``while`` loops whose body breaks the graph (a print, `dynamo.graph_break()`, a
float of array data in the loop test), with ``break``, ``continue``, ``return``, ``else``,
nested loops, loops in resume functions and bodies that raise. Out: NumPy's results through the
oracle (`check`), the body's graphs compiled once and reused by every iteration, and plain
Python's tracebacks. Lifetimes of the body's locals: test_loop_body_lifetimes.py; loops over
zip and enumerate: test_zip_enumerate_loops.py.
"""

from __future__ import annotations

import traceback

import numpy as np
import pytest

import dynamo
from dynamo import _C
from dynamo.resume import display_name
from support.oracle import check_compiled
from support.subprocesses import run_isolated


def loop_with_data_dependent_exit(x):
    err = 1.0
    while err > 1e-3:
        x = x / 2
        err = float(np.abs(x).max())
    return x


def test_a_loop_first_in_the_frame_still_gets_its_body_compiled(check):
    # nothing to compute before the loop: the transformed code is just the loop driver; the
    # body (x / 2 and the max) is the one graph, reused by every iteration
    check(loop_with_data_dependent_exit, np.arange(3.0), graphs=1)
    out = dynamo.explain(loop_with_data_dependent_exit)(np.arange(3.0))
    assert out.graph_count == 1 and "float()" in out.break_reasons[0]


def newton_sqrt(x):
    y = x * 2
    err = 1.0
    while err > 1e-9:
        y = y - (y * y - x) / (2 * y)
        err = float(np.abs(y * y - x).max())
    return y + 0


def test_a_while_loop_with_a_data_dependent_exit_compiles_its_body_once(check):
    # x * 2 | the loop runs in Python: its body (the Newton step and the error) is one graph
    # reused by every iteration, the comparison runs in Python | y + 0 after the loop
    check(newton_sqrt, np.arange(1.0, 5.0), graphs=3)
    check(newton_sqrt, np.arange(2.0, 6.0), graphs=0)  # other data, other iteration count
    out = dynamo.explain(newton_sqrt)(np.arange(1.0, 5.0))
    assert "float()" in out.break_reasons[0]


def smooth(u, n):
    u = u * 1.0
    for t in range(n):
        u = 0.5 * (u + u[::-1])
        print("step", t)
        u = u * 2 - 1
    return u


def _loop_bodies(fn):
    """Body functions the transformed code of `fn` drives."""
    found = []
    for _, new_code in _C.get_cache_entries(fn.__code__):
        found += [c for c in new_code.co_consts
                  if hasattr(c, "co_code") and "<loop body at line" in display_name(c)]
    return found


def test_a_loop_with_a_print_runs_in_python_and_its_body_is_compiled(check, capsys):
    check(smooth, np.arange(6.0), 5, graphs=None)
    assert capsys.readouterr().out.count("step 4") == 3
    (body,) = _loop_bodies(smooth)
    assert body.co_varnames[:2] == ("___item", "u")
    # the body's graphs are compiled once and reused by every later iteration
    graphs = check.backend.count
    dynamo.compile(smooth, backend=check.backend)(np.arange(6.0), 9)
    assert check.backend.count == graphs + 1  # only the new prefix (n is guarded); no new body


def loop_exits(x, limit):
    total = x * 0
    for i, row in enumerate(x):
        if i == limit:
            break
        if row.sum() < 0:
            continue
        total = total + row
        if float(total.sum()) > 100:
            return total * -1
    return total + 1


@pytest.mark.parametrize("limit, scale", [(10, 1.0), (2, 1.0), (10, -1.0), (10, 50.0)],
                         ids=["runs-out", "break", "continue", "return"])
def test_break_continue_and_return_inside_a_compiled_loop_body(check, limit, scale):
    check(loop_exits, np.arange(12.0).reshape(4, 3) * scale, limit, graphs=None)


def assigned_in_loop(xs):
    for x in xs:
        last = np.sin(x)
        dynamo.graph_break()
    return last * 2  # noqa: F821  (unbound when xs is empty)


@pytest.mark.parametrize("n", [3, 0])
def test_a_local_first_bound_inside_the_loop_keeps_python_semantics(check, n):
    check(assigned_in_loop, [np.arange(2.0) + i for i in range(n)], graphs=None)


def nested_loops(a):
    out = a * 0
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            dynamo.graph_break()
            out[i, j] = a[i, j] * (i + j)
    return out


def test_nested_loops_with_a_break_inside(check):
    check(nested_loops, np.arange(6.0).reshape(2, 3), graphs=None)


def raises_in_loop(x):
    y = x + 0
    for i in range(3):
        dynamo.graph_break()
        y = y.reshape(2, 2) if i == 2 else y
    return y


def test_an_error_in_a_loop_body_propagates(check):
    check(raises_in_loop, np.arange(3.0), graphs=None)  # ValueError from the reshape


def while_with_exits(x, n):
    i = 0
    acc = x * 0
    while i < n:
        i += 1
        if i % 3 == 0:
            continue
        if float(acc.sum()) > 50:
            break
        acc = acc + x * i
    else:
        acc = acc - 1
    return acc, i


@pytest.mark.parametrize("n", [4, 20], ids=["else", "break"])
def test_while_loop_continue_break_and_else(check, n):
    check(while_with_exits, np.arange(3.0), n, graphs=None)


def for_else(x):
    acc = x * 0
    for i in range(4):
        dynamo.graph_break()
        if i == 10:
            break
        acc = acc + i
    else:
        acc = acc * 100
    return acc


def returns_from_while_true(x):
    k = 0
    while True:
        k += 1
        y = x * k
        if float(y.sum()) > 20:
            return y, k


@pytest.mark.parametrize("fn", [for_else, returns_from_while_true], ids=lambda f: f.__name__)
def test_for_else_and_return_from_while_true(check, fn):
    check(fn, np.arange(3.0), graphs=None)


def nested_loop_in_a_resume(x, y, n):
    # (found by the control-flow fuzzer: the while loop's body function is planned inside a resume
    # function, where part of the loop region is not reachable within one iteration)
    g1 = lambda t: np.sin(t) * 0.0 + y  # noqa: E731
    if float(x.min()) > -1.0:
        y *= 0.0
        c2 = 0
        while (float((x + n).min()) > 0.0) and c2 < 2:
            c2 += 1
            if np.mean((x + c2)) < 3.0:
                continue
            y[c2 % 3] = np.mean(np.maximum(x, x))
        dynamo.graph_break()
        if n > 0:
            np.add(y, sum([np.abs(t) for t in (g1(y), y)]), out=y)
    x *= -0.25
    return (x, y) if n > 4 else (y, x)


def test_a_loop_planned_inside_a_resume_function(check):
    from dynamo import config

    with config.patch(max_instructions=400):
        check(nested_loop_in_a_resume, np.array([0.74, 0.15, 0.98], dtype=np.float32),
              np.array([np.nan, -1.03, -0.89]), 3, graphs=None)


def while_continue_with_a_break(x):
    c = 0
    while c < 5:
        c += 1
        dynamo.graph_break()
        if x.sum() > 100:
            continue
    return x + 1


def test_while_continue_to_the_first_test_does_not_nest_frames(check):
    # (found by the control-flow fuzzer: each iteration compiled a nested loop body, a hang)
    check(while_continue_with_a_break, np.ones(3), graphs=None)


def raises_in_a_loop_body(x, log):
    acc = x * 0.0
    for i in range(4):
        acc = acc + np.sin(x) * i
        log.append(i)  # (a list method call on an outside list: the loop runs in Python)
        print("step", i)
        if i == 2:
            acc = acc[10]  # IndexError from the body function
    return acc


def test_an_exception_from_a_loop_body_has_the_plain_traceback(capsys):
    def entries(fn):
        with pytest.raises(IndexError) as info:
            fn(np.ones(3), [])
        return [(f.name, f.lineno, f.line) for f in traceback.extract_tb(info.value.__traceback__)][1:]

    plain = entries(raises_in_a_loop_body)
    compiled = entries(dynamo.compile(raises_in_a_loop_body))
    # one entry for the function at the line that raised: the loop driver's own entry (the
    # call of the body function at the `for` line) is dropped, as plain Python has none
    assert compiled == plain


# Found by the control-flow fuzzer (tests/fuzz/control_gen.py KNOWN_BUGS patterns) ---------------


# (control-flow fuzzer pattern `while_graph_break_continue`)
# Fixed: a loop body function leaves out the code one iteration cannot reach (was: it copied it,
# backward jumps included, and planned a body function of itself without end).
def test_while_data_branch_continue_finishes(tmp_path):
    out = run_isolated("""
        def f(x):
            c = 0
            while c < 3:
                c += 1
                if x.sum() > 100:
                    continue
            return c

        x = np.array([1.0, 2.0])
        try:
            print(dynamo.compile(f, backend="eager")(x), f(x))
        except Runaway as exc:
            print("runaway:", exc)
    """, tmp_path)
    assert out.split() == ["3", "3"], out


# (control-flow fuzzer pattern `return_in_loop_inside_while`)
def _return_from_for_in_while(x, y):
    c = 0
    while c < 5:
        c += 1
        for i in range(3):
            if y.sum() < 2.0:
                return x
    return y


# Fixed: a `return` inside a loop body function returns (RETURN, value) where it stands, so a
# loop nested in it sees a return, not a jump it would take for a `break`.
def test_return_from_for_loop_inside_while_loop():
    check_compiled(_return_from_for_in_while, np.array([1.0, 2.0]), np.array([0.5, 0.25]))
