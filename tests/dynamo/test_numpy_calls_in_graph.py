"""NumPy functions as graph calls of NumPy itself (rules in fx/op_rules: spectral, reorder,
numpy_linalg, numeric, statistics): np.fft's transforms, frequencies and shifts (pocketfft), partition,
argpartition, searchsorted, tril/triu, np.linalg.cholesky/eigvalsh/matrix_power/pinv and
np.linalg.eigh/svd/qr/slogdet (their named results rebuilt as NumPy's classes), interp,
digitize, convolve, trapezoid, polyval, meshgrid, median, percentile, quantile,
count_nonzero, pad, histogram, isin, average, cov and corrcoef are one graph with what is around them
(programs that broke at every one), with NumPy's results to the bit on both backends; NumPy's
errors (n < 1, an unknown norm, a kth out of range, a matrix that is not positive definite) and
warnings are raised as in plain code. Plain NumPy is the oracle."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dynamo

rng = np.random.default_rng(9)


def order_stats(x, q):
    part = np.partition(x * 2.0, (1, q))
    idx = np.argpartition(x, q)
    edges = np.sort(x[:5])
    return part[q] + 1.0, idx[:q], np.searchsorted(edges, x, side="right")


def gram(a):
    g = a.T @ a + np.eye(a.shape[1])
    c = np.linalg.cholesky(g)
    w = np.linalg.eigvalsh(g)
    return np.tril(c) - np.triu(c, 1), w * 2.0, np.linalg.matrix_power(g, 3), np.linalg.pinv(a)


def convolve(a, b, n):
    return np.fft.irfft(np.fft.rfft(a, n) * np.fft.rfft(b, n), n)


def lowpass(img):
    fy = np.fft.fftfreq(img.shape[0])[:, None]
    fx = np.fft.fftfreq(img.shape[1])[None, :]
    mask = (fx * fx + fy * fy) < 0.1
    return np.fft.ifft2(np.fft.fft2(img) * mask).real


def derivative(u, length):
    n = u.shape[0]
    k = np.fft.rfftfreq(n, d=length / n) * 2.0 * np.pi
    return np.fft.irfft(1j * k * np.fft.rfft(u), n)


def spectrum(x):
    f = np.fft.fftshift(np.fft.fft(x, norm="ortho"))
    return np.abs(f) ** 2, np.fft.ifftshift(f), np.fft.hfft(x[:5]), np.fft.ihfft(x)


def volume(v):
    return np.fft.irfftn(np.fft.rfftn(v, axes=(0, 2)), s=(v.shape[0], v.shape[2]), axes=(0, 2))


def resample(t, y, bins):
    grid = np.linspace(t[0], t[-1], 50)
    smooth = np.convolve(np.interp(grid, t, y), np.ones(5) / 5.0, mode="same")
    where = np.digitize(y, bins)
    return smooth, where, np.trapezoid(smooth, grid), np.trapezoid(y * y, dx=0.5)


def surface(x, y, p):
    xx, yy = np.meshgrid(x, y)
    sx, sy = np.meshgrid(x, y, sparse=True, indexing="ij")
    return np.polyval(p, xx) + yy, sx * sy, np.polyval(p, 2.0)


def summary(x):
    centred = x - np.median(x, axis=0)
    return (centred, np.percentile(x, [5, 95]), np.quantile(x * 2.0, 0.5, axis=1, keepdims=True),
            np.count_nonzero(x > 0.5, axis=0), np.median(x))


def padded(img):
    return (np.pad(img * 2.0, ((1, 1), (2, 0)), mode="reflect") + 1.0,
            np.pad(img, 1, constant_values=-1.0), np.pad(img, (0, 2), mode="edge"))


def decompose(a):
    w, v = np.linalg.eigh(a @ a.T)
    r = np.linalg.svd(a)
    q, rr = np.linalg.qr(a, mode="complete")
    s = np.linalg.slogdet(a @ a.T + np.eye(a.shape[0]))
    return (w * 2.0, v, r.S + 1.0, r, r[:2], q @ rr, s.logabsdet, s, len(r), r.Vh.T,
            np.linalg.qr(a, mode="r"), np.linalg.svd(a, compute_uv=False, full_matrices=False))


def binned(x, w):
    counts, edges = np.histogram(x, bins=8, range=(0.0, 1.0))
    centres = 0.5 * (edges[1:] + edges[:-1])
    return (counts * 2, centres, np.average(x, weights=w),
            np.average(np.stack([x, w]), axis=1, returned=True),
            np.isin(np.round(x * 10.0), [1.0, 2.0, 3.0]))


def correlate(x):
    return (np.cov(x) * 2.0, np.corrcoef(x, rowvar=False), np.cov(x[0], x[1], bias=True),
            np.corrcoef(x[0]), np.cov(x[:, 0]))


CASES = [
    (correlate, (rng.random((3, 8)),)),
    (binned, (rng.random(50), rng.random(50) + 0.1)),
    (decompose, (rng.random((4, 3)),)),
    (padded, (rng.random((4, 5)),)),
    (summary, (rng.random((20, 3)),)),
    (resample, (np.sort(rng.random(30)), rng.random(30), np.linspace(0, 1, 6))),
    (surface, (rng.random(7), rng.random(4), np.array([1.0, -2.0, 0.5]))),
    (order_stats, (rng.random(40), 7)),
    (gram, (rng.random((12, 5)),)),
    (convolve, (rng.random(100), rng.random(100), 256)),
    (lowpass, (rng.random((32, 16)),)),
    (derivative, (rng.random(64), 2 * np.pi)),
    (spectrum, (rng.random(33),)),
    (spectrum, (rng.random(16).astype(np.float32),)),
    (volume, (rng.random((6, 3, 8)),)),
]



def _same(got, want):
    if isinstance(want, tuple):  # (named tuples too: SVDResult is SVDResult)
        return (type(got) is type(want) and len(got) == len(want)
                and all(_same(g, w) for g, w in zip(got, want)))
    if not isinstance(want, (np.ndarray, np.generic)):
        return type(got) is type(want) and got == want
    return (type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape
            and np.array_equal(got, want))


@pytest.mark.parametrize("backend", ["eager", "c"])
@pytest.mark.parametrize("fn, args", CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_c_routines_are_one_graph_with_numpys_results(fn, args, backend):
    explained = dynamo.explain(fn, backend=backend)(*args)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained
    compiled = dynamo.compile(fn, backend=backend)
    for _ in range(2):
        assert _same(compiled(*args), fn(*args))


def bad_points(x, n):
    return np.fft.fft(x * 2.0, n)


def bad_norm(x):
    return np.fft.rfft(x * 2.0, norm="sideways")


def kth_out_of_range(x):
    return np.partition(x + 1.0, 50)


def not_positive_definite(a):
    return np.linalg.cholesky(a - 10.0 * np.eye(a.shape[0]))


@pytest.mark.parametrize("backend", ["eager", "c"])
def test_numpys_errors_are_raised_as_in_plain_code(backend):
    x = rng.random(8)
    for fn, args, error in ((bad_points, (x, 0), ValueError), (bad_norm, (x,), ValueError),
                            (kth_out_of_range, (x,), ValueError),
                            (not_positive_definite, (np.eye(3),), np.linalg.LinAlgError)):
        with pytest.raises(error) as plain:
            fn(*args)
        with pytest.raises(error) as compiled:
            dynamo.compile(fn, backend=backend)(*args)
        assert str(compiled.value) == str(plain.value)


def deprecated_form(v):
    return np.fft.fftn(v + 1.0, s=(4, 4))  # (s without axes: NumPy 2 warns)


def test_a_deprecated_form_warns_at_the_users_line():
    v = rng.random((4, 4))
    with warnings.catch_warnings(record=True) as plain:
        warnings.simplefilter("always")
        want = deprecated_form(v)
    with warnings.catch_warnings(record=True) as compiled:
        warnings.simplefilter("always")
        got = dynamo.compile(deprecated_form, backend="eager")(v)
    assert _same(got, want)
    assert [(w.category, str(w.message), w.lineno) for w in compiled] == \
        [(w.category, str(w.message), w.lineno) for w in plain]


def test_every_size_keeps_numpys_results():
    compiled = dynamo.compile(convolve, backend="c")
    for n in (10, 17, 64, 5, 100):
        a, b = rng.random(n), rng.random(n)
        assert _same(compiled(a, b, 2 * n), convolve(a, b, 2 * n))


def poly_at(coeffs, t):
    return np.polyval(coeffs, t) + np.interp(t, [0.0, 1.0], [1.0, 3.0])


def edges_of(x, bins, a):
    counts, edges = np.histogram(x * 1.0, bins)
    edges[0] = -1.0  # (NumPy returns bins itself as the edges: this writes to bins)
    p = np.linalg.matrix_power(a, 1)  # (a itself)
    p[0, 0] = 7.0
    return counts, bins, a


def test_calls_that_return_an_argument_itself_are_left_to_numpy():
    # (a rule's result is a new array: the graph would not know that writing to it writes to
    # the argument; both calls break, with the reason, and keep NumPy's aliasing)
    x = rng.random(20)

    def args():
        return x, np.array([0.0, 0.5, 1.0]), np.eye(2)

    want = edges_of(*args())
    for backend in ("eager", "c"):
        assert _same(dynamo.compile(edges_of, backend=backend)(*args()), want)
    reasons = " ".join(dynamo.explain(edges_of)(*args()).break_reasons)
    assert "comes back as the edges array" in reasons and "is a itself" in reasons


def test_a_python_float_is_not_a_constant_of_these_calls():
    # (polyval, interp, digitize, searchsorted and isin read only its type: a new value
    # recompiled every call, and after 8 the function ran in plain Python)
    compiled = dynamo.compile(poly_at, backend="eager")
    coeffs = np.array([1.0, -2.0, 0.5])
    for t in np.linspace(0.1, 0.9, 12):
        assert _same(compiled(coeffs, float(t)), poly_at(coeffs, float(t)))
    assert len(dynamo.cache_entries(poly_at)) <= 2
