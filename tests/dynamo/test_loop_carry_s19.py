"""Locals a loop body function assigns stay in the frame after the loop, as in plain Python.

In: functions with a ``for`` or ``while`` loop that the translator does not unroll (its body
calls `note`, which the translator cannot trace: the loop runs in the transformed code, its body
as a function of its own, `dynamo/loops.py`). Out: the events they record (their own, and the
deaths of objects, through `weakref.finalize`) are the same compiled as plain: the object the
last iteration bound to the loop variable or to another local the loop never reads back stays
alive until the function returns (plain Python keeps it in the frame), also after a ``break``,
a zero-iteration loop, nested loops and a loop in a resume function; reading the loop variable
after the loop gives the last value.

Found by CPython's test_gc (GCCallbackTests.test_collect_garbage: after ``for e in gc.garbage:``
the last ``e`` keeps an uncollectable pair reachable).
"""

from __future__ import annotations

import weakref

import numpy as np
import pytest

import dynamo
from dynamo import loops

LOG: list = []
REFS: list = []


@dynamo.disable
def note(*event):
    """Record an event (never traced: a call of it is a graph break)."""
    LOG.append(event)


@dynamo.disable
def note_alive():
    LOG.append(("alive", REFS[-1]() is not None))


@dynamo.disable
def keep_ref(value):
    REFS.append(weakref.ref(value))


class Obj:
    pass


def make(n):
    """An object whose death is recorded, made outside compiled code."""
    obj = Obj()
    obj.n = n
    weakref.finalize(obj, LOG.append, ("del", n))
    return obj


def events(fn, *args):
    """What `fn(*args)` records, up to and including its return (or exception)."""
    LOG.clear()
    REFS.clear()
    try:
        result = fn(*args)
    except Exception as exc:  # (the exception's traceback dies with it here)
        result = repr(exc)
    note("returned", result if not isinstance(result, np.ndarray) else result.tolist())
    out = list(LOG)
    LOG.clear()
    REFS.clear()
    return out


def same_events(fn, make_args):
    """Plain Python and the compiled function record the same; `make_args` makes fresh
    arguments for each run."""
    plain = events(fn, *make_args())
    compiled = events(dynamo.compile(fn, backend="eager"), *make_args())
    assert compiled == plain
    return plain


def items(n):
    return lambda: (np.ones(2), [make(i) for i in range(n)])


def last_item(x, objs):
    y = x + 1
    for e in objs:
        y = y * 2
        note("item", e.n)
    objs.clear()
    note("cleared")  # (plain Python: the last item is still bound to e here)
    return y


@pytest.mark.parametrize("n", [0, 1, 3])
def test_loop_variable_keeps_the_last_item_alive_until_return(n):
    plain = same_events(last_item, items(n))
    if n:
        assert plain.index(("cleared",)) < plain.index(("del", n - 1))


def breaks_out(x, objs):
    y = x + 1
    for e in objs:
        t = make(100 + e.n)
        y = y * 2
        if e.n == 1:
            break
        note("item", e.n)
    objs.clear()
    note("cleared")
    return y


@pytest.mark.parametrize("n", [0, 1, 3])
def test_locals_stay_after_break(n):
    same_events(breaks_out, items(n))


def assigns_sometimes(x, objs):
    y = x + 1
    for e in objs:
        if e.n == 0:
            z = make(200)
        y = y * 2
        note("item", e.n)
    objs.clear()
    note("cleared")
    return y


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.xfail(strict=True, reason=(
    "a local the body assigns on some paths only is not kept (see dynamo/loops.py): it dies "
    "when the body returns"))
def test_local_assigned_in_one_iteration_keeps_its_value(n):
    plain = same_events(assigns_sometimes, items(n))
    if n > 1:  # (made in the first iteration, alive to the end)
        assert plain.index(("cleared",)) < plain.index(("del", 200))


def while_loop(x, objs):
    y = x + 1
    i = 0
    while i < len(objs):
        e = objs[i]
        i += 1
        y = y * 2
        note("item", e.n)
    objs.clear()
    note("cleared")
    return y


@pytest.mark.parametrize("n", [0, 1, 3])
def test_while_loop_keeps_its_locals(n):
    same_events(while_loop, items(n))


def raises_in_body(x, objs):
    y = x + 1
    for e in objs:
        if e.n == 1:
            t = make(100 + e.n)
        y = y * 2
        note("item", e.n)
        if e.n == 1:
            raise ValueError(e.n)
    objs.clear()
    note("cleared")
    return y


@pytest.mark.parametrize("n", [0, 1, 3])
def test_exception_from_the_body(n):
    same_events(raises_in_body, items(n))


def rebinds(x, objs):
    y = x + 1
    for e in objs:
        t = make(100 + e.n)  # (plain Python: the previous t dies right here)
        note("item", e.n)
        y = y * 2
    note("after")
    return y


@pytest.mark.xfail(strict=True, reason=(
    "a kept local the body rebinds (not the loop variable) holds its old value in the loop "
    "driver until the body returns: it dies one iteration's rest later than in plain Python "
    "(see dynamo/loops.py, why the body does not receive it)"))
def test_rebinding_a_kept_local_frees_the_old_value_at_the_store():
    same_events(rebinds, items(3))


def test_rebound_kept_local_dies_before_the_next_item_is_noted():
    # (what the difference above still guarantees: never earlier than plain Python, and the
    # last value lives to the return)
    args = items(3)
    plain = events(rebinds, *args())
    compiled = events(dynamo.compile(rebinds, backend="eager"), *args())
    assert sorted(compiled, key=str) == sorted(plain, key=str)
    for n in (0, 1):
        assert compiled.index(("item", n)) < compiled.index(("del", 100 + n))
    assert compiled.index(("after",)) < compiled.index(("del", 102))


def reads_loop_variable(x, n):
    y = x + 1
    for i in range(n):
        note("item", i)
        y = y + i
    return i, y.tolist()


def deletes_loop_variable(x, objs):
    y = x + 1
    for e in objs:
        note("item", e.n)
        y = y * 2
    del e
    note("deleted")
    return y


@pytest.mark.parametrize("n", [0, 1, 3])
def test_loop_variable_read_after_the_loop(n):
    result = same_events(reads_loop_variable, lambda: (np.ones(2), n))[-1]
    if n:
        assert result[1][0] == n - 1
    else:
        assert "UnboundLocalError" in result[1]


# (n = 0 left out: the translator unrolls the empty loop and its `del e` of the unbound local
# does not raise UnboundLocalError, a bug of its own, symbolic_convert.DELETE_FAST)
@pytest.mark.parametrize("n", [1, 3])
def test_loop_variable_deleted_after_the_loop(n):
    same_events(deletes_loop_variable, items(n))


def nested(x, rows):
    y = x + 1
    for row in rows:
        for e in row:
            note("item", e.n)
            if e.n == 4:
                break
        y = y * 2
    rows.clear()
    note("after")  # (plain Python: the last row and its last item are still bound here)
    return y


def test_nested_loops():
    def args():
        return np.ones(2), [[make(3 * r + c) for c in range(3)] for r in range(3)]
    plain = events(nested, *args())
    compiled = events(dynamo.compile(nested, backend="eager"), *args())
    # (up to the note; the order in which the frame's locals die at its return is not what
    # this is about: a resume function has them in another order)
    cut = plain.index(("after",))
    assert compiled[:cut + 1] == plain[:cut + 1]
    assert sorted(compiled, key=str) == sorted(plain, key=str)
    assert ("del", 8) not in plain[:cut]


def loop_after_a_break(x, objs):
    y = x + 1
    note("start")  # (the loop below is in a resume function)
    y = y * 3
    for e in objs:
        note("item", e.n)
        y = y * 2
    objs.clear()
    note("cleared")
    return y


@pytest.mark.parametrize("n", [0, 1, 3])
def test_loop_in_a_resume_function(n):
    same_events(loop_after_a_break, items(n))


def array_of_last_iteration(x, arrays):
    y = x + 1
    for a in arrays:
        t = a * 2
        keep_ref(t)
    arrays.clear()
    note_alive()
    return y


def test_array_of_the_last_iteration_stays_referenced():
    plain = same_events(array_of_last_iteration,
                        lambda: (np.ones(2), [np.full(3, float(i)) for i in range(3)]))
    assert ("alive", True) in plain


def raises_after(x, objs):
    y = x + 1
    for e in objs:
        t = e.n * 2
        note("item", e.n)
    raise KeyError("after")


def test_locals_after_the_loop_in_a_traceback():
    def shown(fn, n):
        try:
            fn(np.ones(2), [make(i) for i in range(n)])
        except KeyError as exc:
            tb = exc.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            # (y, an array the graph computed and nothing reads after the loop, is not kept:
            # that would make every dead intermediate a graph output, as at any graph break)
            names = {k: v for k, v in tb.tb_frame.f_locals.items()
                     if not k.startswith("___") and k != "y"}
            return sorted(names), names.get("t"), getattr(names.get("e"), "n", None)

    # (2 first: traced with no items, the loop is unrolled and the frame raises in the trace,
    # which then leaves it to plain Python)
    for n in (2, 0):
        plain = shown(raises_after, n)
        assert plain[0] == (["e", "objs", "t", "x"] if n else ["objs", "x"])
        assert shown(dynamo.compile(raises_after, backend="eager"), n) == plain
    LOG.clear()


def test_the_body_is_a_function_and_compiles_once():
    """The loops above run as body functions (what the fix is about), and passing the kept
    locals adds no guard: the body compiles once for all iterations."""
    calls = []

    def backend(gm, example_inputs):
        calls.append(gm)
        return gm.forward

    out = dynamo.explain(last_item)(np.ones(2), [make(i) for i in range(5)])
    assert any("loop" in reason or "body" in reason for reason in map(str, out.break_reasons))
    compiled = dynamo.compile(assigns_sometimes, backend=backend)
    compiled(np.ones(2), [make(i) for i in range(6)])
    first = len(calls)
    compiled(np.ones(2), [make(i) for i in range(6)])
    assert len(calls) == first  # (no recompile on the second call)
    LOG.clear()


def test_unbound_marker_is_one_object():
    import copy
    import pickle
    assert copy.deepcopy(loops.UNBOUND) is loops.UNBOUND
    assert pickle.loads(pickle.dumps(loops.UNBOUND)) is loops.UNBOUND
    assert repr(loops.UNBOUND) == "<unbound local>"
