"""`del x` and rebinding `x` inside a try/with block that runs as a *body function*
(`dynamo.region_body`): the old value must die where plain Python frees it, not when the
calling frame ends (CPython's test_raise TestContext.test_3611 checks a finalizer ran inside
its `with`).

The calling frame used to keep its own references while the body ran: the local's slot, the
CALL's argument on its value stack (with the PEP 523 hook installed no version inlines a
call), and, after a graph break, the resume function's argument slot the local came from.
Now the call goes through `_C.call_owned` (the stack references move to the body's frame), a
local the block may assign holds None in the caller meanwhile, and a resume function's
argument slots that the original deleted are cleared before the statement.

In: small functions with a finalizer and NumPy work; plain Python is the oracle for the order
of events, the results and the locals after the statement.
"""

from __future__ import annotations

import numpy as np
import pytest

import dynamo

EVENTS: list = []


class Finalized:
    def __init__(self, name="obj"):
        self.name = name

    def __del__(self):
        EVENTS.append(f"freed {self.name}")


def assert_body_captured(fn, *args):
    reasons = dynamo.explain(fn)(*args).break_reasons
    assert any("its body as a function of its own" in r for r in reasons), reasons


def run(fn, *args):
    """fn(*args) plainly, then compiled twice (the compiling call and a cache hit): the
    results and event lists of the three."""
    out = []
    EVENTS.clear()
    out.append((fn(*args), list(EVENTS)))
    compiled = dynamo.optimize("eager")(fn)
    for _ in range(2):
        EVENTS.clear()
        out.append((compiled(*args), list(EVENTS)))
    EVENTS.clear()
    return out


def check_same(fn, *args):
    (plain, plain_events), *runs = run(fn, *args)
    for result, events in runs:
        assert events == plain_events
        np.testing.assert_array_equal(result, plain)
    assert_body_captured(fn, *args)
    return plain_events


def del_in_try_body(x):
    obj = Finalized()  # (a call the translator does not trace: a graph break)
    y = np.sin(x)
    try:
        z = y * 2.0
        del obj
        EVENTS.append("after del")
        z = z + 1.0
    except ValueError:
        z = y
    EVENTS.append("after try")
    return z


def del_in_except_clause_in_try_body(x):
    obj = Finalized()
    y = np.cos(x)
    try:
        z = y * 2.0
        try:
            np.linalg.inv(np.zeros((2, 2)))
        except np.linalg.LinAlgError:
            del obj  # (test_3611's shape: the object dies here, inside the handler)
            EVENTS.append("after del")
            raise TypeError("from the handler")
    except TypeError as e:
        EVENTS.append(f"handler {e}")
        z = y
    EVENTS.append("after try")
    return z


def del_in_with_body(x):
    obj = Finalized()
    y = x - 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.log(y)
        del obj
        EVENTS.append("after del")
        z = z * 2.0
    EVENTS.append("after with")
    return z


def rebind_in_with_body(x):
    obj = Finalized("old")
    y = np.sin(x)
    with np.errstate(invalid="ignore"):
        z = y + 1.0
        obj = Finalized("new")
        EVENTS.append("after rebind")
    EVENTS.append(f"after with, obj is {obj.name}")  # (the new value, read after the block)
    del obj
    EVENTS.append("end")
    return z


@pytest.mark.parametrize("fn", [del_in_try_body, del_in_except_clause_in_try_body,
                                del_in_with_body, rebind_in_with_body])
def test_the_old_value_dies_where_plain_python_frees_it(fn):
    events = check_same(fn, np.linspace(0.5, 2.0, 4))
    assert events[0].startswith("freed")  # (the first event: before the code after it)


def rebind_then_raise(x, flag):
    obj = Finalized("old")
    y = x * 2.0
    try:
        z = y + 1.0
        if flag:
            obj = Finalized("new")  # noqa: F841  (never read again)
        np.linalg.inv(np.zeros((2, 2)))
    except np.linalg.LinAlgError:
        EVENTS.append("handler")
        z = y
    return z - 1.5


def test_a_local_rebound_before_the_exception_stays_bound_on_the_way_out():
    # The caller holds None for `obj` while the body runs; the way from the handler to the
    # code after the statement passes it on (bound locals are, read or not): it must be bound.
    x = np.ones(3)
    (plain, plain_events), *runs = run(rebind_then_raise, x, False)
    assert plain_events == ["handler", "freed old"]
    for result, events in runs:
        np.testing.assert_array_equal(result, plain)
        assert events == plain_events
    (plain, plain_events), *runs = run(rebind_then_raise, x, True)
    assert plain_events == ["freed old", "handler", "freed new"]
    for result, events in runs:
        np.testing.assert_array_equal(result, plain)
        # (Known difference: the new object, made by a call that is a graph break inside the
        # body, is on the body's resume function's stack when the graph raises, not in its
        # `obj` slot, so the caller cannot take it back: it dies with the body's frame, before
        # the handler, not when the function ends.)
        assert events[0] == "freed old" and sorted(events) == sorted(plain_events)
    assert_body_captured(rebind_then_raise, x, True)


def untouched_local_lives_on(x):
    obj = Finalized()
    y = np.sin(x)
    try:
        z = y * 3.0  # (obj is not assigned in the block: the caller keeps its reference)
        EVENTS.append("in body")
    except ValueError:
        z = y
    EVENTS.append(f"after try {obj.name}")
    del obj
    EVENTS.append("end")
    return z


def test_a_local_the_block_leaves_alone_lives_on_in_the_caller():
    events = check_same(untouched_local_lives_on, np.linspace(0.5, 2.0, 4))
    assert events == ["in body", "after try obj", "freed obj", "end"]


def test_call_owned_hands_the_arguments_over():
    from dynamo._C import call_owned

    def body(a, b):
        return a + b

    assert call_owned(body, 1, 2) == 3
    assert call_owned(len, "abc") == 3
    many = list(range(40))  # (more than the C side's small array)
    assert call_owned(lambda *a: sum(a), *many) == sum(many)
    with pytest.raises(TypeError, match="needs a function"):
        call_owned()




def many_locals(x):
    # (20 locals bound before a with body that rebinds each: the call hands more references
    # over than the C side's small array holds; every local is read after the statement)
    (v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15, v16, v17, v18,
     v19) = [Finalized("first"), *range(18), Finalized("last")]
    y = np.sin(x)
    with np.errstate(invalid="ignore"):
        z = y * 2.0
        v0 = v1 = v2 = v3 = v4 = v5 = v6 = v7 = v8 = v9 = 1
        v10 = v11 = v12 = v13 = v14 = v15 = v16 = v17 = v18 = v19 = 2
        EVENTS.append("in body")
    EVENTS.append("after with")
    return (z + v0 + v1 + v2 + v3 + v4 + v5 + v6 + v7 + v8 + v9 + v10 + v11 + v12 + v13 + v14
            + v15 + v16 + v17 + v18 + v19)

def test_many_locals_handed_over_and_back():
    events = check_same(many_locals, np.linspace(0.5, 2.0, 4))
    assert events == ["freed first", "freed last", "in body", "after with"]
