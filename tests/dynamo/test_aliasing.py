"""Inputs that are one mutable object, or different ones (issue 7, guards: aliasing between
inputs). The translator models lists, dicts and user objects and replays their changes, so
whether two inputs are one object decides what the code sees. Oracle: plain Python."""

from __future__ import annotations

import types

import numpy as np
import pytest

import dynamo
from support.oracle import assert_same, make_backend


def append_then_read_other(a, b, x):
    a.append(x * 2)
    return len(b), x + 1


def set_then_read_other(p, q, x):
    p.scale = 3.0
    return x * q.scale


def _lists(shared: bool):
    if shared:
        same = []
        return same, same, np.ones(2)
    return [], [], np.ones(2)


def _objects(shared: bool):
    if shared:
        same = types.SimpleNamespace(scale=1.0)
        return same, same, np.ones(2)
    return types.SimpleNamespace(scale=1.0), types.SimpleNamespace(scale=1.0), np.ones(2)


@pytest.mark.parametrize("backend", ["eager", "c"])
@pytest.mark.parametrize("fn, make", [(append_then_read_other, _lists),
                                      (set_then_read_other, _objects)])
@pytest.mark.parametrize("order", [(False, True, False), (True, False, True)])
def test_one_object_passed_twice_is_one_object_in_the_compiled_code(fn, make, order, backend):
    counting = make_backend(backend)
    compiled = dynamo.compile(fn, backend=counting)
    for shared in order:
        assert_same(fn(*make(shared)), compiled(*make(shared)), where=f"shared={shared}")
    assert counting.count == 2  # one version for each aliasing pattern, reused


def test_the_guards_say_which_inputs_are_one_object():
    compiled = dynamo.compile(append_then_read_other, backend=make_backend("eager"))
    compiled(*_lists(True))
    compiled(*_lists(False))
    text = "\n".join(entry.guards for entry in dynamo.cache_entries(append_then_read_other))
    assert "b is a" in text and "___len({___id(___o) for ___o in (a, b,)}) == 2" in text


def test_many_lists_cost_one_distinctness_guard():
    def total(rows):
        out = 0.0
        for row in rows:
            out = out + len(row)
        return np.ones(2) * out

    compiled = dynamo.compile(total, backend=make_backend("eager"))
    rows = [[1.0] * (i % 3) for i in range(40)]
    assert_same(total(rows), compiled(rows))
    (entry,) = dynamo.cache_entries(total)
    assert entry.guards.count("DISTINCT_OBJECTS") == 1
