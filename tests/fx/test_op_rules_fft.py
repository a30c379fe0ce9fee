"""np.fft rules against NumPy itself: dtype and shape of every transform, frequency and shift
over dtypes, lengths, axes and norms, and RuleError wherever NumPy raises (or warns about a form
it deprecates: the warning belongs to the user's line, so the call is not captured)."""

import warnings

import numpy as np
import pytest

from fx import op_rules
from fx.meta import ArrayMeta

F = np.fft
rng = np.random.default_rng(0)

DTYPES = [np.float64, np.float32, np.complex128, np.complex64, np.int64, np.int32, np.bool_]
ONE_D = [F.fft, F.ifft, F.rfft, F.irfft, F.hfft, F.ihfft]
N_D = [F.fft2, F.ifft2, F.fftn, F.ifftn, F.rfft2, F.irfft2, F.rfftn, F.irfftn]


def _data(shape, dtype):
    a = rng.standard_normal(shape) + (1j * rng.standard_normal(shape)
                                      if np.dtype(dtype).kind == "c" else 0)
    return a.astype(dtype)


#: what the rules leave to plain NumPy although NumPy computes it (each says so): a graph break
NOT_CAPTURED = ("not captured", "invalid number of FFT data points")


def _check(fn, args, kwargs):
    metas = [ArrayMeta(a.dtype, a.shape) if isinstance(a, np.ndarray) else a for a in args]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # (NumPy's own, when it runs)
            warnings.simplefilter("error", DeprecationWarning)
            expected = fn(*args, **kwargs)
    except (ValueError, TypeError, IndexError, ZeroDivisionError, DeprecationWarning):
        with pytest.raises(op_rules.RuleError):
            op_rules.infer_call(fn, metas, kwargs)
        return
    if fn in (F.rfft, F.ihfft, F.rfft2, F.rfftn) and np.dtype(args[0].dtype).kind == "c":
        # (NumPy 2 discards the imaginary part with a ComplexWarning: left to NumPy)
        return
    try:
        got = op_rules.infer_call(fn, metas, kwargs)
    except op_rules.RuleError as exc:
        assert any(reason in str(exc) for reason in NOT_CAPTURED), exc
        return
    assert (got.dtype, got.shape, got.is_scalar) == (expected.dtype, expected.shape, False)


@pytest.mark.parametrize("fn", ONE_D, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_one_dimensional_transforms(fn, dtype):
    for shape in [(8,), (1,), (5, 7), (2, 3, 4)]:
        a = _data(shape, dtype)
        for kwargs in [{}, {"n": 11}, {"n": 1}, {"n": 0}, {"axis": 0}, {"axis": -2},
                       {"axis": 3}, {"norm": "ortho"}, {"norm": "forward"}, {"norm": "nope"},
                       {"n": 6, "axis": 0, "norm": "backward"}]:
            _check(fn, [a], kwargs)


@pytest.mark.parametrize("fn", N_D, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex64, np.int64],
                         ids=lambda d: np.dtype(d).name)
def test_n_dimensional_transforms(fn, dtype):
    for shape in [(4, 6), (3, 4, 5), (2, 1), (8,)]:
        a = _data(shape, dtype)
        for kwargs in [{}, {"axes": (0,)}, {"axes": (-1, 0)}, {"s": (3, 5), "axes": (0, 1)},
                       {"s": (4,), "axes": (1,)}, {"s": (0, 2), "axes": (0, 1)},
                       {"s": (3, 4)}, {"axes": (0, 0)}, {"axes": (0, 5)}, {"norm": "ortho"},
                       {"s": (3, None), "axes": (0, 1)}]:
            _check(fn, [a], kwargs)


@pytest.mark.parametrize("fn", [F.fftfreq, F.rfftfreq], ids=lambda f: f.__name__)
def test_sample_frequencies(fn):
    for n in [1, 2, 7, 8, 0]:
        for d in [1.0, 0.25, 3, np.float32(0.5), 0.0]:
            _check(fn, [n], {"d": d})
    _check(fn, [4], {"device": "gpu"})


@pytest.mark.parametrize("fn", [F.fftshift, F.ifftshift], ids=lambda f: f.__name__)
def test_shifts(fn):
    for shape in [(5,), (4, 3), (2, 3, 4)]:
        for dtype in [np.float32, np.complex128, np.int16]:
            a = _data(shape, dtype)
            for kwargs in [{}, {"axes": 0}, {"axes": (0, -1)}, {"axes": 7}]:
                _check(fn, [a], kwargs)


def test_out_is_not_captured():
    a = _data((8,), np.complex128)
    with pytest.raises(op_rules.RuleError, match="out="):
        op_rules.infer_call(F.fft, [ArrayMeta(a.dtype, a.shape)], {"out": ArrayMeta(a.dtype, (8,))})


def test_the_rules_do_not_touch_data():
    big = ArrayMeta(np.dtype(np.float64), (4096, 4096))
    assert op_rules.infer_call(F.rfft2, [big], {}).shape == (4096, 2049)
    assert op_rules.infer_call(F.irfft, [big], {"n": 10**6}).shape == (4096, 10**6)
