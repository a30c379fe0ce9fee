"""Random graphs through the C backend: mixed dtypes, broadcasting, Fortran-order inputs, NaNs,
reductions with keepdims feeding pointwise ops. Eager ``gm.forward`` is the oracle.

Seeded (deterministic); each graph compiles one small library, so the count stays modest.
"""

from __future__ import annotations

import operator
import random
import shutil

import numpy as np
import pytest

from fx import Graph, GraphModule, Proxy
from fx.passes.shape_prop import ShapePropError, propagate_shapes
from dynamo.backends.c import compile_graph

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, np.maximum, np.minimum,
          operator.lt, operator.ge, operator.eq, np.logical_and, operator.and_, "where"]
UNARY = [operator.neg, np.abs, np.exp, np.sqrt, np.sign, np.square, lambda v: v ** 2,
         lambda v: v.astype(np.float32), lambda v: v.sum(axis=-1, keepdims=True),
         lambda v: v.max(axis=0), lambda v: np.clip(v, -1, 1), lambda v: v * 3,
         lambda v: 2.5 - v]
DTYPES = ["bool", "int8", "uint8", "int32", "int64", "uint64", "float32", "float64"]
SHAPES = [(4, 6), (6,), (1, 6), (4, 1)]


def _input(rng, dt, shape):
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt[0] in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -100), min(info.max, 100), size=shape, dtype=dt)
    a = rng.standard_normal(shape).astype(dt)
    a.reshape(-1)[:1] = np.nan
    return a


def _random_graph(seed):
    r, rng = random.Random(seed), np.random.default_rng(seed)
    inputs = [_input(rng, r.choice(DTYPES), r.choice(SHAPES)) for _ in range(3)]
    if r.random() < 0.3:
        inputs[0] = np.asfortranarray(rng.standard_normal((4, 6)))
    g = Graph()
    vals = [Proxy(g.placeholder(f"a{i}")) for i in range(3)]
    for _ in range(r.randint(3, 9)):
        if r.random() < 0.6:
            op, a, b = r.choice(BINARY), r.choice(vals), r.choice(vals)
            vals.append(np.where(a > 0, a, b) if op == "where" else op(a, b))
        else:
            vals.append(r.choice(UNARY)(r.choice(vals)))
    g.output(tuple(v.node for v in vals[3:][-3:]))
    return GraphModule(g), inputs


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16])
def test_random_graph_matches_numpy(seed):
    gm, inputs = _random_graph(seed)
    try:
        propagate_shapes(gm, inputs)
        with np.errstate(all="ignore"):
            want = gm.forward(*[i.copy() for i in inputs])
    except (ShapePropError, TypeError, ValueError):
        pytest.skip("NumPy rejects this random graph")
    f = compile_graph(gm, inputs, min_size=0, calibrate=False)
    # The backend returns gm.forward itself when nothing lowers: that would prove nothing.
    runners = getattr(f, "runners", None)
    assert runners, "no C kernel was built for this graph"
    with np.errstate(all="ignore"):
        got = f(*inputs)
    assert sum(r.calls for r in runners.values()) > 0, "no kernel ran"
    assert type(got) is type(want) and len(got) == len(want)
    for g, w in zip(got, want):
        assert type(g) is type(w) and g.dtype == w.dtype and np.shape(g) == np.shape(w)
        if w.dtype.kind == "f":
            rtol = 1e-6 if w.dtype == np.float32 else 1e-13
            np.testing.assert_allclose(g, w, rtol=rtol, atol=0, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)
