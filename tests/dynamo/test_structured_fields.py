"""Field access on structured arrays: captured, or a graph break with a clear reason.

In: functions reading and writing fields of a structured array (``a["x"]``, after a boolean
selection ``a[ids > 2]["x"]``, before one ``a["x"][mask]``, a field with its own subarray
shape, a field of a NumPy void scalar ``a[2]["x"]``, a multi-field index ``a[["x", "y"]]``),
on the eager and the C backend. Out: the same results, dtypes and mutations as plain NumPy, one
graph where the field is read after a selection (the getitem rule raised an internal TypeError
there, on the selection's data-dependent length), and a break naming the multi-field index.
"""

from __future__ import annotations

import numpy as np
import pytest

import dynamo
from dynamo.backends.c import make_backend

_DT = np.dtype([("x", np.float64), ("y", np.int32), ("v", np.float32, (2,))])


def _records() -> np.ndarray:
    a = np.zeros(6, _DT)
    a["x"] = np.arange(6.0) * 1.5
    a["y"] = np.arange(6) * 2
    a["v"] = np.arange(12.0).reshape(6, 2)
    return a


def mask_then_field(a, ids):
    return a[ids > 2]["x"] * 2.0


def mask_then_int_field(a, ids):
    return a[ids > 2]["y"] + 1


def mask_then_subarray_field(a, ids):
    return a[ids > 2]["v"].sum(axis=1)


def field_then_mask(a, ids):
    return a["x"][ids > 2] + 1.0


def field(a, ids):
    return np.sqrt(a["x"]) + a["y"]


def void_scalar_field(a, ids):
    return a[2]["x"] + 1.0


def write_field(a, ids):
    a["y"] = ids * 3  # (an int64 value cast into the int32 field, as NumPy casts)
    view = a["x"]
    view[1:3] = -1.0  # a field is a view: the write reaches `a`
    return a["x"] * 2.0


def write_field_after_mask(a, ids):
    chosen = a[ids > 2]
    chosen["x"] = 7.0  # (a copy: `a` keeps its values)
    return chosen["x"] + a["x"][:3].sum()


@pytest.mark.parametrize("fn", [mask_then_field, mask_then_int_field, mask_then_subarray_field,
                                field_then_mask, field, void_scalar_field, write_field,
                                write_field_after_mask])
def test_field_access_is_captured_in_one_graph(check, fn):
    check(fn, _records(), np.arange(6), graphs=1)


@pytest.mark.parametrize("fn", [mask_then_field, mask_then_subarray_field, write_field])
def test_field_access_on_the_c_backend(check, fn):
    backend = make_backend(min_size=0, calibrate=False)
    out = dynamo.explain(fn, backend)(_records(), np.arange(6))
    assert out.graph_count == 1 and out.graph_break_count == 0, out
    dynamo.reset()
    for _ in range(2):
        expected_a, got_a = _records(), _records()
        expected = fn(expected_a, np.arange(6))
        check.assert_same(expected, dynamo.compile(fn, backend=backend)(got_a, np.arange(6)))
        check.assert_same(expected_a, got_a, "the records after the call")


def multi_field(a):
    return a[["x", "y"]]


def test_a_multi_field_index_breaks_with_its_reason(check):
    a = _records()
    check(multi_field, a, graphs=0)
    reasons = " ".join(dynamo.explain(multi_field)(a).break_reasons)
    assert "multi-field index of a structured array" in reasons, reasons
