"""Rules for C routines called as graph operations (np.partition/argpartition, np.searchsorted,
np.tril/triu, np.linalg.cholesky/eigvalsh/matrix_power/pinv) against NumPy itself: dtype, shape,
scalar-vs-array, and RuleError exactly where NumPy raises (for reasons of shape or arguments:
a singular matrix is data, and NumPy raises when the graph runs)."""

import numpy as np
import pytest

from fx import op_rules
from fx.meta import ArrayMeta

rng = np.random.default_rng(1)
L = np.linalg


def _spd(shape, dtype):
    a = rng.standard_normal(shape).astype(dtype)
    if len(shape) >= 2 and shape[-1] == shape[-2]:
        a = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(shape[-1], dtype=dtype)
    return a.astype(dtype)


def _metas(args):
    return [ArrayMeta(a.dtype, a.shape, isinstance(a, np.generic))
            if isinstance(a, (np.ndarray, np.generic)) else a for a in args]


def _check(fn, args, kwargs):
    try:
        expected = fn(*args, **kwargs)
    except (ValueError, TypeError, IndexError, L.LinAlgError, np.exceptions.AxisError):
        with pytest.raises(op_rules.RuleError):
            op_rules.infer_call(fn, _metas(args), kwargs)
        return
    try:
        got = op_rules.infer_call(fn, _metas(args), kwargs)
    except op_rules.RuleError as exc:  # (left to NumPy on purpose: the rule says so)
        assert "not captured" in str(exc), exc
        return
    assert (got.dtype, got.shape, got.is_scalar) == (
        expected.dtype, np.shape(expected), isinstance(expected, np.generic)), (fn, kwargs)


DTYPES = [np.float64, np.float32, np.int64, np.complex128]


@pytest.mark.parametrize("fn", [np.partition, np.argpartition], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", DTYPES + [np.bool_], ids=lambda d: np.dtype(d).name)
def test_partition(fn, dtype):
    for shape in [(9,), (4, 6), (2, 3, 5)]:
        a = _spd(shape, dtype) if dtype != np.bool_ else rng.random(shape) > 0.5
        for kwargs in [{"kth": 2}, {"kth": -1}, {"kth": 9}, {"kth": (0, 2)}, {"kth": 1, "axis": 0},
                       {"kth": 3, "axis": None}, {"kth": 1, "axis": 4}, {"kth": 1.5},
                       {"kth": 0, "kind": "introselect"}, {"kth": 0, "kind": "quick"}]:
            _check(fn, [a], kwargs)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_searchsorted(dtype):
    a = np.sort(_spd((10,), dtype))
    for v in [_spd((3,), dtype), _spd((2, 4), np.float64), a[3], _spd((4, 4), dtype)]:
        for kwargs in [{}, {"side": "right"}, {"side": "middle"},
                       {"sorter": np.argsort(a)}, {"sorter": np.arange(3)}]:
            _check(np.searchsorted, [a, v], kwargs)
    _check(np.searchsorted, [_spd((3, 3), dtype), a[:2]], {})


@pytest.mark.parametrize("fn", [np.tril, np.triu], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", DTYPES + [np.bool_], ids=lambda d: np.dtype(d).name)
def test_tril_triu(fn, dtype):
    for shape in [(4,), (3, 5), (2, 4, 4), (6, 1)]:
        m = _spd(shape, dtype) if dtype != np.bool_ else rng.random(shape) > 0.5
        for kwargs in [{}, {"k": 1}, {"k": -2}, {"k": 1.5}]:
            _check(fn, [m], kwargs)


@pytest.mark.parametrize("dtype", DTYPES + [np.float16], ids=lambda d: np.dtype(d).name)
def test_linalg_routines(dtype):
    for shape in [(3, 3), (2, 4, 4), (2, 3), (3,)]:
        a = _spd(shape, dtype)
        _check(L.cholesky, [a], {})
        _check(L.eigvalsh, [a], {})
        _check(L.eigvalsh, [a], {"UPLO": "U"})
        _check(L.eigvalsh, [a], {"UPLO": "X"})
        for n in (0, 1, 3, -1, 2.5):
            _check(L.matrix_power, [a, n], {})
        _check(L.pinv, [a], {})
        _check(L.pinv, [a], {"hermitian": True})


def test_the_rules_do_not_touch_data():
    big = ArrayMeta(np.dtype(np.float64), (4000, 4000))
    assert op_rules.infer_call(L.cholesky, [big], {}).shape == (4000, 4000)
    assert op_rules.infer_call(np.partition, [big], {"kth": 3999}).shape == (4000, 4000)
    assert op_rules.infer_call(L.pinv, [ArrayMeta(np.dtype(np.float64), (4000, 30))],
                               {}).shape == (30, 4000)


def _descs(r):
    if isinstance(r, tuple):
        return (type(r).__name__ if type(r) is not tuple else "tuple",
                tuple(_descs(x) for x in r))
    if isinstance(r, ArrayMeta):
        return (r.dtype, r.shape, r.is_scalar)
    return (r.dtype, np.shape(r), isinstance(r, np.generic))


def _check_named(fn, a, kwargs):
    try:
        expected = fn(a, **kwargs)
    except (ValueError, TypeError, L.LinAlgError):
        with pytest.raises(op_rules.RuleError):
            op_rules.infer_call(fn, _metas([a]), kwargs)
        return
    got = op_rules.infer_call(fn, _metas([a]), kwargs)
    kind = getattr(got, "kind", tuple) if isinstance(got, tuple) else None
    desc = _descs(got)
    if kind is not None:  # (NamedResults: its class is what NumPy returned)
        desc = (kind.__name__ if kind is not tuple else "tuple", desc[1])
    assert desc == _descs(expected), (fn.__name__, a.shape, kwargs)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.int64],
                         ids=lambda d: np.dtype(d).name)
def test_linalg_named_results(dtype):
    for shape in [(3, 3), (2, 4, 4), (5, 3), (3, 5), (3,)]:
        a = _spd(shape, dtype)
        _check_named(L.eigh, a, {})
        _check_named(L.eigh, a, {"UPLO": "U"})
        _check_named(L.slogdet, a, {})
        for kwargs in [{}, {"full_matrices": False}, {"compute_uv": False}, {"hermitian": True}]:
            _check_named(L.svd, a, kwargs)
        for mode in ("reduced", "complete", "r"):
            _check_named(L.qr, a, {"mode": mode})
    with pytest.raises(op_rules.RuleError, match="not captured"):
        op_rules.infer_call(L.qr, [ArrayMeta(np.dtype(np.float64), (3, 3))], {"mode": "raw"})
