"""What differs between CPython 3.10, 3.11, 3.12 and 3.13 (issue 9), checked on whichever one runs
the suite: the refusal of other versions at install and import time, `dynamo.compat.decode`,
the instruction factory, and regressions found while porting (each failed on one version).
"""

from __future__ import annotations

import contextlib
import dis
import io
import os
import subprocess
import sys

import numpy as np
import pytest

import dynamo
from dynamo import compat
from dynamo import instructions as ins

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def _reset():
    dynamo.reset()
    yield
    dynamo.reset()


# Refusing other versions -----------------------------------------------------------------------


@pytest.mark.parametrize("version", [(3, 9), (3, 14), (2, 7)])
def test_setup_py_refuses_other_versions_with_a_clear_message(version):
    code = (f"import sys; sys.version_info = {version!r} + (0, 'final', 0); "
            f"sys.argv = ['setup.py', '--version']; "
            f"exec(compile(open('setup.py').read(), 'setup.py', 'exec'))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0
    assert "npdynamo supports CPython 3.10, 3.11, 3.12 and 3.13" in done.stderr
    assert "%d.%d" % version in done.stderr


@pytest.mark.parametrize("version", [(3, 9), (3, 14)])
def test_import_refuses_other_versions_with_a_clear_message(version):
    code = (f"import sys; sys.version_info = {version!r} + (0, 'final', 0)\n"
            f"try:\n    import dynamo\nexcept ImportError as e:\n    print('refused:', e)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert "refused: npdynamo supports CPython 3.10, 3.11, 3.12 and 3.13" in done.stdout
    assert "%d.%d" % version in done.stdout


def test_this_version_is_supported_and_the_extension_is_its_own():
    assert (3, 10) <= sys.version_info[:2] <= (3, 13)
    tag = f"cpython-{sys.version_info.major}{sys.version_info.minor}"
    assert tag in os.path.basename(dynamo._C.__file__)


# decode and the factory -------------------------------------------------------------------------


def _two_locals(a, b):
    c = a + b
    return c, a


def test_decode_splits_superinstructions_and_checks_local_loads():
    names = [i.name for i in compat.decode(_two_locals.__code__) if hasattr(i, "name")]
    assert not any(n in ("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST")
                   for n in names)
    if compat.PY312:  # (3.12 stopped checking LOAD_FAST for NULL: copied code must check)
        assert "LOAD_FAST" not in names and names.count("LOAD_FAST_CHECK") == 4
    else:
        assert names.count("LOAD_FAST") == 4
    # each byte offset (what the exception table names) maps to that instruction in the list
    decoded = [i for i in compat.decode(_two_locals.__code__) if hasattr(i, "name")]
    index_of = compat.offsets_to_indices(_two_locals.__code__)
    for inst in dis.get_instructions(_two_locals):
        first_half = inst.opname.split("_LOAD_FAST")[0].split("_STORE_FAST")[0]
        assert decoded[index_of[inst.offset]].name.startswith(
            first_half if first_half != inst.opname else inst.opname.replace("_CHECK", "")), inst


def test_the_factory_spells_a_keyword_call_this_version_runs():
    from bytecode import Bytecode

    def target(a, *, b):
        return a - b

    bc = Bytecode(ins.resume() + ins.with_null(ins.load_const(target)) + ins.load_const(10)
                  + ins.load_const(3) + ins.call_sequence(2, ("b",)) + ins.return_value())
    fn = type(target)(ins.to_code(bc), {})
    assert fn() == 7
    names = {i.opname for i in dis.get_instructions(fn)}
    expected = {(3, 10): "CALL_FUNCTION_KW", (3, 11): "PRECALL", (3, 12): "KW_NAMES",
                (3, 13): "CALL_KW"}[sys.version_info[:2]]
    assert expected in names


# Regressions found while porting -----------------------------------------------------------------


COMPREHENSION_IN_A_TRY = """
import numpy as np, dynamo

def f(x, y):
    a0 = x + y
    dynamo.graph_break()
    try:
        a0 = sum([np.abs(t) for t in ((y / a0), x)])
    except (IndexError, ValueError) as exc:
        print("caught", type(exc).__name__, exc)
    return a0

x, y = np.ones(3), np.arange(3.0)
print(f(x, y).tolist() == dynamo.compile(f)(x, y).tolist())
"""


def test_a_comprehension_in_a_try_passes_no_unbound_local():
    # 3.13: the try statement's exit passed the comprehension's variable `t` on to the resume
    # function; it is NULL there (restored to unbound after the loop), which crashed 3.12+
    done = subprocess.run([sys.executable, "-c", COMPREHENSION_IN_A_TRY], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "True"


def branch_on_a_graph_comparison(x, y):
    if x.sum() > y.sum():
        return np.cos(x)
    return np.cos(y)


def test_a_branch_on_a_numpy_bool_from_the_graph_takes_the_right_way():
    # 3.13 jumps only on exact bools: the graph's numpy.bool_ fell through to the `if` branch
    f = dynamo.compile(branch_on_a_graph_comparison)
    x, y = np.zeros(3), np.arange(3.0)
    np.testing.assert_array_equal(f(x, y), branch_on_a_graph_comparison(x, y))
    np.testing.assert_array_equal(f(y, x), branch_on_a_graph_comparison(y, x))


def unary_plus(x):
    return +x * 2


def test_unary_plus_is_traced():
    # (3.12: CALL_INTRINSIC_1 INTRINSIC_UNARY_POSITIVE)
    out = dynamo.explain(unary_plus)(np.arange(3.0))
    assert out.graph_count == 1 and out.graph_break_count == 0
    np.testing.assert_array_equal(out.result, unary_plus(np.arange(3.0)))


def closure_made_in_the_frame(x):
    a = 1

    def g():
        return a

    a = np.sin(x)
    return g, a * 2


def test_a_closure_made_in_the_frame_is_captured():
    # (3.13: MAKE_FUNCTION takes the code only; SET_FUNCTION_ATTRIBUTE adds the closure)
    out = dynamo.explain(closure_made_in_the_frame)(np.arange(3.0))
    assert out.graph_count == 1, out.skipped_frames
    g, doubled = out.result
    np.testing.assert_array_equal(g(), np.sin(np.arange(3.0)))
    np.testing.assert_array_equal(doubled, 2 * np.sin(np.arange(3.0)))


def not_of_a_graph_comparison(x):
    w = not (x.max() > 2)
    print(end="")
    return w


def test_not_of_a_graph_comparison_is_the_python_bool():
    # 3.13's UNARY_NOT reads an exact bool (the user's COMPARE_OP casts): run after the graph,
    # it answered False for the graph's numpy.bool_ False
    for x in (np.arange(3.0), np.arange(4.0)):
        assert dynamo.compile(not_of_a_graph_comparison)(x) is not_of_a_graph_comparison(x)


def _nonlocal_then_inlined_closure():
    scale = 3.0

    def g(x):
        nonlocal scale

        def f(v):
            return v * scale

        y = f(x)
        scale = 4.0  # stored in this trace: f, inlined after it, must read 4.0
        return y + f(x)

    return g


def test_an_inlined_closure_reads_a_free_variable_stored_in_the_trace():
    # (3.10: a resume function's cells are free variables, so every `x = ...` after a break
    # in a function with a closure is this case; 3.11+ hit it with `nonlocal`)
    x = np.array([1.0, 2.0])
    expected = _nonlocal_then_inlined_closure()(x)
    np.testing.assert_array_equal(dynamo.compile(_nonlocal_then_inlined_closure())(x), expected)


def _makes_a_lambda_across_a_break(x):
    f = lambda v: v * 2  # noqa: E731
    print(end="")
    return f, f(x)


def test_a_function_rebuilt_after_a_break_keeps_its_qualified_name():
    # (3.10: MAKE_FUNCTION takes the qualified name as an operand; the rebuilt lambda was named
    # '<lambda>', not '_makes_a_lambda_across_a_break.<locals>.<lambda>')
    f, _ = dynamo.compile(_makes_a_lambda_across_a_break)(np.ones(2))
    assert f.__qualname__ == _makes_a_lambda_across_a_break(np.ones(2))[0].__qualname__


def test_a_continuation_shares_the_frames_cells_on_every_version():
    # (3.10 has no MAKE_CELL: a continuation's prologue calls _C.adopt_cells(), which makes each
    # cell argument its cell variable's cell; before, 3.10 passed the cells as free variables,
    # and an emptied one read as NameError instead of UnboundLocalError)
    def f(x):
        a = x + 1.0
        def get():
            return a
        print("break")  # (a graph break: the rest is a resume function)
        a = a * 2.0     # written in the resume function, read by the closure made before it
        seen = get()
        del a
        try:
            a  # noqa: B018
        except UnboundLocalError as e:
            return seen, type(e).__name__
    x = np.arange(3.0)
    expected = f(x)
    got = dynamo.compile(f)(x)
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1] == expected[1] == "UnboundLocalError"
    from dynamo.resume import passed_cells
    assert passed_cells(f.__code__) == frozenset()  # (the user's code is no continuation)


@pytest.mark.skipif(not compat.PY310, reason="3.11+ make a passed cell the variable's cell "
                    "with MAKE_CELL; adopt_cells does nothing there")
def test_adopt_cells_refuses_an_argument_that_is_not_a_cell():
    from dynamo import _C

    def f(a):
        def get():
            return a
        _C.adopt_cells()
        return get()
    with pytest.raises(SystemError, match="argument 'a' of f is not a cell"):
        f(1)


def test_a_closure_over_an_inlined_comprehensions_variable_gets_its_own_cell():
    # 3.12+ inlines comprehensions: a loop variable a lambda in the body captures gets a new
    # cell (MAKE_CELL in the middle of the frame), and the shadowed one is put back after the
    # loop. The translator named cells by variable, so the lambda read the restored outer cell:
    # NameError under capture (CPython's test_listcomps). On 3.10/3.11 a comprehension is a
    # function of its own; the test runs everywhere.
    def f(x, c):
        funcs = [lambda: b * x for b in c]
        y = np.sin(x)
        b = 10
        return [g() for g in funcs], y + b

    def nested(x):
        (func, inner_b), = [[lambda: b for b in c] + [x] for c in [[1.5]]]
        return np.cos(x) + func(), inner_b

    x = np.linspace(0, 1, 4)
    for fn, args in ((f, (x, [1.0, 2.0])), (nested, (x,))):
        want = fn(*args)
        for _ in range(2):
            got = dynamo.compile(fn, backend="eager")(*args)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)


SHADOWED_CELL = r'''
import numpy as np
import dynamo
dynamo.config.suppress_errors = False


def f(a):
    x = 10; g = (i + x for i in range(3)); x = 5
    t = False; h = ((i, j) for i in range(x) if t for j in range(x))
    y = np.sin(a)
    x = 3; t = True
    odd = [x * x for x in range(6) if x % 2 if x % 3]
    return list(g), list(h), odd, x, y.tolist()


a = np.linspace(0, 1, 3)
want = f(a)
for _ in range(2):
    got = dynamo.compile(f, backend="eager")(a)
    assert got == want, (got, want)
print("same")
'''


def test_a_comprehension_variable_in_a_cells_slot_keeps_the_cell():
    # 3.12+: the inlined comprehension's `x` lives in the slot of the cell `x` (the generator
    # expressions close over it). The cell counted as a live *local* of the resume function:
    # the transformed code stored a plain value into the cell's slot, and the next STORE_DEREF
    # crashed the interpreter (CPython's test_grammar test_comprehension_specials, with
    # suppress_errors=False; with it, "co_varnames is too small" internal errors). In a
    # subprocess: a regression would be a crash.
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", SHADOWED_CELL],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "same", done.stderr[-3000:]


# 3.12+: RETURN_CONST in body functions ----------------------------------------------------------


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
