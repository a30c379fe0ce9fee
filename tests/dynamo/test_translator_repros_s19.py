"""Regression tests for translator bugs found in session 19 (plain Python is the oracle)."""

from __future__ import annotations

import numpy as np
import pytest

import dynamo


def del_after_an_empty_loop(x, n):
    y = x + 1
    for e in range(n):
        y = y + e
    del e  # noqa: F821 (unbound when the loop did not run)
    return y


def del_before_the_assignment(x):
    y = x + 1
    del z  # noqa: F821
    z = 1  # noqa: F841
    return y


def del_after_a_break(x):
    y = x + 1
    print(end="")  # (the del runs in the resume function)
    del w  # noqa: F821
    w = 2  # noqa: F841
    return y


def outcome(fn, *args):
    try:
        return fn(*args)
    except UnboundLocalError as exc:
        return type(exc)


@pytest.mark.parametrize("fn, args", [
    (del_after_an_empty_loop, (np.ones(2), 0)),
    (del_after_an_empty_loop, (np.ones(2), 2)),
    (del_before_the_assignment, (np.ones(2),)),
    (del_after_a_break, (np.ones(2),)),
])
def test_del_of_an_unbound_local_raises_as_in_plain_python(fn, args):
    """``del x`` of an unbound local was dropped while tracing (the translator only forgot
    the name), so the compiled function returned where plain Python raises
    UnboundLocalError."""
    expected = outcome(fn, *args)
    compiled = dynamo.compile(fn, backend="eager")
    for _ in range(2):
        got = outcome(compiled, *args)
        if isinstance(expected, type):
            assert got is expected
        else:
            np.testing.assert_array_equal(got, expected)


events: list[str] = []


class Noisy:
    def __init__(self, name: str) -> None:
        self.name = name

    def __del__(self) -> None:
        events.append(self.name)


def locals_die_in_slot_order(x):
    zeta = Noisy("zeta")  # noqa: F841
    alpha = Noisy("alpha")  # noqa: F841
    y = x + 1
    print(end="")  # (the rest runs in a resume function, which gets zeta and alpha)
    mid = Noisy("mid")  # noqa: F841
    return y


def test_a_resume_functions_locals_die_in_the_functions_slot_order():
    """A frame clears its locals slot by slot when it returns; a resume function took its
    locals in alphabetical order, so their finalizers ran in another order than in plain
    Python."""
    events.clear()
    locals_die_in_slot_order(np.ones(2))
    expected = list(events)
    assert expected == ["zeta", "alpha", "mid"]
    compiled = dynamo.compile(locals_die_in_slot_order, backend="eager")
    for _ in range(2):
        events.clear()
        compiled(np.ones(2))
        assert events == expected
