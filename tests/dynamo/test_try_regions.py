"""Regression tests for the try/with region analysis (`bytecode_analysis.CodeInfo.region`)."""

from __future__ import annotations

import gc

import pytest

import dynamo

events: list[str] = []


class Noisy:
    def __del__(self):
        events.append("del")


def nested_try_after_a_break():
    x = Noisy()  # (the graph breaks here: the rest, the nested try, is a resume function)
    try:
        try:
            nested_try_after_a_break.missing
        except AttributeError:
            del x
            gc.collect()
            events.append("after del")
            raise TypeError
    except Exception:
        events.append("handler")
    events.append("end")


def test_an_instruction_reached_at_two_stack_depths_is_no_region_exit(monkeypatch):
    """3.12+: the `bytecode` package gives a resume function's exception table entries deeper
    stacks than CPython's (a cleanup handler's range is counted from the handler's own
    stack), so the code after a nested try was reached both as an exit of the statement and,
    from the handler, as a member of it: `region` then raised KeyError (an internal error).
    It is now no region (the statement runs in plain Python)."""
    monkeypatch.setattr(dynamo.config, "suppress_errors", False)
    events.clear()
    nested_try_after_a_break()
    expected = list(events)
    for _ in range(2):
        events.clear()
        with dynamo.optimize("eager"):
            nested_try_after_a_break()
        assert events == expected


@pytest.mark.skipif(not hasattr(__import__("dis"), "_parse_exception_table"),
                    reason="3.10 has no exception table")
@pytest.mark.parametrize("fn", [nested_try_after_a_break])
def test_assembled_code_keeps_cpythons_handler_depths(fn):
    """`bytecode` computes a try range's depth from the stack where the range starts: for the
    range of a nested ``except``'s cleanup (3.12+) that is two values deeper than CPython's,
    so every resume function, region copy and transformed code made from such code unwound
    exceptions to the wrong depth. The decoded ranges keep the code's own depths
    (`compat._keep_handler_depths`, `instructions.to_code`)."""
    import dis

    from dynamo import compat
    from dynamo import instructions as ins

    code = fn.__code__
    again = ins.to_code(compat.decode(code))
    assert [(e.depth, e.lasti) for e in dis._parse_exception_table(again)] == \
        [(e.depth, e.lasti) for e in dis._parse_exception_table(code)]
