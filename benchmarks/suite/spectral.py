"""FFT-based code: convolution, spectral derivative, low-pass filtering of an image.

In: nothing. Out: `KERNELS`, a list of `suite.kernel.Kernel`, plain np.fft code around
elementwise work (the FFTs themselves stay NumPy calls; what a compiler can win is around them).
"""

from __future__ import annotations

import numpy as np

from suite.kernel import Kernel, rng


def fft_convolve(a, b):
    """Linear convolution of two real signals through rfft."""
    n = a.shape[0] + b.shape[0] - 1
    return np.fft.irfft(np.fft.rfft(a, n) * np.fft.rfft(b, n), n)


def spectral_derivative(u, length):
    """d/dx of a periodic signal: multiply the spectrum by i k."""
    n = u.shape[0]
    k = np.fft.rfftfreq(n, d=length / n) * 2.0 * np.pi
    return np.fft.irfft(1j * k * np.fft.rfft(u), n)


def fft_lowpass(img, cutoff):
    """Remove spatial frequencies above `cutoff` (a circular mask in the 2-D spectrum)."""
    fy = np.fft.fftfreq(img.shape[0])[:, None]
    fx = np.fft.fftfreq(img.shape[1])[None, :]
    mask = fx ** 2 + fy ** 2 <= cutoff ** 2
    return np.fft.ifft2(np.fft.fft2(img) * mask).real


KERNELS = [
    Kernel("fft_convolve", "spectral", fft_convolve,
           lambda n: (rng(60).random(n), rng(61).random(n // 4 + 1)), small=16, bench=200_000),
    Kernel("spectral_derivative", "spectral", spectral_derivative,
           lambda n: (np.sin(np.linspace(0.0, 2 * np.pi, n, endpoint=False)) + rng(62).random(n),
                      2 * np.pi), small=16, bench=262_144),
    Kernel("fft_lowpass", "spectral", fft_lowpass, lambda n: (rng(63).random((n, n)), 0.1),
           small=8, bench=256),
]
