"""fx.symbolic (symbolic sizes) and the shape rules that compute with them.

Oracle: the sizes themselves. Every check evaluates the symbolic answer for the traced sizes
and compares it with the plain-int answer (NumPy's own shape where a rule is involved), and
checks which facts (future guards) were recorded: none where the bounds settle a question.
"""

from __future__ import annotations

import operator

import numpy as np
import pytest

from fx import op_rules
from fx.meta import ArrayMeta
from fx.symbolic import ShapeEnv, Sym, evaluate, hint, is_symbolic, sym_max, sym_min


def _env(*sizes: int) -> tuple[ShapeEnv, list[Sym]]:
    env = ShapeEnv()
    return env, [env.size_symbol(f"x{i}", 0, n, f"x{i}") for i, n in enumerate(sizes)]


def _facts(env: ShapeEnv) -> list[str]:
    return [f.describe(env) for f in env.facts]


def test_arithmetic_is_exact_and_canonical():
    env, (s0, s1) = _env(8, 5)
    assert (s0 - 1 + 1).same_as(s0)
    assert (s0 + s1).same_as(s1 + s0)
    assert (s0 * 2 // 2).same_as(s0)
    assert (2 * s0 + 3) % 2 == 1  # the constant part decides
    assert isinstance(s0 - s0, int) and s0 - s0 == 0
    assert hint(s0 * s1 - 3) == 37
    assert evaluate((s0 - 1) * s1, {0: 10, 1: 3}) == 27
    assert str(s0 * s1 - 3) == "s0 * s1 - 3"
    assert _facts(env) == []


def test_questions_the_bounds_settle_record_no_fact():
    env, (s0, s1) = _env(8, 5)
    assert s0 >= 2 and s0 > 1 and s0 != 0 and s0 != 1 and not s0 == 1
    assert (s0 - 1) >= 1 and s0 + s1 > s0
    assert sym_min(s0, 1) == 1 and sym_max(s0 - 1, 0).same_as(s0 - 1)
    assert bool(s0)
    assert _facts(env) == []


def test_other_questions_are_answered_from_the_sizes_and_recorded():
    env, (s0, s1) = _env(8, 5)
    assert (s0 > 5) is True
    assert (s0 == s1) is False
    assert (s1 < 3) is False
    assert _facts(env) == ["s0 > 5", "s0 != s1", "s1 >= 3"]
    assert env.guard_facts() == ["x0.shape[0] > 5", "x0.shape[0] != x1.shape[0]",
                                 "x1.shape[0] >= 3"]


def test_int_pins_a_symbol_and_later_questions_use_it():
    env, (s0,) = _env(8)
    assert operator.index(s0) == 8
    assert env.specialized(0) == 8
    assert (s0 + 1 == 9) is True
    assert _facts(env) == ["s0 == 8"]
    assert env.guard_facts() == []  # the shape guard checks a pinned size itself


def test_an_equality_fact_is_used_for_later_questions():
    env, (s0, s1) = _env(6, 6)
    assert s0 == s1
    assert (s1 - s0) == 0 and (s0 * 2).same_as(s1 * 2)
    assert _facts(env) == ["s0 == s1"]


def test_sizes_below_two_are_never_symbolic():
    with pytest.raises(ValueError):
        ShapeEnv().size_symbol("x", 0, 1, "x")


# Rules ---------------------------------------------------------------------------------------


def _meta(env: ShapeEnv, name: str, shape: tuple, dynamic: tuple, dtype=np.float64) -> ArrayMeta:
    dims = tuple(env.size_symbol(name, d, n, name) if dyn else n
                 for d, (n, dyn) in enumerate(zip(shape, dynamic)))
    return ArrayMeta(dtype, dims)


def _check(result: ArrayMeta, expected: np.ndarray, env: ShapeEnv, symbolic: bool = True) -> None:
    assert result.dtype == expected.dtype
    assert hint(result.shape) == expected.shape
    assert is_symbolic(result.shape) == symbolic


def test_elementwise_broadcasting_keeps_symbols_and_records_equalities():
    env = ShapeEnv()
    x = _meta(env, "x", (8, 3), (True, False))
    y = _meta(env, "y", (8, 1), (True, False))
    out = op_rules.infer_call(np.add, [x, y])
    _check(out, np.ones((8, 3)) + np.ones((8, 1)), env)
    assert env.guard_facts() == ["y.shape[0] == x.shape[0]"]
    # the same symbol twice: nothing to record
    env2 = ShapeEnv()
    x2 = _meta(env2, "x", (8,), (True,))
    out2 = op_rules.infer_call(np.multiply, [x2, x2])
    assert out2.shape[0].same_as(x2.shape[0]) and env2.facts == []


def test_broadcasting_a_symbol_against_a_fixed_size_pins_it():
    env = ShapeEnv()
    x = _meta(env, "x", (4,), (True,))
    out = op_rules.infer_call(np.add, [x, ArrayMeta(np.float64, (4,))])
    assert out.shape == (4,) and env.specialized(0) == 4


def test_broadcasting_different_sizes_is_rejected_like_numpy():
    env = ShapeEnv()
    x = _meta(env, "x", (4,), (True,))
    y = _meta(env, "y", (5,), (True,))
    with pytest.raises(op_rules.RuleError):
        op_rules.infer_call(np.add, [x, y])


@pytest.mark.parametrize("index", [
    slice(1, None), slice(None, -1), slice(1, -1), slice(None, None, 2), slice(None, None, -1),
    slice(2, 5), slice(-3, None), slice(None, None, 3), 0, -1, (Ellipsis, None), (None, slice(1, None)),
])
def test_basic_indexing_of_a_symbolic_size_matches_numpy_for_every_size(index):
    for n in range(2, 12):
        env = ShapeEnv()
        x = _meta(env, "x", (9,), (True,))
        out = op_rules.infer_call(operator.getitem, [x, index])
        # the rule's answer evaluated at every size n that satisfies the recorded facts
        sizes = {0: n}
        facts_hold = all(eval(f.text(env).replace("x.shape[0]", str(n))) for f in env.facts)
        if not facts_hold:
            continue
        expected = np.empty(n)[index]
        got = () if out.is_scalar else evaluate(out.shape, sizes)
        assert got == np.shape(expected), (index, n, env.guard_facts())


def test_reductions_transpose_reshape_and_concatenate_stay_symbolic():
    env = ShapeEnv()
    x = _meta(env, "x", (6, 4), (True, False))
    _check(op_rules.infer_method("sum", x, [], {"axis": 1}), np.ones((6, 4)).sum(axis=1), env)
    assert op_rules.infer_method("sum", x, [], {}).is_scalar
    _check(op_rules.infer_attr("T", x), np.ones((4, 6)), env)
    _check(op_rules.infer_call(np.transpose, [x]), np.ones((4, 6)), env)
    _check(op_rules.infer_method("reshape", x, [-1], {}), np.ones(24), env)
    _check(op_rules.infer_call(np.concatenate, [[x, x]]), np.ones((12, 4)), env)
    _check(op_rules.infer_call(np.expand_dims, [x, 0]), np.ones((1, 6, 4)), env)
    assert env.facts == []
    # (4 * s0) // 4 is exactly s0: no divisibility fact needed
    _check(op_rules.infer_method("reshape", x, [4, -1], {}), np.ones((4, 6)), env)
    assert env.facts == []


def test_reshape_into_halves_records_divisibility():
    env = ShapeEnv()
    x = _meta(env, "x", (6,), (True,))
    out = op_rules.infer_method("reshape", x, [2, -1], {})
    assert hint(out.shape) == (2, 3)
    assert env.guard_facts() == ["((x.shape[0]) % (2)) == 0"]


def test_matmul_records_the_inner_size_equality():
    env = ShapeEnv()
    a = _meta(env, "a", (5, 7), (True, True))
    b = _meta(env, "b", (7, 3), (True, False))
    out = op_rules.infer_call(operator.matmul, [a, b])
    _check(out, np.ones((5, 7)) @ np.ones((7, 3)), env)
    assert env.guard_facts() == ["a.shape[1] == b.shape[0]"]


def test_a_rule_without_symbolic_support_specialises():
    env = ShapeEnv()
    x = _meta(env, "x", (6,), (True,))
    out = op_rules.infer_call(np.diff, [x])
    assert out.shape == (5,) and env.specialized(0) == 6


def test_an_expression_that_may_be_one_broadcasts_like_numpy():
    env = ShapeEnv()
    x = _meta(env, "x", (2,), (True,))
    short = op_rules.infer_call(operator.getitem, [x, slice(1, None)])  # length s0 - 1 == 1
    out = op_rules.infer_call(np.add, [short, ArrayMeta(np.float64, (5,))])
    assert out.shape == (5,)
    assert env.guard_facts() == ["x.shape[0] - 1 == 1"]


def test_equal_expressions_broadcast_without_a_fact_even_if_they_may_be_one():
    env = ShapeEnv()
    x = _meta(env, "x", (5,), (True,))
    head = op_rules.infer_call(operator.getitem, [x, slice(1, None)])  # s0 - 1, may be 1
    tail = op_rules.infer_call(operator.getitem, [x, slice(None, -1)])
    out = op_rules.infer_call(np.add, [head, tail])
    assert out.shape[0].same_as(x.shape[0] - 1) and env.facts == []


def test_data_dependent_symbols_are_bounded_and_never_guarded():
    """The length of x[mask]: 0..upper, one symbol per key, and any question its bounds do not
    settle raises instead of recording a fact (no guard could check it)."""
    from fx.symbolic import DataDependentSize, ShapeEnv, is_data_dependent

    env = ShapeEnv()
    u = env.data_symbol(("mask", 0), 40)
    assert env.data_symbol(("mask", 0), 40).same_as(u)
    v = env.data_symbol(("mask", 1), 40)
    assert not v.same_as(u)
    assert is_data_dependent(u) and is_data_dependent((3, u * 2)) and not is_data_dependent((3,))
    assert (u >= 0) is True and (u < 41) is True and (u + 1 > 0) is True  # settled by bounds
    for question in (lambda: u > 0, lambda: u == v, lambda: int(u), lambda: bool(u - 1),
                     lambda: env.guard_text(0)):
        with pytest.raises(DataDependentSize):
            question()
    assert env.facts == []
    assert u.hint == 40  # (the upper bound: a size hint for backends, never a guard)
