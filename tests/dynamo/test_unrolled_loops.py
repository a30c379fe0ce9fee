"""Loops the translator unrolls into one graph, and the budget that stops it.

In: loops over ``range`` and over an array's rows, short and long, with the tracing budget
(`dynamo.config.max_instructions`, `max_trace_seconds`) patched. Out: NumPy's results through
the oracle (`check`); a short loop is one graph, a loop past the budget runs in Python after the
graph with its body compiled once, and the budget counts the compiling thread's CPU time, not
the machine's load.
"""

from __future__ import annotations

import numpy as np
import pytest

import dynamo


def long_loop(x, n):
    y = np.cos(x)
    for i in range(n):
        y = y * 0.5 + i
    return y


def test_a_loop_past_the_tracing_budget_runs_in_python_after_the_graph(check):
    from dynamo import config

    with config.patch(max_instructions=200):
        # cos, then the loop runs in Python calling its body function: its first version uses
        # the counter `i` as a constant (i = 0); once `i` changed, the counter is an input of
        # the body's graph (a Python int argument, issue 7), which every later iteration reuses
        check(long_loop, np.arange(3.0), 500, graphs=3)
        out = dynamo.explain(long_loop)(np.arange(3.0), 500)
    assert out.graph_count == 3
    assert "a loop this long is not unrolled" in out.break_reasons[0]
    assert not any("recompiles on every iteration" in frame for frame in out.skipped_frames)


def test_a_short_loop_is_still_unrolled_into_one_graph(check):
    check(long_loop, np.arange(3.0), 5, graphs=1)
    out = dynamo.explain(long_loop)(np.arange(3.0), 5)
    assert out.graph_break_count == 0 and len(out.ops_per_graph[0]) == 11


def running_sum(x):
    s = x[0] * 0
    for i in range(1500):
        s = s + x[i]
    return s


def test_a_long_unrolled_chain_on_one_line_compiles(check):
    # 3,000 nodes made on one source line: the code printer must not recurse per node (the time
    # budget is raised so that a busy machine still unrolls the loop)
    from dynamo import config

    with config.patch(max_trace_seconds=60.0):
        check(running_sum, np.arange(1500.0), graphs=1)


def test_the_tracing_time_budget_is_a_setting():
    from dynamo import config

    with pytest.raises(ValueError, match="max_trace_seconds"):
        config.max_trace_seconds = 0
    with config.patch(max_trace_seconds=2.5):
        assert config.max_trace_seconds == 2.5


def test_the_tracing_time_budget_counts_cpu_time_not_the_machines_load(check, monkeypatch):
    # (wall time made the graphs of cholesky, lu and seidel_2d depend on how busy the machine
    # was: another process's load must not stop a loop from being unrolled)
    import time

    from dynamo import compile_frame, config

    wall = iter(range(0, 10**9, 1000))  # a wall clock that jumps 1000 s at every reading
    monkeypatch.setattr(compile_frame.time, "perf_counter", lambda: float(next(wall)))
    monkeypatch.setattr(compile_frame.time, "monotonic", lambda: float(next(wall)))
    with config.patch(max_trace_seconds=30.0):
        check(running_sum, np.arange(1500.0), graphs=1)
    assert time.thread_time() > 0  # (the clock the budget reads)


def rows_of_a_changing_array(x, y):
    out = []
    for r in y:
        out.append(r * 1)
        y += x  # the next row is read after this change, as in Python
    return out


def test_rows_are_read_when_their_iteration_starts(check):
    # (found by the control-flow fuzzer)
    check(rows_of_a_changing_array, np.arange(1.0, 4.0), np.zeros(3), graphs=1)
