"""`fx.node.may_raise_or_warn` and DCE: errors and warnings are effects that DCE must keep; and
`fx.node.may_raise`, which of them can raise an exception under the default ``np.errstate``.

Comes in: small hand-built graphs whose nodes carry ``meta["val"]`` (dtype and shape, as the
translator records them). Goes out: which nodes the predicate calls safe to drop, checked against
NumPy itself where a claim is about NumPy's behaviour.
"""

from __future__ import annotations

import operator
import warnings

import numpy as np
import pytest

from fx import ArrayMeta, Graph
from fx.node import may_raise, may_raise_or_warn


def _graph(dtype, shape=(4,), scalar=False):
    g = Graph()
    x = g.placeholder("x")
    x.meta["val"] = ArrayMeta(np.dtype(dtype), () if scalar else shape, scalar)
    return g, x


def _node(g, x, target, *rest, op="call_function", **kwargs):
    if op == "call_method":
        return g.call_method(target, (x, *rest), kwargs)
    return g.call_function(target, (x, *rest), kwargs)


@pytest.mark.parametrize("dtype, target, rest, scalar, expected", [
    # may raise or warn: kept
    (np.int64, operator.pow, ("x",), False, True),        # negative integer powers raise
    (np.float64, np.log, (), False, True),                # invalid / divide
    (np.float64, operator.truediv, (0.0,), False, True),  # divide by zero
    (np.float64, operator.add, (1.0,), False, True),      # overflow
    (np.float64, operator.lt, (1.0,), False, True),       # floats left alone
    (np.int64, operator.floordiv, (0,), False, True),     # integer division by zero warns
    (np.int8, operator.neg, (), True, True),              # NumPy scalar overflow warns
    (np.int64, operator.mul, (4,), True, True),           # NumPy scalar overflow warns
    (np.float64, "astype", (np.float32,), False, True),   # overflow in cast
    (np.int64, "sum", (), False, True),                   # reductions are not listed
    (np.int64, operator.getitem, ("x",), False, True),    # index values are data
    # cannot raise or warn: removable
    (np.int64, "reshape", ((2, 2),), False, False),
    (np.float64, np.transpose, (), False, False),
    (np.float64, operator.getitem, (slice(1, 3),), False, False),
    (np.int8, operator.neg, (), False, False),            # array loops wrap silently
    (np.int64, operator.add, (1,), False, False),
    (np.uint8, operator.sub, (1,), False, False),
    (np.int64, operator.lt, (3,), False, False),
    (np.bool_, operator.and_, (True,), False, False),
    (np.float64, operator.neg, (), False, False),
    (np.float32, "astype", (np.float64,), False, False),  # safe cast
])
def test_may_raise_or_warn(dtype, target, rest, scalar, expected):
    g, x = _graph(dtype, scalar=scalar)
    rest = tuple(x if r == "x" else r for r in rest)
    op = "call_method" if isinstance(target, str) else "call_function"
    n = _node(g, x, target, *rest, op=op)
    assert may_raise_or_warn(n) is expected
    assert n.may_raise_or_warn() is expected


def test_unknown_input_meta_is_assumed_to_raise():
    g = Graph()
    x = g.placeholder("x")  # no meta["val"]
    assert may_raise_or_warn(g.call_function(operator.neg, (x,)))


def test_dce_keeps_nodes_that_may_raise_and_drops_the_rest():
    g, x = _graph(np.int64)
    power = g.call_function(operator.pow, (x, x))
    power.meta["val"] = ArrayMeta(np.dtype(np.int64), (4,))
    view = g.call_method("reshape", (x, (2, 2)))
    view.meta["val"] = ArrayMeta(np.dtype(np.int64), (2, 2))
    g.output(x)
    assert g.eliminate_dead_code() is True
    assert [n.name for n in g.nodes] == ["x", "pow", "output"]


@pytest.mark.parametrize("fn", [
    lambda a: -a, lambda a: a + 1, lambda a: a - 3, lambda a: a * 7, lambda a: a < 5,
    lambda a: a & 3, lambda a: ~a, lambda a: a << 70,
])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int64, np.uint64])
def test_claims_about_integer_arrays_hold_in_numpy(fn, dtype):
    """What the predicate calls safe on integer arrays indeed never warns or raises in NumPy."""
    info = np.iinfo(dtype)
    a = np.array([info.min, info.max, 0, 1], dtype=dtype)
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        fn(a)


DATA = {"f": np.array([0.0, -1.0, np.inf, np.nan]), "i": np.array([0, -1, 2 ** 62, -2 ** 63])}


def _apply(target, x, rest):
    rest = tuple(x if r == "x" else r for r in rest)
    return getattr(x, target)(*rest) if isinstance(target, str) else target(x, *rest)


@pytest.mark.parametrize("dtype, target, rest, raises", [
    # floating-point errors and integer wrap-around only warn: may_raise is False
    (np.float64, operator.truediv, ("x",), None),
    (np.float64, operator.pow, ("x",), None),
    (np.float64, np.log, (), None),
    (np.float64, operator.matmul, ("x",), None),
    (np.float64, "max", (), None),
    (np.float64, "astype", (np.int8,), None),
    (np.int64, operator.floordiv, ("x",), None),
    (np.int64, np.sum, (), None),
    # data-dependent exceptions
    (np.int64, operator.pow, ("x",), ValueError),      # negative integer powers
    (np.int64, operator.getitem, ("x",), IndexError),  # index values are data
])
def test_may_raise_holds_in_numpy(dtype, target, rest, raises):
    g, x = _graph(dtype)
    n = _node(g, x, target, *(x if r == "x" else r for r in rest),
              op="call_method" if isinstance(target, str) else "call_function")
    assert may_raise(n) is (raises is not None)
    if raises is None:
        assert may_raise_or_warn(n)  # it warns, though
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _apply(target, DATA[np.dtype(dtype).kind], rest)  # NumPy warns, never raises
    else:
        with pytest.raises(raises):
            _apply(target, DATA[np.dtype(dtype).kind], rest)
