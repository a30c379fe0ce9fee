"""Neural-network layers in NumPy: softmax, layer norm, MLP, convolution, attention, GELU.

In: nothing. Out: `KERNELS`, a list of `suite.kernel.Kernel`, written as NumPy deep-learning
tutorials and NPBench (mlp, softmax, conv2d) write them.
"""

from __future__ import annotations

import numpy as np

from suite.kernel import Kernel, rng


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def _softmax_rows(x):
    """Numba variant of `softmax` for 2-D x (Numba has no keepdims)."""
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        e = np.exp(x[i] - x[i].max())
        out[i] = e / e.sum()
    return out


softmax.numba_variant = _softmax_rows  # used where a kernel calls softmax under Numba


def layernorm(x, gamma, beta):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * gamma + beta


def _layernorm_rows(x, gamma, beta):
    """Numba variant of `layernorm` (row loop: Numba has no keepdims/axis for mean and var)."""
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        mean = x[i].mean()
        var = ((x[i] - mean) ** 2).mean()
        out[i] = (x[i] - mean) / np.sqrt(var + 1e-5) * gamma + beta
    return out


def _rows(n, extra=0, seed=50):
    x = rng(seed).standard_normal((max(n // 256, 1), 256))
    return (x,) + tuple(rng(seed + 1 + i).standard_normal(256) for i in range(extra))


def relu(x):
    return np.maximum(x, 0)


def mlp(x, w1, b1, w2, b2, w3, b3):
    """NPBench mlp: two ReLU layers and a softmax output layer (helpers inlined)."""
    h = relu(x @ w1 + b1)
    h = relu(h @ w2 + b2)
    return softmax(h @ w3 + b3)


def _mlp_inputs(n):
    r = rng(52)
    d = 64
    return (r.standard_normal((n, d)), r.standard_normal((d, 128)) / 8, r.standard_normal(128),
            r.standard_normal((128, 128)) / 11, r.standard_normal(128),
            r.standard_normal((128, 10)) / 11, r.standard_normal(10))


def conv2d(x, w, bias):
    """Valid 2-D convolution + bias + ReLU as one matrix product per kernel offset."""
    F, C, K, _ = w.shape
    H = x.shape[1] - K + 1
    W = x.shape[2] - K + 1
    out = np.zeros((F, H * W))
    for i in range(K):
        for j in range(K):
            out += w[:, :, i, j] @ x[:, i:i + H, j:j + W].reshape(C, H * W)
    return relu(out.reshape(F, H, W) + bias[:, None, None])


def _conv_inputs(n):
    r = rng(53)
    return r.standard_normal((8, n, n)), r.standard_normal((16, 8, 3, 3)) / 5, r.standard_normal(16)


def attention(q, k, v):
    """Scaled dot-product attention of one head."""
    scores = q @ k.T / np.sqrt(q.shape[-1])
    return softmax(scores) @ v


def gelu(x):
    """GELU, tanh approximation."""
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


KERNELS = [
    Kernel("softmax", "nn", softmax, _rows, small=512, bench=1 << 20, numba=_softmax_rows,
           transcendental=True),
    Kernel("layernorm", "nn", layernorm, lambda n: _rows(n, 2), small=512, bench=1 << 20,
           numba=_layernorm_rows, transcendental=True),
    Kernel("mlp", "nn", mlp, _mlp_inputs, small=4, bench=2000, transcendental=True),
    Kernel("conv2d", "nn", conv2d, _conv_inputs, small=6, bench=64),
    Kernel("attention", "nn", attention,
           lambda n: tuple(rng(54 + i).standard_normal((n, 64)) for i in range(3)), small=8,
           bench=512, transcendental=True),
    Kernel("gelu", "nn", gelu, lambda n: (rng(57).standard_normal(n),), small=32,
           bench=1_000_000, transcendental=True),
]
