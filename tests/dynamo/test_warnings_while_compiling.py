"""Compiling touches no process-wide warning state and warns nothing itself.

In: a stand-in run of a NumPy call (`fx.op_rules._core.Call.run`) while another thread warns
and divides by zero, the shape rules of statistics on empty and tiny inputs, constant folding
of nodes that would warn. Out: the other thread's warnings and floating-point error state are
its own (``warnings.catch_warnings`` swaps the module-global filters, so compiling must not use
it), nothing warns while tracing, and a node that would warn is left to run (and warn) when the
graph runs, as in plain NumPy.
"""

from __future__ import annotations

import operator
import sys
import threading
import warnings

import numpy as np
import pytest

from fx import op_rules
from fx.meta import ArrayMeta
from fx.op_rules._core import Call
from support.hooked import no_capture_leak  # noqa: F401 (an autouse fixture)


class _ThreadWarning(UserWarning):
    pass


def test_a_standin_run_leaves_another_threads_warnings_and_errstate_alone():
    inside, done = threading.Event(), threading.Event()
    seen_by_thread: list = []

    def standin(x):  # the stand-in run: stays inside Call.run until the other thread is done
        inside.set()
        assert done.wait(10)
        return np.negative(x)

    def other_thread():
        assert inside.wait(10)
        try:
            warnings.warn("from the other thread", _ThreadWarning)
            seen_by_thread.append(np.float64(1.0) / np.float64(0.0))  # default errstate: warns
        finally:
            done.set()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        worker = threading.Thread(target=other_thread)
        worker.start()
        Call(np.negative, (ArrayMeta(np.dtype(np.float64), (3,)),), {}).run(fn=standin)
        worker.join(10)
    assert seen_by_thread == [np.inf]
    assert [(w.category, str(w.message)) for w in caught] == [
        (_ThreadWarning, "from the other thread"),
        (RuntimeWarning, "divide by zero encountered in scalar divide")]


@pytest.mark.parametrize("target, shape, kwargs", [
    (np.var, (5,), {"ddof": 1}), (np.std, (4, 3), {"ddof": 2, "axis": 0}),
    (np.mean, (0,), {}), (np.nanvar, (6,), {"ddof": 1}), (np.var, (0, 3), {"axis": 1}),
])
def test_rules_of_statistics_emit_no_warning_while_tracing(target, shape, kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        meta = op_rules.infer_call(target, [ArrayMeta(np.dtype(np.float64), shape)], kwargs)
    assert caught == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        real = target(np.ones(shape), **kwargs)
    assert meta.dtype == real.dtype and meta.shape == np.shape(real)


def _constant_graph():
    from fx import Graph

    g = Graph()
    x = g.placeholder("x")
    nodes = {
        "sqrt": g.call_function(np.sqrt, (np.float64(4.0),)),
        "mul": g.call_function(operator.mul, (np.float32(1.5), 2)),
        "log0": g.call_function(np.log, (np.float64(0.0),)),           # divide-by-zero warning
        "overflow": g.call_function(operator.mul, (np.float64(1e308), 10)),  # overflow warning
        "mean": g.call_function(np.mean, ([],)),                      # "Mean of empty slice"
        "pyfunc": g.call_function(np.frompyfunc(lambda a: a, 1, 1), (1.0,)),  # runs Python
    }
    total = x
    for node in nodes.values():
        total = g.call_function(np.add, (total, node))
    g.output(total)
    return g, nodes


def test_constant_folding_uses_no_process_wide_warning_state():
    """`warnings.catch_warnings` swaps the module-global warning filters: another thread that
    warns meanwhile would see its warning raised or lost.  Folding must learn whether a constant
    warns without it (NumPy's floating-point error state is per thread)."""
    from fx.passes.constant_fold import fold_constants

    g, nodes = _constant_graph()
    warnings_calls = []

    def profiler(frame, event, arg):
        if event == "call" and frame.f_code.co_filename == warnings.__file__:
            warnings_calls.append(frame.f_code.co_name)

    filters = list(warnings.filters)
    errstate = np.geterr()
    with warnings.catch_warnings(record=True) as seen, np.errstate(all="ignore"):
        warnings.simplefilter("always")
        sys.setprofile(profiler)
        try:
            folded = fold_constants(g)
        finally:
            sys.setprofile(None)
    assert warnings_calls == []
    assert seen == []  # nothing warned at compile time
    assert warnings.filters == filters and np.geterr() == errstate
    # Folded: the two that cannot warn (even though the caller ignores floating-point errors,
    # a node that would warn is kept so it warns at run time as in eager).
    assert folded == 2
    remaining = {n for n in g.nodes}
    assert [k for k, n in nodes.items() if n in remaining] == ["log0", "overflow", "mean",
                                                                "pyfunc"]
