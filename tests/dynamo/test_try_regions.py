"""try/with statements as regions of the transformed code (`bytecode_analysis.CodeInfo.region`).

In: functions with try/except/finally and with statements after graph breaks: nested tries,
handlers the `bytecode` package assembles at other stack depths, swallowed exceptions, a
resume function that starts inside a try block, comprehensions after a break in a try. Out:
plain Python's results, events, exceptions and unbound locals; the graph ends before the
statement (the statement runs as written) and the code after it is captured again. The body of
a try/with as a function of its own: test_try_bodies.py.
"""

from __future__ import annotations

import gc

import numpy as np
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


# The graph ends before a try block; the block keeps its semantics -------------------------------


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


def _comprehension_after_a_break_in_a_try(x):
    try:
        print("break")
        zs = {k: v.sum() for k, v in enumerate([x, x])}
    finally:
        pass
    return zs


def test_an_inlined_comprehension_after_a_break_in_a_try_block(capsys):
    x = np.arange(3.0)
    expected = _comprehension_after_a_break_in_a_try(x)
    got = dynamo.compile(_comprehension_after_a_break_in_a_try, backend="eager")(x)
    assert got.keys() == expected.keys()
    assert all(float(got[k]) == float(expected[k]) for k in expected)
