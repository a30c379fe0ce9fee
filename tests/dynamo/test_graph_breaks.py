"""Graph breaks: a frame that meets something the translator cannot capture is split into a graph
for the code before it, that one instruction in plain Python, and a resume function for the rest
(compiled as a frame of its own). NumPy is the oracle (`check`); graph counts come from the
counting backend and from `explain()`.
"""

from __future__ import annotations

import dis
import re
import sys
import traceback
import weakref

import numpy as np
import pytest

import dynamo
from dynamo import _C, compat, graph_break
from dynamo.bytecode_analysis import code_info
from dynamo.resume import display_name, is_resume_code, resume_code, resume_function

# The seed example ------------------------------------------------------------------------------


def seed(x, y):
    if x.sum() > y.sum():
        loss = np.cos(np.cos(x))
    else:
        loss = np.cos(np.cos(y))
    return loss


def test_seed_example_gives_three_graphs_after_both_branches(check):
    x, y = np.arange(4.0), np.zeros(4)
    check(seed, x, y, graphs=2)  # the condition, then the `if` branch
    check(seed, y, x, graphs=1)  # the `else` branch: one more graph, the condition is reused
    assert check.backend.count == 3
    codes = [n.target for n in check.backend.graphs[0].graph.nodes if n.op == "call_method"]
    assert codes == ["sum", "sum"]


def test_explain_counts_graphs_and_lists_breaks_with_location():
    out = dynamo.explain(seed)(np.arange(4.0), np.zeros(4))
    assert out.graph_count == 2 and out.graph_break_count == 1
    (reason,) = out.break_reasons
    assert "data-dependent" in reason
    assert f"{__file__}:" in reason and "if x.sum() > y.sum():" in reason
    assert "Break reasons:" in str(out)


# Where breaks happen ---------------------------------------------------------------------------


def prints_between(x):
    y = np.sin(x) * 2
    print("y has shape", y.shape, "sum", float(y.sum()))
    return y + 1


def test_print_runs_once_between_two_graphs(check, capsys):
    check(prints_between, np.arange(3.0), graphs=2)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3  # eager, first compiled call, cache hit: print ran once per call
    assert len(set(out)) == 1 and out[0].startswith("y has shape (3,) sum")


def keyword_call(x):
    y = x * 2
    print("a", "b", sep="-", end="|\n")
    return y - 1


def test_break_at_a_call_with_keyword_arguments(check, capsys):
    check(keyword_call, np.arange(3.0), graphs=2)
    assert capsys.readouterr().out == "a-b|\n" * 3


def call_inside_call(x):
    # When the break happens, NULL, np.add and `x + 1` are waiting on the stack below it.
    return np.add(x + 1, graph_break() or 2)


def test_values_waiting_on_the_stack_survive_a_break(check):
    check(call_inside_call, np.arange(3.0), graphs=2)


def reads_item(x):
    return x.sum().item() * 2


def test_break_at_a_method_that_needs_data(check):
    check(reads_item, np.arange(3.0), graphs=1)


def and_of_array(x, y):
    return (x.sum() > 0) and y * 2


@pytest.mark.parametrize("sign, graphs", [(1, 2), (-1, 1)])
def test_break_at_a_short_circuit_on_array_data(check, sign, graphs):
    # the comparison; then `y * 2` only when the `and` goes on to evaluate it
    check(and_of_array, sign * np.arange(1.0, 4.0), np.ones(3), graphs=graphs)


ASSERTS = """
import numpy as np

def asserts(x):
    y = x * 2
    assert (y > 0).all(), "expected positive values"
    return y + 1
"""


@pytest.fixture
def asserts(tmp_path):
    """A user function with an `assert` (defined outside this module: pytest rewrites the
    asserts of test modules)."""
    path = tmp_path / "user_asserts.py"
    path.write_text(ASSERTS)
    namespace: dict = {}
    exec(compile(ASSERTS, str(path), "exec"), namespace)
    return namespace["asserts"]


def test_assert_on_data_passes_and_raises_like_python(check, asserts):
    check(asserts, np.arange(1.0, 4.0), graphs=2)
    check(asserts, -np.arange(1.0, 4.0), graphs=0)  # same prefix graph; the raise is plain Python


def test_assertion_traceback_points_at_the_user_line(asserts):
    compiled = dynamo.compile(asserts)
    with pytest.raises(AssertionError, match="expected positive values") as info:
        compiled(-np.arange(1.0, 4.0))
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert last.filename.endswith("user_asserts.py")
    assert last.line == 'assert (y > 0).all(), "expected positive values"'


def many_breaks(x, y):
    a = x + y
    graph_break()
    b = a * 2
    graph_break()
    c = b - x
    graph_break()
    return a, b, c


def test_each_graph_break_starts_a_new_graph(check):
    check(many_breaks, np.arange(3.0), np.ones(3), graphs=3)
    out = dynamo.explain(many_breaks)(np.arange(3.0), np.ones(3))
    assert out.graph_count == 3 and out.graph_break_count == 3
    assert all("graph_break()" in reason for reason in out.break_reasons)


def break_first(x):
    print(end="")
    return np.exp(x) - 1


def test_break_before_any_operation_still_captures_the_rest(check):
    check(break_first, np.arange(3.0), graphs=1)


# What travels to the resume function -----------------------------------------------------------


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


# Where breaks do not happen --------------------------------------------------------------------


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


def try_after_ops(x):
    y = np.cos(x) * 2
    try:
        z = y.reshape(7, 7)
    except ValueError:
        z = y + 1
    return z


def test_graph_ends_before_a_try_block(check):
    # the block (and the rest of the frame) runs in plain Python in a resume function
    check(try_after_ops, np.arange(3.0), graphs=1)


def test_fullgraph_turns_a_break_into_an_error_with_the_line():
    with pytest.raises(dynamo.FullGraphError) as info:
        dynamo.compile(prints_between, fullgraph=True)(np.arange(3.0))
    message = str(info.value)
    assert f"{__file__}:" in message and "float(y.sum())" in message


def test_graph_break_outside_compiled_code_does_nothing():
    assert graph_break() is None


# Resume functions on their own -----------------------------------------------------------------


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


# Every instruction as a break point ------------------------------------------------------------
#
# The check of the rebuilt bytecode: for each instruction of each program below, force a graph
# break right there (a handler that raises Unsupported at that instruction index), then compare
# with plain NumPy. Every stack shape the program goes through (NULLs under callables, pending
# keyword names, values under a call, half-built tuples) is rebuilt once.


def stack_shapes(x, y, scale=2.0):
    a = np.add(x * scale, np.sin(y), out=None)
    pair = (a.sum(axis=0), a)
    first, second = pair
    label = f"{x.shape[0]}-{scale}"
    b = np.concatenate([first[None], second[:1]], axis=0) if len(label) > 2 else a
    return b.mean(keepdims=True) + np.float64(scale), label, [v * 2 for v in (x, y)]


def branches_and_methods(x, k):
    if x.ndim == 2 and k > 1:
        y = x.reshape(-1).cumsum()[::k]
    else:
        y = -x
    total = 0.0
    for i in range(3):
        total = total + y[i] * i
    return np.where(y > total, y, total), {"k": k, "n": y.size}


@pytest.mark.parametrize("fn, args", [
    (stack_shapes, (np.arange(6.0).reshape(3, 2), np.ones((3, 2)))),
    (branches_and_methods, (np.arange(12.0).reshape(3, 4), 2)),
], ids=["stack_shapes", "branches_and_methods"])
def test_break_at_every_instruction_rebuilds_the_frame(check, monkeypatch, fn, args):
    from dynamo import symbolic_convert
    from dynamo.exc import Unsupported

    translator = symbolic_convert.InstructionTranslator
    original = dict(translator.dispatch)
    forced = {"index": -1}

    def forcing(handler):
        def run(tx, inst):
            if type(tx) is translator and tx.code is fn.__code__ and tx.index == forced["index"]:
                raise Unsupported(f"forced break at instruction {tx.index}")
            return handler(tx, inst)
        return run

    monkeypatch.setattr(translator, "dispatch", {name: forcing(h) for name, h in original.items()})
    n = len(code_info(fn.__code__).instructions)
    broke = 0
    for index in range(n):
        dynamo.reset()
        forced["index"] = index
        check(fn, *args, graphs=None)
        out = dynamo.explain(fn)(*args)
        broke += any(f"forced break at instruction {index}" in r for r in out.break_reasons)
    assert broke > n // 2, f"only {broke} of {n} instructions could be break points"


# Loops that are not unrolled -------------------------------------------------------------------


def long_loop(x, n):
    y = np.cos(x)
    for i in range(n):
        y = y * 0.5 + i
    return y


def test_a_loop_past_the_tracing_budget_runs_in_python_after_the_graph(check):
    from dynamo import config

    with config.patch(max_instructions=200):
        # cos, then the loop runs in Python calling its body function: its first version uses
        # the counter `i` as a constant (i = 0); once `i` changed, the counter is an input of
        # the body's graph (a Python int argument, issue 7), which every later iteration reuses
        check(long_loop, np.arange(3.0), 500, graphs=3)
        out = dynamo.explain(long_loop)(np.arange(3.0), 500)
    assert out.graph_count == 3
    assert "a loop this long is not unrolled" in out.break_reasons[0]
    assert not any("recompiles on every iteration" in frame for frame in out.skipped_frames)


def test_a_short_loop_is_still_unrolled_into_one_graph(check):
    check(long_loop, np.arange(3.0), 5, graphs=1)
    out = dynamo.explain(long_loop)(np.arange(3.0), 5)
    assert out.graph_break_count == 0 and len(out.ops_per_graph[0]) == 11


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


def running_sum(x):
    s = x[0] * 0
    for i in range(1500):
        s = s + x[i]
    return s


def test_a_long_unrolled_chain_on_one_line_compiles(check):
    # 3,000 nodes made on one source line: the code printer must not recurse per node (the time
    # budget is raised so that a busy machine still unrolls the loop)
    from dynamo import config

    with config.patch(max_trace_seconds=60.0):
        check(running_sum, np.arange(1500.0), graphs=1)


# Loops whose body is a function of its own ---------------------------------------------------


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


# NumPy objects and functions without rules -----------------------------------------------------


def draws(x, rng):
    y = x * 2
    noise = rng.standard_normal(x.shape)  # a method of an object npdynamo does not model
    return y + noise


def test_a_generator_draws_the_same_numbers_and_ends_in_the_same_state(check):
    x = np.arange(3.0)
    eager_rng, compiled_rng = np.random.default_rng(7), np.random.default_rng(7)
    expected = draws(x, eager_rng)
    actual = dynamo.compile(draws)(x, compiled_rng)
    np.testing.assert_array_equal(actual, expected)
    assert compiled_rng.bit_generator.state == eager_rng.bit_generator.state
    out = dynamo.explain(draws)(x, np.random.default_rng(7))
    assert out.graph_count == 2 and "standard_normal" in out.break_reasons[0]


def legacy_stream(n):
    np.random.seed(3)
    a = np.random.rand(n)
    return a * 2 + np.random.rand(n)


def test_the_legacy_random_stream_gives_the_same_numbers(check):
    check(legacy_stream, 4, graphs=None)


def numpy_without_rules(x):
    return (np.median(x) + np.count_nonzero(x), np.split(x, 2), np.cov(x),
            np.histogram(x, bins=3)[0], np.mgrid[0:2, 0:3], np.linalg.cholesky(np.eye(2) * x[1]),
            np.shares_memory(x, x[1:]))


def test_numpy_functions_without_rules_break_at_the_call(check):
    check(numpy_without_rules, np.arange(1.0, 5.0), graphs=None)
    out = dynamo.explain(numpy_without_rules)(np.arange(1.0, 5.0))
    # each call breaks the graph; the frame itself is never given up
    assert out.graph_break_count >= 5
    assert not any(frame.startswith("numpy_without_rules:") for frame in out.skipped_frames)


def formats_a_numpy_scalar(x):
    total = x.sum()
    label = f"total={total:.2f}"
    bigger = total > 3
    return label, bigger, x * 2


def test_numpy_scalars_in_fstrings_and_comparisons_break_cleanly(check):
    check(formats_a_numpy_scalar, np.arange(4.0), graphs=None)
    out = dynamo.explain(formats_a_numpy_scalar)(np.arange(4.0))
    assert out.graph_count >= 2 and out.graph_break_count >= 1


def test_namedtuple_methods_made_from_strings_are_not_captured(check):
    import collections

    Pair = collections.namedtuple("Pair", "type value")  # `__new__` is exec'd from a string

    def makes_pairs(x):
        return [Pair(i, x * i) for i in range(3)][2].value

    check(makes_pairs, np.arange(3.0), graphs=None)
    assert _C.get_cache_entries(Pair.__new__.__code__) == []


def test_the_tracing_time_budget_is_a_setting():
    from dynamo import config

    with pytest.raises(ValueError, match="max_trace_seconds"):
        config.max_trace_seconds = 0
    with config.patch(max_trace_seconds=2.5):
        assert config.max_trace_seconds == 2.5


def test_the_tracing_time_budget_counts_cpu_time_not_the_machines_load(check, monkeypatch):
    # (wall time made the graphs of cholesky, lu and seidel_2d depend on how busy the machine
    # was: another process's load must not stop a loop from being unrolled)
    import time

    from dynamo import compile_frame, config

    wall = iter(range(0, 10**9, 1000))  # a wall clock that jumps 1000 s at every reading
    monkeypatch.setattr(compile_frame.time, "perf_counter", lambda: float(next(wall)))
    monkeypatch.setattr(compile_frame.time, "monotonic", lambda: float(next(wall)))
    with config.patch(max_trace_seconds=30.0):
        check(running_sum, np.arange(1500.0), graphs=1)
    assert time.thread_time() > 0  # (the clock the budget reads)


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


def formats_its_locals(x, name="loss"):
    value = float(x.sum())
    return "{name}: {value:.3f}".format(**locals())


def test_a_frame_that_reads_its_locals_by_name_is_not_split(check):
    # a resume function would show locals() only the live locals: the frame runs whole in Python
    check(formats_its_locals, np.arange(3.0), graphs=0)


def test_a_backends_own_callable_is_not_traced():
    seen = []

    def my_backend(gm, example_inputs):
        def run(*args):
            seen.append(run)
            return gm.forward(*args)
        return run

    def f(x):
        return np.sin(x) * 2

    out = dynamo.explain(f, backend=my_backend)(np.arange(3.0))
    assert out.graph_count == 1 and seen
    assert _C.get_cache_entries(seen[0].__code__) == []


def prints_the_old_value(x):
    y = x
    x = x + 1  # rebinds the local y's value was read from
    print(y)
    return x


def test_an_operand_read_from_a_rebound_local_keeps_its_value(check, capsys):
    check(prints_the_old_value, np.arange(3.0), graphs=1)
    out = capsys.readouterr().out.splitlines()
    assert out == ["[0. 1. 2.]"] * 3


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


def helper_returns(t):
    return t


def ops_then_try(y):
    a = y + 1
    try:
        ()[0]
    except IndexError:
        pass
    return helper_returns(a)


def test_a_resume_function_starting_in_a_try_block_keeps_its_handler(check):
    # (found by the control-flow fuzzer: the handler's stack depth was lost, a wrong result on
    # the first call and a crash on the second)
    check(ops_then_try, np.ones(3), graphs=1)
    check(ops_then_try, np.ones(3) * 2, graphs=0)


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


def rows_of_a_changing_array(x, y):
    out = []
    for r in y:
        out.append(r * 1)
        y += x  # the next row is read after this change, as in Python
    return out


def test_rows_are_read_when_their_iteration_starts(check):
    # (found by the control-flow fuzzer)
    check(rows_of_a_changing_array, np.arange(1.0, 4.0), np.zeros(3), graphs=1)


# try / with statements run as regions in the transformed code --------------------------------


class _Noisy:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return 5

    def __exit__(self, *exc):
        self.log.append(("exit", exc[0]))
        return False


def try_and_with(x, fail, log):
    y = np.sin(x) + 1
    try:
        if fail:
            raise ValueError("boom")
        z = y * 2
    except ValueError as e:
        log.append(str(e))
        z = y * 3
    finally:
        log.append("finally")
    with _Noisy(log) as c:
        w = z + c
    with np.errstate(all="ignore"):
        q = np.log(w - 100)
    return np.cos(q) + w


@pytest.mark.parametrize("fail", [False, True])
def test_try_and_with_statements_keep_their_semantics_and_the_code_after_is_captured(fail):
    x = np.arange(4.0)
    plain_log, log = [], []
    expected = try_and_with(x, fail, plain_log)
    out = dynamo.explain(try_and_with)(x, fail, log)
    np.testing.assert_array_equal(out.result, expected)
    assert log == plain_log
    # before the try, and after the last with statement: the rest is no longer plain Python
    assert out.graph_count >= 2, out.break_reasons
    assert any("np.cos" in "".join(ops) or "cos" in "".join(ops) for ops in out.ops_per_graph)


class _Swallow:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return True


def unbound_after_swallow(x, ctx):
    y = np.sin(x)
    with ctx:
        raise KeyError("swallowed")
        w = y * 2     # noqa: F841 (never runs)
    return w


def test_a_local_unbound_after_a_swallowed_exception_raises_as_in_plain_python():
    x = np.arange(3.0)
    with pytest.raises(UnboundLocalError):
        unbound_after_swallow(x, _Swallow())
    compiled = dynamo.compile(unbound_after_swallow, backend="eager")
    with pytest.raises(UnboundLocalError):
        compiled(x, _Swallow())


def divides_by_zero(divisor):
    return 10 + divisor / 0 + 30


def test_traceback_through_a_break_instruction_shows_the_users_columns():
    def formatted(fn):
        try:
            fn(3)
        except ZeroDivisionError:
            return traceback.format_exc().splitlines()[-3:]

    assert formatted(dynamo.compile(divides_by_zero, backend="eager")) == formatted(divides_by_zero)


class _Base:
    def m(self, x):
        return x + 1


class _Derived(_Base):
    def m(self, x):
        y = np.sin(x)
        print("break")                   # graph break: the rest is a resume function
        with np.errstate(all="ignore"):  # a region: its exit is another resume function
            z = super().m(y)
        for i in range(3):               # a loop around super(): runs in plain Python
            print(i)
            z = z + super().m(0.0)
        return super().m(z) * 2


def test_zero_argument_super_after_graph_breaks(capsys):
    x = np.arange(3.0)
    expected = _Derived().m(x)
    plain_out = capsys.readouterr().out
    out = dynamo.explain(_Derived.m)(_Derived(), x)
    np.testing.assert_array_equal(out.result, expected)
    assert capsys.readouterr().out == plain_out
    assert out.graph_count >= 2


# enumerate/zip over an array the loop writes to (found by the control-flow fuzzer) -----------


def enumerate_rows_of_a_mutated_array(x, y):
    for i, r in enumerate(x):
        x[-1] = (y * r)[0].sum() + i
    return x * 1


def zip_rows_of_a_mutated_array(x, y):
    for r, s in zip(x, y):
        x[-1] = r + s
    return x * 1


@pytest.mark.parametrize("fn", [enumerate_rows_of_a_mutated_array, zip_rows_of_a_mutated_array])
def test_enumerate_and_zip_read_each_row_when_reached(check, fn):
    check(fn, np.array([-1.62, 0.53, -0.17, 1.6]), np.array([1.18, 0.53, 1.88, -0.35]), graphs=1)


# A code object without a line table (issue 6, item 4) ----------------------------------------


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
