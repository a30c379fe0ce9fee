"""Locals a loop body function assigns live as long as in plain Python: in the frame after the
loop, and no longer than to the store that rebinds them.

In: functions with a ``for`` or ``while`` loop that the translator does not unroll (its body
calls `note`, which the translator cannot trace: the loop runs in the transformed code, its body
as a function of its own, `dynamo/loops.py`). Out: the events they record (their own, and the
deaths of objects, through `weakref.finalize`) are the same compiled as plain: the object the
last iteration bound to the loop variable or to another local the loop never reads back stays
alive until the function returns (plain Python keeps it in the frame), also after a ``break``,
a zero-iteration loop, nested loops and a loop in a resume function, and for a local only some
iterations assign; reading the loop variable after the loop gives the last value. The old
value of a local the body rebinds (a kept one, a carried one, the loop variable, one bound
before the loop) dies at the store, as in plain Python, since the driver hands it over to the
body's frame (`LoopPlan.handed_over`); when the body raises, the traceback's frame holds the
iteration's locals; whether such a store may run a finalizer is decided with a guard, since the
body sees other values on every iteration.

Found by CPython's test_gc (GCCallbackTests.test_collect_garbage: after ``for e in gc.garbage:``
the last ``e`` keeps an uncollectable pair reachable).
"""

from __future__ import annotations

import weakref

import numpy as np
import pytest

import dynamo
from dynamo import instructions

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


@dynamo.disable
def made(n):
    """`make` called from compiled code (a graph break; `make` itself is not compiled)."""
    return make(n)


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


def same_events_each(fn, make_args, cases):
    """`same_events` for each case (`make_args(case)` makes the arguments), with one compiled
    function: the first case compiles it (one whose loop runs: the translator unrolls a loop
    over no items), the others run what it compiled where its guards hold."""
    compiled = dynamo.compile(fn, backend="eager")
    for case in cases:
        plain = events(fn, *make_args(case)())
        assert events(compiled, *make_args(case)()) == plain, case


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


def test_rebinding_a_kept_local_frees_the_old_value_at_the_store():
    same_events(rebinds, items(3))


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
    locals costs no recompile per iteration: the body's version for the first iteration (a kept
    local still unbound) and the one for every later one serve the next call too."""
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


# Lifetimes of what the driver hands over to the body (`LoopPlan.handed_over`) --------------------


def rebinds_carried(x, objs):
    y = x + 1
    c = make(50)
    for e in objs:
        note("item", e.n)
        c = make(60 + e.n)  # (plain Python: the previous c dies right here)
        note("stored", e.n)
        y = y * 2
    note("after")
    return c.n


def test_rebinding_a_carried_local_frees_the_old_value_at_the_store():
    # (c is read after the loop: the body gets it and returns it every iteration)
    same_events(rebinds_carried, items(3))


def carried_then_dead(x, objs, stop):
    y = x + 1
    c = make(50)
    for e in objs:
        note("item", e.n, c.n)
        c = make(60 + e.n)  # (read by the next iteration only; plain Python keeps the last c)
        if e.n == stop:
            break
        y = y * 2
    objs.clear()
    note("cleared")
    return y


def test_a_carried_local_nothing_reads_after_the_loop_lives_to_the_return():
    def args(case):
        n, stop = case
        return lambda: (np.ones(2), [make(i) for i in range(n)], stop)

    # (a break; the items run out; no item, through the version the first case compiled)
    same_events_each(carried_then_dead, args, [(3, 1), (3, 9), (0, 9)])


def kept_from_before(x, objs):
    y = x + 1
    t = make(70)
    e = make(90)
    note("made")  # (the loop is in a resume function, which gets t and e)
    for e in objs:
        t = make(80 + e.n)  # (plain Python: 70 dies at the first store, 90 at FOR_ITER's)
        note("item", e.n)
        y = y * 2
    objs.clear()
    note("cleared")  # (no iteration: 70 and 90 are still bound)
    return y


def test_a_kept_local_keeps_its_value_from_before_the_loop_until_rebound():
    same_events_each(kept_from_before, items, [3, 0, 1])


def rebinds_loop_variable(x, objs):
    y = x + 1
    for e in objs:
        note("item", e.n)
        objs[e.n] = None
        e = None  # (plain Python: the item dies right here; nothing else holds it)
        note("rebound")
        y = y * 2
    return y


def test_rebinding_the_loop_variable_frees_the_item_at_the_store():
    same_events(rebinds_loop_variable, items(3))


def raises_in_an_iteration(x, objs):
    y = x + 1
    for e in objs:
        t = make(100 + e.n)
        note("item", e.n)
        y = y * 2
        if e.n == 1:
            raise ValueError(e.n)
    return y


def catches(x, objs):
    try:
        raises_in_an_iteration(x, objs)
    except ValueError:
        note("caught")  # (plain Python: the traceback still holds the frame, and t in it)
    note("handled")
    return 0


def test_locals_of_an_iteration_that_raised_live_with_the_traceback():
    plain = events(catches, *items(3)())
    assert plain.index(("caught",)) < plain.index(("del", 101)) < plain.index(("handled",))
    assert plain.index(("del", 100)) < plain.index(("item", 1))  # (rebound before the raise)
    assert events(dynamo.compile(catches, backend="eager"), *items(3)()) == plain


def frame_locals_at_raise(fn, *args):
    try:
        fn(*args)
    except ValueError as exc:
        tb = exc.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        # (y, an array the graph computed that nothing reads later, is not kept: see
        # test_locals_after_the_loop_in_a_traceback)
        return sorted((k, getattr(v, "n", None)) for k, v in tb.tb_frame.f_locals.items()
                      if not k.startswith("___") and k != "y")
    finally:
        LOG.clear()


@pytest.mark.parametrize("n", [2, 4])
def test_a_traceback_from_the_body_shows_the_iterations_locals(n):
    def args():
        return np.ones(2), [make(i) for i in range(n)]

    plain = frame_locals_at_raise(raises_in_an_iteration, *args())
    assert ("e", 1) in plain and ("t", 101) in plain
    compiled = dynamo.compile(raises_in_an_iteration, backend="eager")
    assert frame_locals_at_raise(compiled, *args()) == plain


# Kept locals an iteration may leave unbound (`LoopPlan.unsure`) -----------------------------------


def two_branches(x, objs):
    y = x + 1
    for e in objs:
        if e.n == 0:
            a = make(300)
        if e.n == 4:
            b = make(400)
        y = y * 2
        note("item", e.n)
    objs.clear()
    note("cleared")
    raise ValueError("after")  # (a traceback shows which of a, b are bound)


def test_locals_bound_in_some_iterations_only():
    # 6 items: a and b bound; 3: a bound, b not (the code after the loop continues in the
    # frame); none: neither, nor e
    compiled = dynamo.compile(two_branches, backend="eager")
    for n in (6, 3, 0):
        plain = events(two_branches, *items(n)())
        ran = events(compiled, *items(n)())
        # (up to the note; the order in which the frame's locals die after it is the frame's
        # slot order, see test_nested_loops)
        cut = plain.index(("cleared",))
        assert ran[:cut + 1] == plain[:cut + 1]
        assert sorted(ran, key=str) == sorted(plain, key=str)
        assert ("del", 300) not in plain[:cut]
        shown = frame_locals_at_raise(two_branches, *items(n)())
        assert [k for k, _ in shown] == sorted(["objs", "x"] + (["a", "e"] if n else [])
                                               + (["b"] if n > 4 else []))
        assert frame_locals_at_raise(compiled, *items(n)()) == shown


def breaks_with_some_bound(x, objs, stop):
    y = x + 1
    for e in objs:
        if e.n == 0:
            a = make(300)
        if e.n == 1:
            b = make(400)
        if e.n == stop:
            c = make(500)
            break
        y = y * 2
        note("item", e.n)
    objs.clear()
    note("cleared")
    return y


@pytest.mark.parametrize("stop", [0, 1, 2, 9])
def test_a_break_with_locals_bound_in_some_iterations_only(stop):
    def args():
        return np.ones(2), [make(i) for i in range(4)], stop

    plain = events(breaks_with_some_bound, *args())
    compiled = events(dynamo.compile(breaks_with_some_bound, backend="eager"), *args())
    cut = plain.index(("cleared",))
    assert compiled[:cut + 1] == plain[:cut + 1]
    assert sorted(compiled, key=str) == sorted(plain, key=str)


def while_assigns_sometimes(x, objs):
    y = x + 1
    i = 0
    while i < len(objs):
        e = objs[i]
        if e.n == 1:
            z = make(200)
        i += 1
        y = y * 2
        note("item", e.n)
    objs.clear()
    note("cleared")
    return y


def test_while_loop_local_assigned_in_one_iteration():
    same_events_each(while_assigns_sometimes, items, [3, 0, 1])


def nested_sometimes(x, rows):
    y = x + 1
    for row in rows:
        for e in row:  # (an empty row leaves e as it was: e may be unbound in the outer body)
            note("item", e.n)
        y = y * 2
    rows.clear()
    note("after")
    return y


def test_nested_loop_variable_bound_in_some_rows_only():
    compiled = dynamo.compile(nested_sometimes, backend="eager")
    for shape in ((0, 2, 0), (2, 0, 0), (0, 0), (1,)):
        def args():
            return np.ones(2), [[make(10 * r + c) for c in range(k)]
                                for r, k in enumerate(shape)]

        plain = events(nested_sometimes, *args())
        ran = events(compiled, *args())
        cut = plain.index(("after",))
        assert ran[:cut + 1] == plain[:cut + 1], shape
        assert sorted(ran, key=str) == sorted(plain, key=str), shape


def sometimes_then_try(x, objs):
    y = x + 1
    for e in objs:
        if e.n == 1:
            z = make(200)
        y = y * 2
        note("item", e.n)
    try:  # (e bound, z not: the rest continues in the frame, in the plain copy of it)
        objs.clear()
        note("cleared")
    finally:
        note("finally")
    return y


def test_a_loop_followed_by_a_try_statement():
    same_events_each(sometimes_then_try, items, [3, 0, 1])


# The body's translator decides on an earlier iteration's value with a guard -----------------------

STATE = [0]


class Payload:
    pass


@dynamo.disable
def payload(n):
    """An int for even n; for odd n an object whose death sets STATE[0] (made outside
    compiled code: the call is a graph break, the store after it is in a resume function)."""
    if n % 2 == 0:
        return n
    obj = Payload()
    weakref.finalize(obj, STATE.__setitem__, 0, STATE[0] + 1)
    return obj


def reads_state_after_a_store(x, n):
    y = x + 1
    for i in range(n):
        t = payload(i)  # (plain Python: when the old t is a Payload, STATE changes right here)
        y = y + STATE[0]
        note("state", y.tolist())
    return y


def test_a_rebinding_decided_on_an_earlier_iterations_value_is_guarded():
    # (the first iteration's old t is the marker, the second's an int: a decision taken on
    # those without a guard would let the third's Payload die after the graph that read STATE)
    def run(fn):
        STATE[0] = 0
        return events(fn, np.zeros(1), 5)

    plain = run(reads_state_after_a_store)
    assert plain[2] == ("state", [2.0])
    assert run(dynamo.compile(reads_state_after_a_store, backend="eager")) == plain


def rebinds_a_function(x, objs):
    y = x + 1
    for e in objs:
        f = lambda v: v + 1  # (a function's death may run code: the graph ends at this store)
        t = y * 2
        o = made(100 + e.n)  # (plain Python: the previous o dies right here)
        note("item", e.n)
        y = f(t)
    return y


def test_a_second_call_runs_the_versions_the_first_one_compiled(backend):
    # (the version made for the second iteration ends the graph where f is rebound: its guard on
    # f's type keeps it from taking the next call's first iteration, where f is still unbound,
    # and its continuation would see t unbound and compile again)
    compiled = dynamo.compile(rebinds_a_function, backend=backend)
    compiled(*items(3)())
    first = backend.count
    compiled(*items(3)())
    assert backend.count == first
    same_events(rebinds_a_function, items(3))


def inert_temporaries(x, objs):
    y = x + 1
    for e in objs:
        t = y * 2  # (an array, an int and a tuple of ints: their deaths run nothing)
        k = t.ndim * 2
        s = y.shape
        o = make(100 + e.n)  # (plain Python: the previous o dies right here)
        note("item", e.n)
        y = t + k + s[0]
    note("after")
    return y


def test_rebinding_an_inert_kept_local_does_not_break_the_graph():
    same_events(inert_temporaries, items(3))
    reasons = list(map(str, dynamo.explain(inert_temporaries)(*items(3)()).break_reasons))
    assert any("rebinding of local 'o'" in reason for reason in reasons)
    assert not any(f"rebinding of local {name!r}" in reason
                   for reason in reasons for name in "tks")
    LOG.clear()


def test_unbound_marker_is_one_object():
    import copy
    import pickle
    assert copy.deepcopy(instructions.UNBOUND) is instructions.UNBOUND
    assert pickle.loads(pickle.dumps(instructions.UNBOUND)) is instructions.UNBOUND
    assert repr(instructions.UNBOUND) == "<unbound local>"
