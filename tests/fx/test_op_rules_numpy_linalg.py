"""np.linalg rules (norm, inv, det, solve) against NumPy itself: dtype, shape, scalar-vs-array,
and RuleError exactly where NumPy raises for shape reasons."""

import numpy as np
import pytest

from fx import op_rules
from fx.meta import ArrayMeta

L = np.linalg
rng = np.random.default_rng(0)


def well_conditioned(shape, dtype=np.float64):
    a = rng.standard_normal(shape).astype(dtype)
    return a + 4 * np.eye(shape[-1], dtype=dtype) if len(shape) >= 2 and shape[-1] == shape[-2] else a


CASES = [
    (L.inv, [(3, 3)], {}, np.float64), (L.inv, [(2, 4, 4)], {}, np.float32),
    (L.inv, [(2, 2)], {}, np.int64), (L.inv, [(2, 3)], {}, np.float64),
    (L.det, [(3, 3)], {}, np.float64), (L.det, [(5, 2, 2)], {}, np.float32), (L.det, [(3,)], {}, np.float64),
    (L.solve, [(3, 3), (3,)], {}, np.float64), (L.solve, [(3, 3), (3, 2)], {}, np.float32),
    (L.solve, [(4, 3, 3), (4, 3, 2)], {}, np.float64), (L.solve, [(3, 3), (4,)], {}, np.float64),
    (L.norm, [(2, 3)], {}, np.float64), (L.norm, [(2, 3)], {"axis": 1}, np.float32),
    (L.norm, [(2, 3)], {"axis": 0, "keepdims": True}, np.float64),
    (L.norm, [(2, 3)], {"ord": "fro"}, np.float64), (L.norm, [(2, 3)], {"ord": 2}, np.int32),
    (L.norm, [(6,)], {"ord": 1}, np.float32), (L.norm, [(2, 3, 4)], {"ord": 2}, np.float64),
    (L.norm, [(2, 3, 4)], {"axis": (1, 2)}, np.complex128),
]


@pytest.mark.parametrize("fn, shapes, kwargs, dtype", CASES,
                         ids=[f"{c[0].__name__}-{c[1]}-{c[2]}" for c in CASES])
def test_linalg_rules_match_numpy(fn, shapes, kwargs, dtype):
    arrays = [well_conditioned(s, dtype) for s in shapes]
    try:
        expected = fn(*arrays, **kwargs)
    except (ValueError, L.LinAlgError):
        with pytest.raises(op_rules.RuleError):
            op_rules.infer_call(fn, [ArrayMeta(a.dtype, a.shape) for a in arrays], kwargs)
        return
    got = op_rules.infer_call(fn, [ArrayMeta(a.dtype, a.shape) for a in arrays], kwargs)
    assert (got.dtype, got.shape, got.is_scalar) == (
        expected.dtype, np.shape(expected), isinstance(expected, np.generic))


def test_linalg_rules_do_not_touch_data():
    big = ArrayMeta(np.float64, (10**5, 10**5))
    assert op_rules.infer_call(L.inv, [big], {}).shape == (10**5, 10**5)
    assert op_rules.infer_call(L.norm, [big], {"axis": 1}).shape == (10**5,)
