"""Graph breaks: a frame that meets something the translator cannot capture is split into a graph
for the code before it, that one instruction in plain Python, and a resume function for the rest
(compiled as a frame of its own). NumPy is the oracle (`check`); graph counts come from the
counting backend and from `explain()`. What the resume function gets: test_resume_functions.py;
loops: test_unrolled_loops.py, test_loop_bodies.py; try/with: test_try_regions.py.
"""

from __future__ import annotations

import traceback

import numpy as np
import pytest

import dynamo
from dynamo import _C, graph_break
from dynamo.bytecode_analysis import code_info

# The seed example ------------------------------------------------------------------------------


def seed(x, y):
    if x.sum() > y.sum():
        loss = np.cos(np.cos(x))
    else:
        loss = np.cos(np.cos(y))
    return loss


def test_seed_example_gives_three_graphs_after_both_branches(check):
    x, y = np.arange(4.0), np.zeros(4)
    check(seed, x, y, graphs=2)  # the condition, then the `if` branch
    check(seed, y, x, graphs=1)  # the `else` branch: one more graph, the condition is reused
    assert check.backend.count == 3
    codes = [n.target for n in check.backend.graphs[0].graph.nodes if n.op == "call_method"]
    assert codes == ["sum", "sum"]


def test_explain_counts_graphs_and_lists_breaks_with_location():
    out = dynamo.explain(seed)(np.arange(4.0), np.zeros(4))
    assert out.graph_count == 2 and out.graph_break_count == 1
    (reason,) = out.break_reasons
    assert "data-dependent" in reason
    assert f"{__file__}:" in reason and "if x.sum() > y.sum():" in reason
    assert "Break reasons:" in str(out)


# Where breaks happen ---------------------------------------------------------------------------


def prints_between(x):
    y = np.sin(x) * 2
    print("y has shape", y.shape, "sum", float(y.sum()))
    return y + 1


def test_print_runs_once_between_two_graphs(check, capsys):
    check(prints_between, np.arange(3.0), graphs=2)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3  # eager, first compiled call, cache hit: print ran once per call
    assert len(set(out)) == 1 and out[0].startswith("y has shape (3,) sum")


def keyword_call(x):
    y = x * 2
    print("a", "b", sep="-", end="|\n")
    return y - 1


def test_break_at_a_call_with_keyword_arguments(check, capsys):
    check(keyword_call, np.arange(3.0), graphs=2)
    assert capsys.readouterr().out == "a-b|\n" * 3


def call_inside_call(x):
    # When the break happens, NULL, np.add and `x + 1` are waiting on the stack below it.
    return np.add(x + 1, graph_break() or 2)


def test_values_waiting_on_the_stack_survive_a_break(check):
    check(call_inside_call, np.arange(3.0), graphs=2)


def reads_item(x):
    return x.sum().item() * 2


def test_break_at_a_method_that_needs_data(check):
    check(reads_item, np.arange(3.0), graphs=1)


def and_of_array(x, y):
    return (x.sum() > 0) and y * 2


@pytest.mark.parametrize("sign, graphs", [(1, 2), (-1, 1)])
def test_break_at_a_short_circuit_on_array_data(check, sign, graphs):
    # the comparison; then `y * 2` only when the `and` goes on to evaluate it
    check(and_of_array, sign * np.arange(1.0, 4.0), np.ones(3), graphs=graphs)


ASSERTS = """
import numpy as np

def asserts(x):
    y = x * 2
    assert (y > 0).all(), "expected positive values"
    return y + 1
"""


@pytest.fixture
def asserts(tmp_path):
    """A user function with an `assert` (defined outside this module: pytest rewrites the
    asserts of test modules)."""
    path = tmp_path / "user_asserts.py"
    path.write_text(ASSERTS)
    namespace: dict = {}
    exec(compile(ASSERTS, str(path), "exec"), namespace)
    return namespace["asserts"]


def test_assert_on_data_passes_and_raises_like_python(check, asserts):
    check(asserts, np.arange(1.0, 4.0), graphs=2)
    check(asserts, -np.arange(1.0, 4.0), graphs=0)  # same prefix graph; the raise is plain Python


def test_assertion_traceback_points_at_the_user_line(asserts):
    compiled = dynamo.compile(asserts)
    with pytest.raises(AssertionError, match="expected positive values") as info:
        compiled(-np.arange(1.0, 4.0))
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert last.filename.endswith("user_asserts.py")
    assert last.line == 'assert (y > 0).all(), "expected positive values"'


def many_breaks(x, y):
    a = x + y
    graph_break()
    b = a * 2
    graph_break()
    c = b - x
    graph_break()
    return a, b, c


def test_each_graph_break_starts_a_new_graph(check):
    check(many_breaks, np.arange(3.0), np.ones(3), graphs=3)
    out = dynamo.explain(many_breaks)(np.arange(3.0), np.ones(3))
    assert out.graph_count == 3 and out.graph_break_count == 3
    assert all("graph_break()" in reason for reason in out.break_reasons)


def break_first(x):
    print(end="")
    return np.exp(x) - 1


def test_break_before_any_operation_still_captures_the_rest(check):
    check(break_first, np.arange(3.0), graphs=1)


# fullgraph, and graph_break() outside compiled code --------------------------------------------


def test_fullgraph_turns_a_break_into_an_error_with_the_line():
    with pytest.raises(dynamo.FullGraphError) as info:
        dynamo.compile(prints_between, fullgraph=True)(np.arange(3.0))
    message = str(info.value)
    assert f"{__file__}:" in message and "float(y.sum())" in message


def test_graph_break_outside_compiled_code_does_nothing():
    assert graph_break() is None


# Every instruction as a break point ------------------------------------------------------------
#
# The check of the rebuilt bytecode: for each instruction of each program below, force a graph
# break right there (a handler that raises Unsupported at that instruction index), then compare
# with plain NumPy. Every stack shape the program goes through (NULLs under callables, pending
# keyword names, values under a call, half-built tuples) is rebuilt once.


def stack_shapes(x, y, scale=2.0):
    a = np.add(x * scale, np.sin(y), out=None)
    pair = (a.sum(axis=0), a)
    first, second = pair
    label = f"{x.shape[0]}-{scale}"
    b = np.concatenate([first[None], second[:1]], axis=0) if len(label) > 2 else a
    return b.mean(keepdims=True) + np.float64(scale), label, [v * 2 for v in (x, y)]


def branches_and_methods(x, k):
    if x.ndim == 2 and k > 1:
        y = x.reshape(-1).cumsum()[::k]
    else:
        y = -x
    total = 0.0
    for i in range(3):
        total = total + y[i] * i
    return np.where(y > total, y, total), {"k": k, "n": y.size}


@pytest.mark.parametrize("fn, args", [
    (stack_shapes, (np.arange(6.0).reshape(3, 2), np.ones((3, 2)))),
    (branches_and_methods, (np.arange(12.0).reshape(3, 4), 2)),
], ids=["stack_shapes", "branches_and_methods"])
def test_break_at_every_instruction_rebuilds_the_frame(check, monkeypatch, fn, args):
    from dynamo import symbolic_convert
    from dynamo.exc import Unsupported

    translator = symbolic_convert.InstructionTranslator
    original = dict(translator.dispatch)
    forced = {"index": -1}

    def forcing(handler):
        def run(tx, inst):
            if type(tx) is translator and tx.code is fn.__code__ and tx.index == forced["index"]:
                raise Unsupported(f"forced break at instruction {tx.index}")
            return handler(tx, inst)
        return run

    monkeypatch.setattr(translator, "dispatch", {name: forcing(h) for name, h in original.items()})
    n = len(code_info(fn.__code__).instructions)
    broke = 0
    for index in range(n):
        dynamo.reset()
        forced["index"] = index
        check(fn, *args, graphs=None)
        out = dynamo.explain(fn)(*args)
        broke += any(f"forced break at instruction {index}" in r for r in out.break_reasons)
    assert broke > n // 2, f"only {broke} of {n} instructions could be break points"


# NumPy objects and functions without rules -----------------------------------------------------


def draws(x, rng):
    y = x * 2
    noise = rng.standard_normal(x.shape)  # a method of an object npdynamo does not model
    return y + noise


def test_a_generator_draws_the_same_numbers_and_ends_in_the_same_state(check):
    x = np.arange(3.0)
    eager_rng, compiled_rng = np.random.default_rng(7), np.random.default_rng(7)
    expected = draws(x, eager_rng)
    actual = dynamo.compile(draws)(x, compiled_rng)
    np.testing.assert_array_equal(actual, expected)
    assert compiled_rng.bit_generator.state == eager_rng.bit_generator.state
    out = dynamo.explain(draws)(x, np.random.default_rng(7))
    assert out.graph_count == 2 and "standard_normal" in out.break_reasons[0]


def legacy_stream(n):
    np.random.seed(3)
    a = np.random.rand(n)
    return a * 2 + np.random.rand(n)


def test_the_legacy_random_stream_gives_the_same_numbers(check):
    check(legacy_stream, 4, graphs=None)


def numpy_without_rules(x):
    return (np.gradient(x) + np.bincount(x.astype(np.int64)).sum(), np.split(x, 2),
            np.kron(x, x), np.unique(x)[0], np.mgrid[0:2, 0:3], np.diag(np.eye(2) * x[1]),
            np.shares_memory(x, x[1:]))


def test_numpy_functions_without_rules_break_at_the_call(check):
    check(numpy_without_rules, np.arange(1.0, 5.0), graphs=None)
    out = dynamo.explain(numpy_without_rules)(np.arange(1.0, 5.0))
    # each call breaks the graph; the frame itself is never given up
    assert out.graph_break_count >= 5
    assert not any(frame.startswith("numpy_without_rules:") for frame in out.skipped_frames)


def formats_a_numpy_scalar(x):
    total = x.sum()
    label = f"total={total:.2f}"
    bigger = total > 3
    return label, bigger, x * 2


def test_numpy_scalars_in_fstrings_and_comparisons_break_cleanly(check):
    check(formats_a_numpy_scalar, np.arange(4.0), graphs=None)
    out = dynamo.explain(formats_a_numpy_scalar)(np.arange(4.0))
    assert out.graph_count >= 2 and out.graph_break_count >= 1


def test_namedtuple_methods_made_from_strings_are_not_captured(check):
    import collections

    Pair = collections.namedtuple("Pair", "type value")  # `__new__` is exec'd from a string

    def makes_pairs(x):
        return [Pair(i, x * i) for i in range(3)][2].value

    check(makes_pairs, np.arange(3.0), graphs=None)
    assert _C.get_cache_entries(Pair.__new__.__code__) == []


def formats_its_locals(x, name="loss"):
    value = float(x.sum())
    return "{name}: {value:.3f}".format(**locals())


def test_a_frame_that_reads_its_locals_by_name_is_not_split(check):
    # a resume function would show locals() only the live locals: the frame runs whole in Python
    check(formats_its_locals, np.arange(3.0), graphs=0)


def test_a_backends_own_callable_is_not_traced():
    seen = []

    def my_backend(gm, example_inputs):
        def run(*args):
            seen.append(run)
            return gm.forward(*args)
        return run

    def f(x):
        return np.sin(x) * 2

    out = dynamo.explain(f, backend=my_backend)(np.arange(3.0))
    assert out.graph_count == 1 and seen
    assert _C.get_cache_entries(seen[0].__code__) == []


def prints_the_old_value(x):
    y = x
    x = x + 1  # rebinds the local y's value was read from
    print(y)
    return x


def test_an_operand_read_from_a_rebound_local_keeps_its_value(check, capsys):
    check(prints_the_old_value, np.arange(3.0), graphs=1)
    out = capsys.readouterr().out.splitlines()
    assert out == ["[0. 1. 2.]"] * 3


class _Base:
    def m(self, x):
        return x + 1


class _Derived(_Base):
    def m(self, x):
        y = np.sin(x)
        print("break")                   # graph break: the rest is a resume function
        with np.errstate(all="ignore"):  # a region: its exit is another resume function
            z = super().m(y)
        for i in range(3):               # a loop around super(): runs in plain Python
            print(i)
            z = z + super().m(0.0)
        return super().m(z) * 2


def test_zero_argument_super_after_graph_breaks(capsys):
    x = np.arange(3.0)
    expected = _Derived().m(x)
    plain_out = capsys.readouterr().out
    out = dynamo.explain(_Derived.m)(_Derived(), x)
    np.testing.assert_array_equal(out.result, expected)
    assert capsys.readouterr().out == plain_out
    assert out.graph_count >= 2
