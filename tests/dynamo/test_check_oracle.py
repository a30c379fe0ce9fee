"""The oracle of tests/dynamo (conftest.py's `check` and `assert_same`) can fail.

In: a wrong backend (another value, dtype, a scalar for an array, a mutation of an argument),
a wrong graph count, user objects, signed zeros, layouts and containers of other types. Out:
AssertionError where plain NumPy and the compiled function differ; user objects compare by
identity in `check`, by state in the whole-program oracle (`support.oracle.assert_same`).
"""

from __future__ import annotations

import numpy as np
import pytest

from support.arrays import data
from support.oracle import assert_same as oracle_assert_same


def simple(x):
    return x * 2 + 1


@pytest.mark.parametrize("wrong", ["value", "dtype", "scalar", "mutation"])
def test_the_oracle_catches_a_wrong_backend(check, wrong):
    class Wrong(check.CountingBackend):
        def __call__(self, gm, example_inputs):
            forward = super().__call__(gm, example_inputs)

            def run(*args):
                out = forward(*args)
                if wrong == "mutation":
                    args[0][0] = 99
                    return out
                return {"value": out + 1, "dtype": out.astype(np.float32),
                        "scalar": out[0, 0]}[wrong]
            return run

    with pytest.raises(AssertionError):
        check.run_check(Wrong(), simple, data("float64"))


def test_the_oracle_counts_graphs(check):
    with pytest.raises(AssertionError, match="captured graph"):
        check(simple, data("float64"), graphs=2)


class _Obj:
    def __init__(self, v):
        self.v = v


def test_dynamo_assert_same_compares_user_objects_by_identity(check):
    a, b = _Obj(1), _Obj(1)
    check.assert_same(a, a)
    with pytest.raises(AssertionError):
        check.assert_same(a, b)  # equal attributes, but another object
    oracle_assert_same(a, b)  # the whole-program oracle compares state
    with pytest.raises(AssertionError):
        oracle_assert_same(a, _Obj(2))
    with pytest.raises(ValueError, match="objects="):
        oracle_assert_same(a, a, objects="equal")


def test_dynamo_assert_same_is_bit_exact_and_layout_exact(check):
    check.assert_same(np.float64(0.0), np.float64(0.0))
    with pytest.raises(AssertionError):
        check.assert_same(np.array([0.0]), np.array([-0.0]))
    with pytest.raises(AssertionError):
        check.assert_same(np.ones((2, 2)), np.asfortranarray(np.ones((2, 2))))
    with pytest.raises(AssertionError):
        check.assert_same([np.ones(2)], (np.ones(2),))
