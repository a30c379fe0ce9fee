"""`dynamo.stack_depth`: the stack size and the exception handlers' depths of bytecode npdynamo
assembles, in one pass over the flat instruction list, equal what `bytecode`'s control-flow
graph computes (the whole suite also checks every code it assembles: conftest sets
``dynamo.config.debug_check_stack_size``); where the pass cannot judge, it says so (None) and
`instructions.to_code` asks the graph."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from bytecode import Bytecode, Instr, Label, TryBegin

import dynamo
from dynamo import compat, config
from dynamo.instructions import _by_graph
from dynamo.stack_depth import fresh_try_ranges, same_as_graph, stack_size


def straight(a, b):
    return (a + b) * (a - b), [a, b, {"k": (a, b)}]


def loops(xs):
    out = 0
    for x in xs:
        while x > 0:
            x -= 1
            out += x if x % 2 else -x
    return [y * 2 for y in range(out % 7)]


def handlers(path):
    try:
        with open(path) as fh:
            data = fh.read()
    except (OSError, ValueError) as exc:
        data = str(exc)
    else:
        data = data.upper()
    finally:
        path = None
    with contextlib.suppress(KeyError):
        {}[data]
    return data


def generator(n):
    try:
        for i in range(n):
            yield i
    finally:
        n = 0


async def coroutine(xs):
    async with contextlib.AsyncExitStack():
        return [x async for x in xs]


@pytest.mark.parametrize("fn, answers", [(straight, True), (loops, True), (handlers, None),
                                         (generator, None), (coroutine, None)])
def test_one_pass_equals_the_graph_on_decoded_code(fn, answers):
    """Where the pass answers, it is the graph's answer; plain code it always answers (code
    with handlers that the compiler reaches at two depths, or a generator's prologue, it may
    leave to the graph)."""
    bc = compat.decode(fn.__code__)
    graph_flat, graph_size = _by_graph(fresh_try_ranges(bc))
    items = list(bc)
    size = stack_size(items)
    if answers:
        assert size is not None, "the pass declined plain code"
    if size is not None:
        flat = bc.copy()
        flat[:] = items
        same_as_graph(flat, size, graph_flat, graph_size)  # (raises if they differ)
        assert size >= 1


def test_a_label_reached_at_two_depths_is_left_to_the_graph():
    end = Label()
    bc = Bytecode([Instr("LOAD_CONST", 1), Instr("LOAD_CONST", True),
                   Instr("POP_JUMP_IF_TRUE" if compat.PY >= (3, 12) or compat.PY310
                         else "POP_JUMP_FORWARD_IF_TRUE", end),
                   Instr("LOAD_CONST", 2), end, Instr("RETURN_VALUE")])
    assert stack_size(list(bc)) is None


@pytest.mark.skipif(not compat.HAS_EXCEPTION_TABLE, reason="3.10 has no exception table")
def test_a_try_range_without_its_end_is_left_to_the_graph():
    handler = Label()
    bc = Bytecode([TryBegin(handler, False), Instr("LOAD_CONST", None), Instr("RETURN_VALUE"),
                   handler, Instr("RERAISE", 0)])
    assert stack_size(list(bc)) is None


def test_the_suite_checks_every_assembled_code_against_the_graph():
    assert config.debug_check_stack_size

    def f(x):
        try:
            y = x * 2
            print("break")
            return y + 1
        except ValueError:
            return x

    a = np.arange(3.0)
    assert np.array_equal(dynamo.compile(f)(a), f(a))


def test_code_that_pops_more_than_the_stack_holds_is_left_to_the_graph():
    """(the graph raises for it, so a mistake in generated code is an internal error, the frame
    in plain Python, never a code object that would corrupt the stack)"""
    bc = Bytecode([Instr("LOAD_CONST", 1), Instr("BUILD_TUPLE", 2), Instr("RETURN_VALUE")])
    assert stack_size(list(bc)) is None
    with pytest.raises(RuntimeError):
        _by_graph(fresh_try_ranges(bc))
