"""Int arguments whose value changes between calls stay symbolic in Python arithmetic.

In: functions taking a Python int that changes from call to call (a step counter, a recursion
depth, a length), compiled with ``dynamo.compile``. Out: results, printed output and raised
exceptions equal plain Python's, and the number of compiled versions stays small: once the
value changed, an int of at least 2 is a symbol of the trace's ShapeEnv
(`OutputGraph.int_symbol`), so ``n - 1``, ``n % 10 == 0`` and ``if n:`` record facts about it
(guards such as ``n % 10 != 0``), not its value, and an int made from it is recomputed from the
argument after a graph break or at a return. Before, every use in Python fixed the value: a
step counter tested with ``t % 10 == 0`` compiled a version per step until the cache limit,
and CPython's test_traceback saw the cache-limit warning of a 10-deep recursion.
"""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
import pytest

import dynamo
from support.oracle import assert_same, make_backend

BACKENDS = ["eager", "c"]


def versions(fn) -> int:
    return len(dynamo.cache_entries(fn))


def run_both(fn, compiled, *args):
    """(plain result, compiled result), each with what it printed; raises on a difference."""
    outs = []
    for f in (fn, compiled):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                value = ("ok", f(*args))
            except Exception as exc:  # (compared by type and message)
                value = ("raised", type(exc), str(exc))
        outs.append((value, out.getvalue()))
    (plain, plain_out), (comp, comp_out) = outs
    assert comp_out == plain_out
    assert comp[0] == plain[0], (plain, comp)
    if plain[0] == "ok":
        assert_same(plain[1], comp[1])
    else:
        assert comp == plain
    return plain


def step(u, t):
    u = u * 0.5 + t
    if t % 10 == 0:
        print("step", t)
    return u


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_step_counter_tested_with_modulo_compiles_a_few_versions(backend):
    counting = make_backend(backend)
    compiled = dynamo.compile(step, backend=counting)
    u = np.linspace(0.0, 1.0, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no cache-limit warning)
        for t in range(0, 35):
            run_both(step, compiled, u, t)
    # t = 0 and 1 each a constant, then t symbolic with the fact t % 10 != 0, and one with
    # t % 10 == 0 (its print a break): four, whatever the number of steps
    assert versions(step) <= 5
    guards = "\n".join(e.guards for e in dynamo.cache_entries(step))
    assert "t >= 2" in guards and "((t) % (10)) != 0" in guards


def countdown(count=10):
    if count:
        return countdown(count - 1)
    raise ValueError("bottom")


def test_a_recursion_over_an_int_does_not_reach_the_cache_limit():
    # (CPython's test_traceback _check_recursive_traceback_display: the cache-limit warning
    # on stderr changed the traceback text it compares)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with dynamo.optimize("eager"):
            with pytest.raises(ValueError, match="bottom"):
                countdown()
    assert versions(countdown) <= 4  # 10 (a constant), 2..9 (symbolic), 1, and 0 raises


def sizes_out(x, n):
    m = n - 1
    n = 100  # (rebinding the argument: the recomputed m still reads the argument's value)
    print("break")
    return m, m * 3 + 1, m // 2, m % 3, -m, max(m, 4), x * m


@pytest.mark.parametrize("backend", BACKENDS)
def test_ints_made_from_an_int_argument_are_recomputed_after_a_break(backend):
    counting = make_backend(backend)
    compiled = dynamo.compile(sizes_out, backend=counting)
    x = np.ones(3)
    for n in (5, 6, 7, 13, 40):
        run_both(sizes_out, compiled, x, n)
    # 5 a constant, then symbolic (max(m, 4) decided by a fact: m > 4 holds from 6 on)
    assert versions(sizes_out) <= 3


def returns_sizes(x, n):
    return x + 1, n * 2, n - 1, (n, n + 1)


def test_ints_returned_from_an_int_argument_need_no_value_guard():
    compiled = dynamo.compile(returns_sizes)
    for n in range(2, 30):
        run_both(returns_sizes, compiled, np.ones(2), n)
    assert versions(returns_sizes) == 2
    assert "INT_AT_LEAST" in "".join(e.guards for e in dynamo.cache_entries(returns_sizes))


def make_zeros(x, n):
    return np.zeros(n) + x.sum(), np.ones((n, 2)) * n, x[:2] * (n - 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_int_argument_as_a_size_gives_a_symbolic_shape(backend):
    counting = make_backend(backend)
    compiled = dynamo.compile(make_zeros, backend=counting)
    x = np.ones(4)
    for n in (3, 4, 9, 2, 17):
        run_both(make_zeros, compiled, x, n)
    assert counting.count == 2  # (n = 3 a constant, then any n >= 2)


def branches(x, n):
    if n > 5:
        return x * n
    return x - n


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_comparison_is_a_fact_about_the_int_not_its_value(backend):
    counting = make_backend(backend)
    compiled = dynamo.compile(branches, backend=counting)
    x = np.arange(3.0)
    for n in (2, 3, 4, 5, 6, 7, 8, 50, 3):
        run_both(branches, compiled, x, n)
    assert versions(branches) == 3  # n == 2, then n > 5 false, then true


def small_and_negative(x, n):
    if n:
        return x[n % 3] * (n - 1)
    return x * 0


@pytest.mark.parametrize("n_values", [(0, 1, 0, 1), (-1, -2, -3, 5), (1, 2, 0, -7, 2)])
def test_ints_below_two_are_constants_and_stay_correct(n_values):
    compiled = dynamo.compile(small_and_negative)
    x = np.arange(3.0)
    for n in n_values:
        run_both(small_and_negative, compiled, x, n)


def floats_stay_unspecialised(x, s):
    return x * s + (s > 0.5)


def test_a_float_argument_is_not_a_symbol():
    compiled = dynamo.compile(floats_stay_unspecialised)
    x = np.ones(2)
    for s in (0.25, 0.75, 1.5, 0.1):
        run_both(floats_stay_unspecialised, compiled, x, s)
    assert "INT_AT_LEAST" not in "".join(e.guards for e in dynamo.cache_entries(
        floats_stay_unspecialised))


def divides(n, d):
    return n // d, n % d


def test_division_by_a_zero_int_raises_as_in_plain_python():
    compiled = dynamo.compile(divides)
    for n, d in ((7, 2), (9, 3), (11, 0), (12, 5), (3, 0)):
        run_both(divides, compiled, n, d)


def loop_body_counter(x, n):
    out = []
    for i in range(2, n):
        print(i)  # (a break: the loop runs in Python, its body as a function of its own)
        out.append(x * (i - 1) if i % 4 else x)
    return out


def test_a_loop_counter_in_a_loop_body_function_gives_plain_results():
    compiled = dynamo.compile(loop_body_counter)
    run_both(loop_body_counter, compiled, np.ones(2), 30)
