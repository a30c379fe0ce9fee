"""Statistics and clustering: histograms, k-means, correlation, azimuthal integration, rolling mean.

In: nothing. Out: `KERNELS`, a list of `suite.kernel.Kernel`, written as data-analysis code is:
np.histogram / np.bincount, one-hot matrix products for k-means updates, boolean masks
(NPBench azimint_naive).
"""

from __future__ import annotations

import numpy as np

from suite.kernel import Kernel, rng


def histogram(x):
    """Standardise, then a normalised 64-bin histogram."""
    z = (x - x.mean()) / x.std()
    counts, edges = np.histogram(z, bins=64, range=(-4.0, 4.0))
    return counts / counts.sum(), edges


def histogram_bincount(x, lo, hi, nbins):
    """Fixed-width binning by hand: scale, truncate, clip, count."""
    idx = ((x - lo) / (hi - lo) * nbins).astype(np.int64)
    idx = np.clip(idx, 0, nbins - 1)
    return np.bincount(idx, minlength=nbins)


def kmeans(points, centers, steps):
    """Lloyd's algorithm: squared distances, argmin, one-hot matrix product for the means."""
    k = centers.shape[0]
    labels = np.zeros(points.shape[0], dtype=np.int64)
    for _ in range(steps):
        d2 = ((points[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
        labels = np.argmin(d2, axis=1)
        onehot = (labels[:, None] == np.arange(k)[None, :]).astype(points.dtype)
        counts = np.maximum(onehot.sum(axis=0), 1.0)
        centers = (onehot.T @ points) / counts[:, None]
    return centers, labels


def _kmeans_inputs(n):
    points = rng(40).standard_normal((n, 4))
    return points, points[:8].copy(), min(10, n // 8)


def correlation(data):
    """PolyBench correlation: standardise the columns, then z.T @ z."""
    mean = data.mean(axis=0)
    std = data.std(axis=0)
    std = np.where(std <= 0.1, 1.0, std)
    z = (data - mean) / (np.sqrt(data.shape[0]) * std)
    return z.T @ z


def azimint_naive(data, radius, npt):
    """NPBench azimint_naive: the mean of the values in each radial ring, via boolean masks."""
    rmax = radius.max()
    res = np.zeros(npt, dtype=np.float64)
    for i in range(npt):
        r1 = rmax * i / npt
        r2 = rmax * (i + 1) / npt
        mask_r12 = np.logical_and((r1 <= radius), (radius < r2))
        values_r12 = data[mask_r12]
        res[i] = values_r12.mean()
    return res


def _azimint_inputs(n):
    radius = np.sqrt(np.linspace(0.0, 1.0, n))  # every ring gets points
    return rng(41).random(n), radius, 10


def rolling_mean(x, w):
    """Moving average by cumulative sums."""
    c = np.cumsum(x)
    c[w:] = c[w:] - c[:-w]
    return c[w - 1:] / w


KERNELS = [
    Kernel("histogram", "statistics", histogram, lambda n: (rng(42).standard_normal(n),),
           small=32, bench=1_000_000),
    Kernel("histogram_bincount", "statistics", histogram_bincount,
           lambda n: (rng(43).random(n) * 10.0, 0.0, 10.0, 50), small=32, bench=1_000_000),
    Kernel("kmeans", "statistics", kmeans, _kmeans_inputs, small=16, bench=20_000),
    Kernel("correlation", "statistics", correlation,
           lambda n: (rng(44).standard_normal((2 * n, n)),), small=6, bench=300),
    Kernel("azimint_naive", "statistics", azimint_naive, _azimint_inputs, small=64,
           bench=400_000),
    Kernel("rolling_mean", "statistics", rolling_mean, lambda n: (rng(45).random(n), 5),
           small=32, bench=1_000_000),
]
